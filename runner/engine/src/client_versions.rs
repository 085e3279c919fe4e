//! The versions of the client tools each stage instance ran, per host (and
//! per client root): `rados`, `rbd`, `fio`, and the librados and librbd
//! they load (the file `ldd` resolves, its package and that package's
//! version: `dpkg-query` on Debian, `rpm -qf` elsewhere, else the Ceph
//! version the tools print). A client-only upgrade changes nothing the
//! cluster reports; this is where it shows.
//!
//! One probe per host and client root per run, for the tools not asked
//! about before (cached): one `sh` there, which costs about 0.2-0.4 s here
//! (`dpkg-query -S` is most of it; `rados --version` ~20 ms, `fio
//! --version` ~35 ms, `ldd` ~20 ms), after the stage's own commands, so it
//! never overlaps a measurement.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cancel::CancelToken;
use crate::exec::{self, CommandSpec, Exit};
use crate::hosts::Host;
use crate::plan::StageClient;
use pipeline_stage_api::client_root;

/// The client tools a stage instance ran on one host, as that host (or the
/// client root it ran them from) has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientVersions {
    pub host: String,
    /// The stage's client, by its name in `clients:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The client root the tools ran from (absent: the host's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// `uname -r` there (a client root shares the host's kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub tools: Vec<ToolVersion>,
    /// The Ceph libraries the tools load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryVersion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolVersion {
    /// `rados`, `rbd`, `fio`.
    pub name: String,
    /// Where the shell found it; absent: not installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The version it reports, e.g. `16.2.15` or `3.33`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The first line of `TOOL --version`, as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<String>,
    /// The libraries of [`ClientVersions::libraries`] it loads, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loads: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LibraryVersion {
    /// `librados`, `librbd`.
    pub name: String,
    /// The file the tools load, links resolved.
    pub file: String,
    /// The package that owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The package's version (`16.2.15+ds-0+deb12u2`), or where no package
    /// manager knows the file, the Ceph version the tools report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where `version` comes from.
    pub source: VersionSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VersionSource {
    Dpkg,
    Rpm,
    /// `rados --version` or `rbd --version`.
    Tool,
    Unknown,
}

/// The upstream part of a package version, as people name releases:
/// `16.2.15+ds-0+deb12u2` → `16.2.15`, `2:18.2.7-1.el9` → `18.2.7`.
pub fn upstream(version: &str) -> &str {
    let without_epoch = version.split_once(':').map_or(version, |(_, v)| v);
    without_epoch
        .split(['+', '-', '~'])
        .next()
        .unwrap_or(without_epoch)
}

/// The script a host runs: for each tool given as an argument, where it is,
/// the first line of its `--version`, and the librados/librbd `ldd` finds
/// for it (links resolved); then, once for all of those files, their
/// packages and versions. Every line a tool prints is kept as it printed
/// it, after a marker line naming what follows.
const PROBE_SCRIPT: &str = r#"printf '@@kernel\n'; uname -r
libs=
for tool in "$@"; do
  printf '@@tool %s\n' "$tool"
  path=$(command -v "$tool") || continue
  printf '@@path %s\n' "$path"
  printf '@@version\n'; "$tool" --version 2>&1 | head -n 1
  for lib in $(ldd "$path" 2>/dev/null | sed -n 's/^[[:space:]]*lib\(rados\|rbd\)\.so[^ ]* => \([^ ]*\) .*/\2/p'); do
    real=$(readlink -f "$lib")
    printf '@@loads %s %s\n' "$lib" "$real"
    case " $libs " in *" $real "*) ;; *) libs="$libs $real" ;; esac
  done
done
[ -n "$libs" ] || exit 0
if command -v dpkg-query >/dev/null 2>&1; then
  printf '@@dpkg-query -S\n'; owners=$(dpkg-query -S $libs 2>&1); printf '%s\n' "$owners"
  printf '@@dpkg-query -W\n'; dpkg-query -W -f '${Package} ${Version}\n' $(printf '%s\n' "$owners" | sed -n 's/^\([^ :]*\)\(:[^ :]*\)\{0,1\}: .*/\1\2/p' | sort -u) 2>&1
elif command -v rpm >/dev/null 2>&1; then
  printf '@@rpm -qf\n'; rpm -qf --qf '%{NAME} %{VERSION}-%{RELEASE}\n' $libs 2>&1
fi
exit 0
"#;

/// What one probe found on a host (or in a client root).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Probed {
    pub kernel: Option<String>,
    pub tools: Vec<ToolVersion>,
    /// Each library file once, in the order first loaded.
    pub libraries: Vec<LibraryVersion>,
}

/// Reads the probe's output (see [`PROBE_SCRIPT`]).
pub fn parse_probe(text: &str) -> Probed {
    let mut probed = Probed::default();
    let mut section = "";
    let mut owners: Vec<(String, String)> = Vec::new();
    let mut package_versions: BTreeMap<String, String> = BTreeMap::new();
    let mut rpm_lines: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(marker) = line.strip_prefix("@@") {
            let (name, rest) = marker.split_once(' ').unwrap_or((marker, ""));
            section = match name {
                "tool" => {
                    probed.tools.push(ToolVersion {
                        name: rest.trim().to_string(),
                        path: None,
                        version: None,
                        reported: None,
                        loads: Vec::new(),
                    });
                    "tool"
                }
                "path" => {
                    if let Some(tool) = probed.tools.last_mut() {
                        tool.path = Some(rest.trim().to_string());
                    }
                    "tool"
                }
                "loads" => {
                    add_load(&mut probed, rest);
                    "tool"
                }
                "kernel" => "kernel",
                "version" => "version",
                "dpkg-query" if rest == "-S" => "dpkg-S",
                "dpkg-query" if rest == "-W" => "dpkg-W",
                "rpm" => "rpm",
                _ => "",
            };
            continue;
        }
        match section {
            "kernel" if probed.kernel.is_none() && !line.trim().is_empty() => {
                probed.kernel = Some(line.trim().to_string());
            }
            "version" => {
                if let Some(tool) = probed.tools.last_mut().filter(|t| t.reported.is_none()) {
                    tool.reported = Some(line.trim().to_string());
                    tool.version = tool_version(line);
                }
            }
            "dpkg-S" => owners.extend(dpkg_owner(line)),
            "dpkg-W" => {
                if let Some((package, version)) = line.trim().split_once(' ') {
                    package_versions.insert(package.to_string(), version.trim().to_string());
                }
            }
            "rpm" if !line.trim().is_empty() => rpm_lines.push(line.trim().to_string()),
            _ => {}
        }
    }
    for library in &mut probed.libraries {
        if let Some((package, _)) = owners.iter().find(|(_, file)| *file == library.file) {
            library.version = package_versions.get(package).cloned();
            library.package = Some(package.clone());
            library.source = VersionSource::Dpkg;
        }
    }
    // rpm prints one line per file, in the order the files were given.
    if !rpm_lines.is_empty() && rpm_lines.len() == probed.libraries.len() {
        for (library, line) in probed.libraries.iter_mut().zip(&rpm_lines) {
            if let Some((package, version)) = line.split_once(' ')
                && !line.contains("not owned")
            {
                library.package = Some(package.to_string());
                library.version = Some(version.to_string());
                library.source = VersionSource::Rpm;
            }
        }
    }
    fall_back_to_tool_versions(&mut probed);
    probed
}

/// `@@loads /lib/x86_64-linux-gnu/librados.so.2 /usr/lib/.../librados.so.2.0.0`.
fn add_load(probed: &mut Probed, rest: &str) {
    let Some((link, file)) = rest.trim().split_once(' ') else {
        return;
    };
    let soname = Path::new(link)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = soname.split(".so").next().unwrap_or(&soname).to_string();
    if !probed.libraries.iter().any(|l| l.file == file) {
        probed.libraries.push(LibraryVersion {
            name: name.clone(),
            file: file.to_string(),
            package: None,
            version: None,
            source: VersionSource::Unknown,
        });
    }
    if let Some(tool) = probed.tools.last_mut()
        && !tool.loads.contains(&name)
    {
        tool.loads.push(name);
    }
}

/// `librados2:amd64: /usr/lib/x86_64-linux-gnu/librados.so.2.0.0` →
/// (`librados2`, the file); dpkg-query's own messages are no owner.
fn dpkg_owner(line: &str) -> Option<(String, String)> {
    let (package, file) = line.split_once(": ")?;
    if package.contains(' ') || !file.starts_with('/') {
        return None;
    }
    let package = package.split(':').next().unwrap_or(package);
    Some((package.to_string(), file.trim().to_string()))
}

/// The version in a tool's `--version` line: `ceph version 16.2.15 (…)
/// pacific (stable)` → `16.2.15`, `fio-3.33` → `3.33`.
pub fn tool_version(line: &str) -> Option<String> {
    line.split_whitespace()
        .map(|word| word.rsplit_once('-').map_or(word, |(_, v)| v))
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('.'))
        .map(str::to_string)
}

/// A library no package manager knows: the Ceph version printed by a Ceph
/// tool that loads it (fio's own version says nothing about librados).
fn fall_back_to_tool_versions(probed: &mut Probed) {
    for library in probed.libraries.iter_mut().filter(|l| l.version.is_none()) {
        let reported = probed.tools.iter().find(|t| {
            t.loads.contains(&library.name)
                && t.reported
                    .as_deref()
                    .is_some_and(|r| r.starts_with("ceph version"))
        });
        if let Some(version) = reported.and_then(|t| t.version.clone()) {
            library.version = Some(version);
            library.source = VersionSource::Tool;
        }
    }
}

/// Where the tools of one host and client come from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    host: String,
    root: Option<PathBuf>,
}

/// What the run learnt so far of each host and client root.
#[derive(Debug, Default)]
struct Known {
    probed: Probed,
    /// A probe that failed, to say in every stage that asked.
    failure: Option<String>,
}

/// The probes of one run: each host and root asked about each tool once.
#[derive(Debug, Default)]
pub struct VersionCache {
    known: BTreeMap<Place, Known>,
    probes: usize,
}

/// What a probe needs besides the host and the tools.
pub struct ProbeContext<'a> {
    pub run_dir: &'a Path,
    pub ceph: &'a crate::ceph::CephConnection,
    pub cancel: &'a CancelToken,
}

impl VersionCache {
    /// The versions of `tools` on `host` from `client` (probing what is not
    /// known yet), and a note when they could not be read.
    pub fn versions(
        &mut self,
        host: &Host,
        client: Option<&StageClient>,
        tools: &[String],
        ctx: &ProbeContext,
    ) -> (ClientVersions, Option<String>) {
        let root = client.and_then(|c| c.root.as_ref());
        let place = Place {
            host: host.name.clone(),
            root: root.map(|r| r.root.clone()),
        };
        let unknown: Vec<String> = {
            let known = self.known.get(&place);
            tools
                .iter()
                .filter(|t| known.is_none_or(|k| !k.probed.tools.iter().any(|p| &p.name == *t)))
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            self.probes += 1;
            let result = probe(host, root, &unknown, ctx, self.probes);
            let known = self.known.entry(place.clone()).or_default();
            match result {
                Ok(probed) => merge(&mut known.probed, probed),
                Err(e) => known.failure = Some(e),
            }
        }
        let known = &self.known[&place];
        let record = assemble(host, client, tools, &known.probed);
        let note = known
            .failure
            .as_ref()
            .map(|e| format!("client versions on {} not read: {e}", host.name));
        (record, note)
    }
}

fn merge(into: &mut Probed, probed: Probed) {
    into.kernel = into.kernel.take().or(probed.kernel);
    into.tools.extend(probed.tools);
    for library in probed.libraries {
        if !into.libraries.iter().any(|l| l.file == library.file) {
            into.libraries.push(library);
        }
    }
}

/// The record of `tools` (in the order the stage ran them) from what is known.
fn assemble(
    host: &Host,
    client: Option<&StageClient>,
    tools: &[String],
    probed: &Probed,
) -> ClientVersions {
    let tools: Vec<ToolVersion> = tools
        .iter()
        .filter_map(|t| probed.tools.iter().find(|p| &p.name == t).cloned())
        .collect();
    let libraries = probed
        .libraries
        .iter()
        .filter(|l| tools.iter().any(|t| t.loads.contains(&l.name)))
        .cloned()
        .collect();
    ClientVersions {
        host: host.name.clone(),
        client: client.and_then(|c| c.name.clone()),
        root: client
            .and_then(|c| c.root.as_ref())
            .map(|r| r.root.display().to_string()),
        kernel: probed.kernel.clone(),
        tools,
        libraries,
    }
}

/// How long one probe may take: a host that does not answer in this time
/// has its versions noted as unread, and the run goes on.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the probe on `host` (inside `root` when given); its output files go
/// to `RUN_DIR/clients/`, kept as the evidence of what was read.
fn probe(
    host: &Host,
    root: Option<&client_root::ClientRoot>,
    tools: &[String],
    ctx: &ProbeContext,
    n: usize,
) -> Result<Probed, String> {
    let mut argv = vec![
        "sh".to_string(),
        "-c".to_string(),
        PROBE_SCRIPT.to_string(),
        "sh".to_string(),
    ];
    argv.extend(tools.iter().cloned());
    let mut spec = CommandSpec::new(argv).timeout(PROBE_TIMEOUT);
    // Tool output in one language: `--version` lines are parsed.
    spec = spec.env("LC_ALL", "C");
    if let Some(root) = root {
        let binds = client_root::binds(ctx.ceph, ctx.run_dir);
        spec = root.wrap(&spec, Path::new(client_root::LAUNCHER), &binds);
    }
    let folder = ctx.run_dir.join("clients");
    std::fs::create_dir_all(&folder).map_err(|e| format!("creating {}: {e}", folder.display()))?;
    let mut base = format!("{n:02}-{}", crate::context::sanitize(&host.name));
    if let Some(root) = root {
        base.push('-');
        base.push_str(&crate::context::sanitize(
            &root
                .name
                .clone()
                .unwrap_or_else(|| root.root.display().to_string()),
        ));
    }
    let (out, err) = (
        folder.join(format!("{base}-versions.stdout")),
        folder.join(format!("{base}-versions.stderr")),
    );
    let wrapped = host.wrap(&spec, Some(PROBE_TIMEOUT));
    let finished = exec::run_to_files(&wrapped, &out, &err, None, ctx.cancel)
        .map_err(|e| format!("cannot run the probe: {e}"))?;
    if !host.is_local() {
        pipeline_stage_api::hosts::take_cpu_report(&err);
    }
    let stdout = pipeline_stage_api::context::read_output_start(&out);
    match finished.exit {
        Exit::Code(0) => Ok(parse_probe(&stdout)),
        other => Err(format!(
            "the probe ended with {other}: {}",
            crate::terminal::last_line_of_file(&err)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe's real output on this Debian 12 host and in the Debian
    /// roots `scripts/ceph-root.sh` builds (tests/client-versions/).
    fn captured(name: &str) -> String {
        let path = format!(
            "{}/../../tests/client-versions/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn library<'a>(p: &'a Probed, name: &str) -> &'a LibraryVersion {
        p.libraries.iter().find(|l| l.name == name).unwrap()
    }

    #[test]
    fn the_host_s_tools_and_libraries_with_their_packages() {
        let p = parse_probe(&captured("debian12-16.2.15.txt"));
        assert_eq!(p.kernel.as_deref(), Some("6.18.44-fc-v1045"));
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["rados", "rbd", "fio"]);
        assert_eq!(p.tools[0].version.as_deref(), Some("16.2.15"));
        assert_eq!(p.tools[0].loads, ["librados"]);
        assert_eq!(p.tools[1].loads, ["librbd", "librados"]);
        assert_eq!(p.tools[2].version.as_deref(), Some("3.33"));
        assert_eq!(p.tools[2].reported.as_deref(), Some("fio-3.33"));
        assert_eq!(p.libraries.len(), 2, "each file once: {:?}", p.libraries);
        let librbd = library(&p, "librbd");
        assert_eq!(librbd.file, "/usr/lib/x86_64-linux-gnu/librbd.so.1.16.0");
        assert_eq!(librbd.package.as_deref(), Some("librbd1"));
        assert_eq!(librbd.version.as_deref(), Some("16.2.15+ds-0+deb12u2"));
        assert_eq!(librbd.source, VersionSource::Dpkg);
    }

    #[test]
    fn roots_of_other_releases() {
        let reef = parse_probe(&captured("trixie-18.2.7.txt"));
        assert_eq!(reef.tools[0].version.as_deref(), Some("18.2.7"));
        assert_eq!(reef.tools[2].version.as_deref(), Some("3.39"));
        assert_eq!(
            library(&reef, "librbd").version.as_deref(),
            Some("18.2.7+ds-1+deb13u1")
        );
        // sid's dpkg-query names the architecture: `librados2:amd64: FILE`.
        let tentacle = parse_probe(&captured("sid-20.2.4.txt"));
        let librados = library(&tentacle, "librados");
        assert_eq!(librados.package.as_deref(), Some("librados2"));
        assert_eq!(librados.version.as_deref(), Some("20.2.4+ds-2"));
        assert_eq!(upstream(librados.version.as_deref().unwrap()), "20.2.4");
        assert_eq!(
            tentacle.tools[0].reported.as_deref(),
            Some(
                "ceph version 20.2.4 (7f793731f1b39eb4f465e960113d2363c311b964) tentacle (stable - RelWithDebInfo)"
            )
        );
    }

    #[test]
    fn without_a_package_manager_the_ceph_tools_say_the_library_version() {
        // The host's output without its package section, as a system
        // without dpkg and rpm would print it.
        let text = captured("debian12-16.2.15.txt");
        let without = text.split("@@dpkg-query -S").next().unwrap();
        let p = parse_probe(without);
        let librbd = library(&p, "librbd");
        assert_eq!(
            (librbd.version.as_deref(), librbd.source),
            (Some("16.2.15"), VersionSource::Tool)
        );
    }

    #[test]
    fn versions_as_people_name_them() {
        assert_eq!(upstream("16.2.15+ds-0+deb12u2"), "16.2.15");
        assert_eq!(upstream("2:18.2.7-1.el9"), "18.2.7");
        assert_eq!(upstream("3.33"), "3.33");
        assert_eq!(tool_version("fio-3.41"), Some("3.41".into()));
        assert_eq!(
            tool_version(
                "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)"
            ),
            Some("16.2.15".into())
        );
    }
}
