//! Which Ceph release the installed daemons are, and what the sandbox must do differently
//! for it. `up` starts whatever release the programs on `PATH` are; every difference
//! between releases that the sandbox has to know lives here, each with its reason
//! (docs/ceph-releases.md has the whole table).
//!
//! Tested: 16.2 Pacific (Debian 12), 18.2 Reef (Debian trixie), 20.2 Tentacle (Debian sid).
//! 17.2 and 19.2 lie between tested releases and are started with a note; anything older
//! than 16 or newer than 20 is refused with one message before anything starts.

use std::time::Duration;

use crate::error::SandboxError;
use crate::process;

/// The oldest and newest major release `up` starts.
pub const OLDEST_MAJOR: u32 = 16;
pub const NEWEST_MAJOR: u32 = 20;
/// The releases this sandbox is tested with (`scripts/test-ceph-release.sh`).
pub const TESTED: [&str; 3] = ["16.2", "18.2", "20.2"];

const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// A Ceph release as its programs report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CephRelease {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// `pacific`, `reef`, `tentacle`, ... as the program prints it (may be empty).
    pub codename: String,
    /// The whole `--version` line, for messages and the environment file.
    pub text: String,
}

/// How a cephx secret is encoded (Ceph's `CryptoKey`: type, created, length, secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyCipher {
    /// Type 1, 16-byte secret: every release before 20.
    Aes128,
    /// Type 2, 32-byte secret. Tentacle (20.x) allows only this cipher by default
    /// (`auth_allowed_ciphers = aes256k`): a type-1 key is refused at authentication,
    /// which shows as "handle_auth_bad_method ... (13) Permission denied".
    Aes256k,
}

impl KeyCipher {
    pub fn type_code(self) -> u16 {
        match self {
            KeyCipher::Aes128 => 1,
            KeyCipher::Aes256k => 2,
        }
    }
    pub fn secret_len(self) -> usize {
        match self {
            KeyCipher::Aes128 => 16,
            KeyCipher::Aes256k => 32,
        }
    }
}

impl CephRelease {
    /// Parses `ceph version 18.2.7 (6b0e98...) reef (stable)`, also with a build type
    /// after the stability (`tentacle (stable - RelWithDebInfo)`), or a development
    /// version without a codename.
    pub fn parse(line: &str) -> Option<CephRelease> {
        let text = line.trim();
        let rest = text.strip_prefix("ceph version ")?;
        let mut words = rest.split_whitespace();
        let version = words.next()?;
        // Distributions append their own suffix: `16.2.15+ds-0+deb12u2`, `18.2.7-1.el9`.
        let numeric: String = version
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = numeric.split('.').map(|p| p.parse::<u32>());
        let major = parts.next()?.ok()?;
        let minor = parts.next().unwrap_or(Ok(0)).ok()?;
        let patch = parts.next().unwrap_or(Ok(0)).ok()?;
        let codename = words
            .skip_while(|w| w.starts_with('('))
            .find(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            .unwrap_or_default()
            .to_string();
        Some(CephRelease {
            major,
            minor,
            patch,
            codename,
            text: text.to_string(),
        })
    }

    /// `18.2`: the release line, as the tests and docs name it.
    pub fn line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// `18.2.7 reef`.
    pub fn describe(&self) -> String {
        let version = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if self.codename.is_empty() {
            version
        } else {
            format!("{version} {}", self.codename)
        }
    }

    /// Refuses a release outside what the sandbox knows how to start.
    pub fn check_supported(&self) -> Result<(), SandboxError> {
        if (OLDEST_MAJOR..=NEWEST_MAJOR).contains(&self.major) {
            Ok(())
        } else {
            Err(SandboxError::UnsupportedRelease {
                found: self.text.clone(),
                tested: TESTED.join(", "),
            })
        }
    }

    /// Whether this release line is one the tests run (`None`: a note is due).
    pub fn is_tested(&self) -> bool {
        TESTED.contains(&self.line().as_str())
    }

    pub(crate) fn key_cipher(&self) -> KeyCipher {
        if self.major >= 20 {
            KeyCipher::Aes256k
        } else {
            KeyCipher::Aes128
        }
    }
}

/// The release of the installed monitor (`ceph-mon --version`: a compiled program, so
/// ~20 ms, where the Python `ceph` takes ~300 ms). The monitor is what `up` starts first
/// and what the other daemons must match.
pub(crate) fn detect() -> Result<CephRelease, SandboxError> {
    let mut cmd = process::command("ceph-mon");
    cmd.arg("--version");
    let out = process::run_ok(cmd, VERSION_TIMEOUT)?;
    let line = out.stdout.lines().find(|l| l.starts_with("ceph version"));
    line.and_then(CephRelease::parse)
        .ok_or_else(|| SandboxError::Parse {
            what: "`ceph-mon --version`".into(),
            detail: format!(
                "expected `ceph version X.Y.Z ...`, got {:?}",
                out.stdout.trim()
            ),
        })
}

/// Where the OSDs load object classes from, when their compiled-in default cannot be
/// trusted. Debian's 18.2 and 20.2 builds carry a *relative* default
/// (`lib/x86_64-linux-gnu/rados-classes`, resolved against the OSD's working
/// directory), so `cls_version` and every other class fail to load, and radosgw then
/// dies with "failed to init services (ret=(95) Operation not supported)". A relative
/// default is anchored at `/usr`, the packages' prefix, when that folder exists.
pub(crate) fn osd_class_dir() -> Result<Option<String>, SandboxError> {
    let mut cmd = process::command("ceph-conf");
    // `--name osd.0` and no config file: the compiled default the OSD would use.
    cmd.args(["--no-mon-config", "-c", "/dev/null", "--name", "osd.0"])
        .args(["--show-config-value", "osd_class_dir"]);
    let out = process::run_ok(cmd, VERSION_TIMEOUT)?;
    let value = out
        .stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    Ok(anchor_class_dir(value, |p| {
        std::path::Path::new(p).is_dir()
    }))
}

fn anchor_class_dir(default: &str, exists: impl Fn(&str) -> bool) -> Option<String> {
    if default.is_empty() || default.starts_with('/') {
        return None;
    }
    let anchored = format!("/usr/{}", default.trim_start_matches("./"));
    exists(&anchored).then_some(anchored)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The `--version` lines of the releases' own programs, as they printed them here.
    const PACIFIC: &str =
        "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)";
    const REEF: &str =
        "ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)";
    const TENTACLE: &str = "ceph version 20.2.4 (7f793731f1b39eb4f465e960113d2363c311b964) tentacle (stable - RelWithDebInfo)";

    #[test]
    fn version_lines_of_each_release_parse() {
        for (line, want, codename) in [
            (PACIFIC, (16, 2, 15), "pacific"),
            (REEF, (18, 2, 7), "reef"),
            (TENTACLE, (20, 2, 4), "tentacle"),
            (
                "ceph version 18.2.7-1.el9 (abc) reef (stable)",
                (18, 2, 7),
                "reef",
            ),
            (
                "ceph version 19.3.0-123-gdeadbeef (deadbeef)",
                (19, 3, 0),
                "",
            ),
        ] {
            let r = CephRelease::parse(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((r.major, r.minor, r.patch), want, "{line}");
            assert_eq!(r.codename, codename, "{line}");
        }
        assert_eq!(CephRelease::parse(REEF).unwrap().describe(), "18.2.7 reef");
        assert_eq!(CephRelease::parse(REEF).unwrap().line(), "18.2");
        for bad in ["", "ceph", "ceph version", "ceph version x.y", "fio-3.33"] {
            assert_eq!(CephRelease::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn releases_outside_the_range_are_refused_by_name() {
        let old = CephRelease::parse("ceph version 15.2.17 (abc) octopus (stable)").unwrap();
        let err = old.check_supported().unwrap_err().to_string();
        assert!(
            err.contains("15.2.17") && err.contains("16.2, 18.2, 20.2"),
            "{err}"
        );
        let new = CephRelease::parse("ceph version 21.0.0 (abc) umbrella (dev)").unwrap();
        assert!(new.check_supported().is_err());
        for line in [PACIFIC, REEF, TENTACLE] {
            let r = CephRelease::parse(line).unwrap();
            r.check_supported().unwrap();
            assert!(r.is_tested());
        }
        let squid = CephRelease::parse("ceph version 19.2.3 (abc) squid (stable)").unwrap();
        squid.check_supported().unwrap();
        assert!(!squid.is_tested());
    }

    #[test]
    fn tentacle_gets_aes256k_keys_and_older_releases_aes128() {
        let key = |line| CephRelease::parse(line).unwrap().key_cipher();
        assert_eq!(key(PACIFIC), KeyCipher::Aes128);
        assert_eq!(key(REEF), KeyCipher::Aes128);
        assert_eq!(key(TENTACLE), KeyCipher::Aes256k);
    }

    #[test]
    fn only_a_relative_class_dir_is_anchored() {
        let any = |_: &str| true;
        assert_eq!(
            anchor_class_dir("lib/x86_64-linux-gnu/rados-classes", any).as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/rados-classes")
        );
        assert_eq!(
            anchor_class_dir("/usr/lib/x86_64-linux-gnu/rados-classes", any),
            None
        );
        assert_eq!(anchor_class_dir("", any), None);
        assert_eq!(anchor_class_dir("lib/rados-classes", |_| false), None);
    }
}
