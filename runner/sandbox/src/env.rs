//! What clients need to reach a sandbox, saved as `env.json` and printable for a shell.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// Connection settings of a running sandbox. Written as `env.json` when `up` is done, so
/// its presence also means "this sandbox became ready once".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxEnv {
    /// The sandbox directory (`PIPELINE_SANDBOX_DIR`).
    pub dir: PathBuf,
    /// `CEPH_CONF`: names the monitor and the keyring; enough for `ceph`, `rados`, `rbd`, fio.
    pub ceph_conf: PathBuf,
    /// Keyring of [`SandboxEnv::client_name`] (also reachable through `ceph_conf`).
    pub keyring: PathBuf,
    /// Ceph client entity with full caps: `client.admin`.
    pub client_name: String,
    /// S3 endpoint of the gateway, e.g. `http://127.0.0.1:7480`.
    pub s3_endpoint: String,
    pub aws_access_key_id: String,
    pub aws_secret_access_key: String,
    /// Region to sign with; the gateway's single zonegroup accepts any, SDKs need one.
    pub s3_region: String,
    /// Swift v1 auth URL, e.g. `http://127.0.0.1:7480/auth/1.0`.
    pub swift_auth_url: String,
    /// Swift user `sandbox:swift`.
    pub swift_user: String,
    pub swift_key: String,
    /// The plugin registry, `127.0.0.1:5055`, when docker-registry is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// The lab's hosts, when the sandbox is a lab (`up --hosts N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabEnv>,
}

/// How a suite reaches a lab's hosts: exported as `PIPELINE_LAB_INVENTORY`,
/// `PIPELINE_LAB_SSH_KEY` and `PIPELINE_LAB_KNOWN_HOSTS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabEnv {
    /// Ansible INI inventory (groups mons, mgrs, osds, rgws, clients).
    pub inventory: PathBuf,
    pub ssh_key: PathBuf,
    pub known_hosts: PathBuf,
}

impl SandboxEnv {
    /// `export NAME=value` lines a POSIX shell can `eval` or source; values are quoted.
    pub fn to_shell(&self) -> String {
        let mut out = String::new();
        for (name, value) in self.variables() {
            let _ = writeln!(out, "export {name}={}", shell_quote(&value));
        }
        out
    }

    /// The environment variables, for callers that set them on a child process directly.
    pub fn variables(&self) -> Vec<(&'static str, String)> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            ("CEPH_CONF", path(&self.ceph_conf)),
            ("AWS_ACCESS_KEY_ID", self.aws_access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.aws_secret_access_key.clone()),
            ("AWS_ENDPOINT_URL", self.s3_endpoint.clone()),
            ("AWS_DEFAULT_REGION", self.s3_region.clone()),
            ("ST_AUTH", self.swift_auth_url.clone()),
            ("ST_USER", self.swift_user.clone()),
            ("ST_KEY", self.swift_key.clone()),
            ("PIPELINE_SANDBOX_DIR", path(&self.dir)),
        ]
        .into_iter()
        .chain(
            self.registry
                .clone()
                .map(|r| ("PIPELINE_SANDBOX_REGISTRY", r)),
        )
        .chain(self.lab.iter().flat_map(|lab| {
            [
                ("PIPELINE_LAB_INVENTORY", path(&lab.inventory)),
                ("PIPELINE_LAB_SSH_KEY", path(&lab.ssh_key)),
                ("PIPELINE_LAB_KNOWN_HOSTS", path(&lab.known_hosts)),
            ]
        }))
        .collect()
    }

    pub(crate) fn write(&self, path: &Path) -> Result<(), SandboxError> {
        let json = serde_json::to_string_pretty(self).map_err(|e| SandboxError::Parse {
            what: "sandbox environment".into(),
            detail: e.to_string(),
        })?;
        std::fs::write(path, json + "\n").map_err(SandboxError::io("write", path))
    }

    pub(crate) fn read(path: &Path) -> Result<SandboxEnv, SandboxError> {
        let text = std::fs::read_to_string(path).map_err(SandboxError::io("read", path))?;
        serde_json::from_str(&text).map_err(|e| SandboxError::Parse {
            what: path.display().to_string(),
            detail: e.to_string(),
        })
    }
}

/// Quotes `value` for a POSIX shell: bare when it is made of safe characters, otherwise in
/// single quotes with embedded single quotes written as `'\''`.
pub fn shell_quote(value: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:=@,%".contains(c);
    if !value.is_empty() && value.chars().all(safe) {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SandboxEnv {
        SandboxEnv {
            dir: "/tmp/pipeline-sandbox".into(),
            ceph_conf: "/tmp/pipeline-sandbox/ceph.conf".into(),
            keyring: "/tmp/pipeline-sandbox/keys/client.admin.keyring".into(),
            client_name: "client.admin".into(),
            s3_endpoint: "http://127.0.0.1:7480".into(),
            aws_access_key_id: "ABCDEFGHIJKLMNOPQRST".into(),
            aws_secret_access_key: "it's a secret".into(),
            s3_region: "us-east-1".into(),
            swift_auth_url: "http://127.0.0.1:7480/auth/1.0".into(),
            swift_user: "sandbox:swift".into(),
            swift_key: "k$y".into(),
            registry: Some("127.0.0.1:5055".into()),
            lab: Some(LabEnv {
                inventory: "/tmp/pipeline-sandbox/lab/inventory.ini".into(),
                ssh_key: "/tmp/pipeline-sandbox/lab/ssh/id_ed25519".into(),
                known_hosts: "/tmp/pipeline-sandbox/lab/ssh/known_hosts".into(),
            }),
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/x.conf"), "/tmp/x.conf");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_quote("a\nb"), "'a\nb'");
    }

    #[test]
    fn shell_lines() {
        let text = sample().to_shell();
        for line in [
            "export CEPH_CONF=/tmp/pipeline-sandbox/ceph.conf",
            "export AWS_ACCESS_KEY_ID=ABCDEFGHIJKLMNOPQRST",
            r"export AWS_SECRET_ACCESS_KEY='it'\''s a secret'",
            "export AWS_ENDPOINT_URL=http://127.0.0.1:7480",
            "export ST_AUTH=http://127.0.0.1:7480/auth/1.0",
            "export ST_USER=sandbox:swift",
            "export ST_KEY='k$y'",
            "export PIPELINE_SANDBOX_DIR=/tmp/pipeline-sandbox",
            "export PIPELINE_SANDBOX_REGISTRY=127.0.0.1:5055",
            "export PIPELINE_LAB_INVENTORY=/tmp/pipeline-sandbox/lab/inventory.ini",
            "export PIPELINE_LAB_SSH_KEY=/tmp/pipeline-sandbox/lab/ssh/id_ed25519",
            "export PIPELINE_LAB_KNOWN_HOSTS=/tmp/pipeline-sandbox/lab/ssh/known_hosts",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn shell_output_round_trips_through_sh() {
        let env = sample();
        let script = format!(
            "{}printf '%s|%s' \"$AWS_SECRET_ACCESS_KEY\" \"$ST_KEY\"",
            env.to_shell()
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's a secret|k$y");
    }

    #[test]
    fn json_round_trip() {
        let dir = std::env::temp_dir().join(format!("sbx-env-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("env.json");
        sample().write(&path).unwrap();
        let back = SandboxEnv::read(&path).unwrap();
        std::fs::write(&path, "{not json").unwrap();
        let err = SandboxEnv::read(&path).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(back, sample());
        assert!(matches!(err, SandboxError::Parse { .. }));
    }
}
