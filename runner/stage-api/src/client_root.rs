//! Client roots: a stage's client tools (`rados`, `rbd`, `fio` and the
//! librados/librbd they load) taken from another Debian root, with another
//! Ceph release installed, against the same cluster (`client:` on a stage).
//!
//! A command of such a stage runs as `pipeline client-exec --root ROOT
//! --bind PATH... -- PROGRAM ARGS...`, which [`enter`]s the root: a private
//! mount namespace (`unshare(CLONE_NEWNS)`, every mount made private first,
//! so nothing propagates back), bind mounts of what the tools need at the
//! same paths (`/proc`, `/dev`, `/sys`, the host's name resolution, the
//! folder of ceph.conf and of the keyring, the run folder: job files and
//! outputs), then `chroot` and `exec`. The namespace ends with the last
//! process in it, and its mounts with it: nothing stays mounted after the
//! command, whatever way it ends. The network is the host's, so a cluster
//! on 127.0.0.1 is reached from inside as from outside.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::exec::CommandSpec;

/// The hidden subcommand of `pipeline` that enters a client root.
pub const SUBCOMMAND: &str = "client-exec";

/// The program that runs [`SUBCOMMAND`]: the runner's own binary, as the
/// kernel knows it. A forked child still runs the runner's image when it
/// `exec`s this, so it works while the file is being rebuilt or replaced.
pub const LAUNCHER: &str = "/proc/self/exe";

/// The client tools whose versions a run records, and that a client root
/// must hold for the stages using it.
pub const CLIENT_TOOLS: &[&str] = &["rados", "rbd", "fio"];

/// Where a shell finds programs inside a Debian root (its `PATH`).
const ROOT_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Host paths every client root gets, when they exist: what a process
/// expects of a Linux system (`/proc`, `/dev`, `/sys`) and the host's name
/// resolution, so monitors named by host name resolve as they do outside.
const SYSTEM_BINDS: &[&str] = &["/proc", "/dev", "/sys", "/etc/hosts", "/etc/resolv.conf"];

/// A stage's client: a named set of tools from a root (`clients:` in the
/// suite), or a root given on the stage itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClientRoot {
    /// The name the suite gives it (`clients: {"18.2": {root: ...}}`);
    /// `None` for a stage's own `client: {root: PATH}`.
    pub name: Option<String>,
    /// The root's folder on this machine (absolute).
    pub root: PathBuf,
}

impl ClientRoot {
    /// `18.2 (/var/cache/pipeline/roots/trixie)`, for messages.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("{name} ({})", self.root.display()),
            None => self.root.display().to_string(),
        }
    }

    /// `spec` as it runs inside the root: through `launcher client-exec`
    /// with `binds` (see [`binds`]). Environment, timeout and stdin stay
    /// the command's; its working folder is entered inside the root.
    pub fn wrap(&self, spec: &CommandSpec, launcher: &Path, binds: &[PathBuf]) -> CommandSpec {
        let mut argv = vec![
            launcher.display().to_string(),
            SUBCOMMAND.to_string(),
            "--root".to_string(),
            self.root.display().to_string(),
        ];
        for bind in binds {
            argv.extend(["--bind".to_string(), bind.display().to_string()]);
        }
        if let Some(cwd) = &spec.cwd {
            argv.extend(["--cwd".to_string(), cwd.display().to_string()]);
        }
        argv.push("--".to_string());
        argv.extend(spec.argv.iter().cloned());
        CommandSpec {
            argv,
            ..spec.clone()
        }
    }
}

/// What a stage's commands need to see inside a client root, besides the
/// system paths: the folders of ceph.conf and of the keyring (a keyring
/// beside ceph.conf, as Ceph's defaults and the sandbox have it, comes with
/// it), and the run folder (job files, and whatever a tool writes there).
/// Absolute paths only, each once; a folder inside another is not repeated.
pub fn binds(ceph: &crate::ceph::CephConnection, run_dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_BINDS.iter().map(PathBuf::from).collect();
    for file in [&ceph.conf, &ceph.keyring].into_iter().flatten() {
        if let Some(folder) = absolute(Path::new(file)).parent() {
            paths.push(folder.to_path_buf());
        }
    }
    paths.push(absolute(run_dir));
    minimal_cover(paths)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The paths without duplicates and without those inside another of them
/// (a bind of the outer folder shows them already), shortest first.
fn minimal_cover(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort_by_key(|p| p.components().count());
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths {
        if path == Path::new("/") || !path.is_absolute() {
            continue;
        }
        if !kept.iter().any(|k| path.starts_with(k)) {
            kept.push(path);
        }
    }
    kept
}

/// The client tool a command runs, if it runs one: its program, or for a
/// shell that `exec`s its arguments (`sh -c '…; exec "$@"' sh rados …`, as
/// rados-bench starts its writes) the program among those arguments.
pub fn tool_of(argv: &[String]) -> Option<&'static str> {
    let base = |word: &String| {
        let name = Path::new(word).file_name()?.to_str()?;
        CLIENT_TOOLS.iter().copied().find(|t| *t == name)
    };
    let is_shell = argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "sh" || n == "bash");
    if is_shell && argv.get(1).is_some_and(|a| a == "-c") {
        // [sh, -c, SCRIPT, $0, PROGRAM, ARGS...]
        return argv.get(4).and_then(base);
    }
    argv.first().and_then(base)
}

/// The programs of `tools` that are not in the root's `PATH` folders (a
/// link counts: `bin -> usr/bin` is how Debian roots are made).
pub fn missing_tools<'a>(root: &Path, tools: &[&'a str]) -> Vec<&'a str> {
    tools
        .iter()
        .copied()
        .filter(|tool| {
            !ROOT_PATH.iter().any(|dir| {
                let inside = root.join(dir.trim_start_matches('/')).join(tool);
                std::fs::symlink_metadata(&inside).is_ok()
            })
        })
        .collect()
}

/// Why a command could not be started inside a client root.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    #[error(
        "cannot make a private mount namespace (unshare CLONE_NEWNS): {0}; client roots need root (CAP_SYS_ADMIN and CAP_SYS_CHROOT)"
    )]
    Unshare(std::io::Error),
    #[error("cannot make the mounts private: {0}")]
    Private(std::io::Error),
    #[error("cannot bind {} into the root at {}: {source}", .source_path.display(), .target.display())]
    Bind {
        source_path: PathBuf,
        target: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot chroot into {}: {source}", .root.display())]
    Chroot {
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot enter {} inside the root: {source}", .cwd.display())]
    Cwd {
        cwd: PathBuf,
        source: std::io::Error,
    },
    #[error("no program to run")]
    NoProgram,
    #[error("`{program}` is not installed in the client root {} ({source})", .root.display())]
    NotFound {
        program: String,
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run `{program}` in the client root {}: {source}", .root.display())]
    Exec {
        program: String,
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} contains a NUL byte")]
    Nul(String),
}

impl EnterError {
    /// The exit status `pipeline client-exec` ends with: 127 when the
    /// program is not there (as a shell says "not found"), 126 when it
    /// cannot be run, 125 when the root could not be entered (as `env` and
    /// `chroot` do).
    pub fn exit_code(&self) -> u8 {
        match self {
            EnterError::NotFound { .. } => 127,
            EnterError::Exec { .. } => 126,
            _ => 125,
        }
    }
}

/// Enters `root` and `exec`s `argv` there (see the module comment): returns
/// only when that failed. Call it in a process of its own, before any
/// thread is started.
pub fn enter(root: &Path, binds: &[PathBuf], cwd: Option<&Path>, argv: &[String]) -> EnterError {
    match try_enter(root, binds, cwd, argv) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn try_enter(
    root: &Path,
    binds: &[PathBuf],
    cwd: Option<&Path>,
    argv: &[String],
) -> Result<std::convert::Infallible, EnterError> {
    let program = argv.first().ok_or(EnterError::NoProgram)?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| EnterError::Nul(a.clone())))
        .collect::<Result<_, _>>()?;
    // SAFETY: plain system calls with valid arguments; this process is
    // about to become the tool, nothing else runs in it.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(EnterError::Unshare(std::io::Error::last_os_error()));
    }
    // The namespace starts as a copy sharing propagation with the host's:
    // private first, or the binds below would appear on the host too.
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE).map_err(EnterError::Private)?;
    for source in binds.iter().filter(|b| b.exists()) {
        let target = root.join(source.strip_prefix("/").unwrap_or(source));
        bind_into(source, &target).map_err(|e| EnterError::Bind {
            source_path: source.clone(),
            target: target.clone(),
            source: e,
        })?;
    }
    let c_root = c_path(root)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::chroot(c_root.as_ptr()) } != 0 {
        return Err(EnterError::Chroot {
            root: root.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    let cwd = cwd.unwrap_or(Path::new("/"));
    std::env::set_current_dir(cwd).map_err(|source| EnterError::Cwd {
        cwd: cwd.to_path_buf(),
        source,
    })?;
    // The root's own PATH: the program is looked up inside it.
    let mut pointers: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: a NULL-terminated array of valid C strings that outlive the call.
    unsafe { libc::execvp(pointers[0], pointers.as_ptr()) };
    let source = std::io::Error::last_os_error();
    let (program, root) = (program.clone(), root.to_path_buf());
    Err(match source.kind() {
        std::io::ErrorKind::NotFound => EnterError::NotFound {
            program,
            root,
            source,
        },
        _ => EnterError::Exec {
            program,
            root,
            source,
        },
    })
}

/// Bind-mounts `source` (with what is mounted below it) at `target`,
/// making the mount point first: a folder, or an empty file for a file.
fn bind_into(source: &Path, target: &Path) -> std::io::Result<()> {
    if source.is_dir() {
        std::fs::create_dir_all(target)?;
    } else if std::fs::symlink_metadata(target).is_err() {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(target)?;
    }
    mount(Some(source), target, libc::MS_BIND | libc::MS_REC)
}

fn mount(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> std::io::Result<()> {
    let source = source
        .map(c_path)
        .transpose()
        .map_err(std::io::Error::other)?;
    let target = c_path(target).map_err(std::io::Error::other)?;
    let none = c"none";
    // SAFETY: valid NUL-terminated strings (or NULL) for mount(2).
    let rc = unsafe {
        libc::mount(
            source.as_ref().map_or(none.as_ptr(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn c_path(path: &Path) -> Result<CString, EnterError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| EnterError::Nul(path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(argv: &[&str]) -> Vec<String> {
        argv.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_tool_a_command_runs() {
        assert_eq!(
            tool_of(&words(&["rados", "-p", "rbd", "bench"])),
            Some("rados")
        );
        assert_eq!(
            tool_of(&words(&["/usr/bin/fio", "--output-format=json+"])),
            Some("fio")
        );
        // rados-bench's write: a shell that execs its arguments.
        let write = words(&[
            "sh",
            "-c",
            "echo pid $$ >&2; exec \"$@\"",
            "sh",
            "rados",
            "-p",
            "p",
        ]);
        assert_eq!(tool_of(&write), Some("rados"));
        // A pool named `rbd` is no tool; `ceph` is no client tool here.
        assert_eq!(
            tool_of(&words(&["ceph", "osd", "pool", "create", "rbd"])),
            None
        );
        assert_eq!(tool_of(&words(&["sh", "-c", "rbd ls"])), None);
        assert_eq!(tool_of(&[]), None);
    }

    #[test]
    fn binds_cover_the_conf_keyring_and_run_folder_once() {
        let ceph = crate::ceph::CephConnection {
            conf: Some("/tmp/pipeline-sandbox/ceph.conf".into()),
            name: None,
            keyring: Some("/tmp/pipeline-sandbox/keys/client.admin.keyring".into()),
            args: Vec::new(),
            command_timeout: 60.0,
        };
        let binds = binds(&ceph, Path::new("/work/runs/r1"));
        let shown: Vec<String> = binds.iter().map(|b| b.display().to_string()).collect();
        assert_eq!(
            shown,
            [
                "/proc",
                "/dev",
                "/sys",
                "/etc/hosts",
                "/etc/resolv.conf",
                "/tmp/pipeline-sandbox",
                "/work/runs/r1"
            ]
        );
    }

    #[test]
    fn a_command_is_wrapped_with_its_binds_and_folder() {
        let client = ClientRoot {
            name: Some("18.2".into()),
            root: "/roots/trixie".into(),
        };
        let mut spec =
            CommandSpec::new(words(&["fio", "--name=x"])).env("CEPH_CONF", "/c/ceph.conf");
        spec.cwd = Some("/runs/r1".into());
        let wrapped = client.wrap(&spec, Path::new("/bin/pipeline"), &["/proc".into()]);
        assert_eq!(
            wrapped.argv,
            words(&[
                "/bin/pipeline",
                "client-exec",
                "--root",
                "/roots/trixie",
                "--bind",
                "/proc",
                "--cwd",
                "/runs/r1",
                "--",
                "fio",
                "--name=x"
            ])
        );
        assert_eq!(wrapped.env, spec.env);
        assert_eq!(client.describe(), "18.2 (/roots/trixie)");
    }

    #[test]
    fn missing_tools_are_named() {
        let root =
            std::env::temp_dir().join(format!("pipeline-client-root-{}", std::process::id()));
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::write(root.join("usr/bin/rados"), "").unwrap();
        // Debian's merged /usr: `bin` is a link into `usr`.
        let _ = std::os::unix::fs::symlink("usr/bin", root.join("bin"));
        assert_eq!(missing_tools(&root, &["rados", "fio"]), ["fio"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
