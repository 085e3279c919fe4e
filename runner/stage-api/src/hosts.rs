//! A resolved host: where a stage instance runs, and how a command reaches it
//! (the system's OpenSSH client: BatchMode, multiplexed connections, strict
//! host key checking unless the pipeline explicitly relaxes it).

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exec::{CommandSpec, shell_words};

/// The reserved name of the machine running the suite.
pub const LOCAL: &str = "local";
/// The group of every inventory host (or just `local` without an inventory).
pub const ALL: &str = "all";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StrictHostKeyChecking {
    Yes,
    AcceptNew,
    No,
}

/// A resolved host: where a stage instance runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub name: String,
    /// `None`: this machine, no SSH.
    pub address: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub key: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub strict: StrictHostKeyChecking,
    pub connect_timeout: u32,
    pub options: Vec<String>,
}

impl Host {
    pub fn local() -> Self {
        Host {
            name: LOCAL.into(),
            address: None,
            user: None,
            port: None,
            key: None,
            known_hosts: None,
            strict: StrictHostKeyChecking::Yes,
            connect_timeout: 10,
            options: Vec::new(),
        }
    }

    pub fn is_local(&self) -> bool {
        self.address.is_none()
    }

    /// `node1 (root@127.0.0.2:2222)`, for messages.
    pub fn describe(&self) -> String {
        match &self.address {
            None => format!("{} (this machine)", self.name),
            Some(addr) => {
                let user = self
                    .user
                    .as_ref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default();
                let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
                format!("{} ({user}{addr}{port})", self.name)
            }
        }
    }

    /// The `ssh ...` prefix for this host (empty for the local machine).
    pub fn ssh_argv(&self) -> Vec<String> {
        let Some(address) = &self.address else {
            return Vec::new();
        };
        let mut argv: Vec<String> = vec!["ssh".into()];
        let mut opt = |o: String| {
            argv.push("-o".into());
            argv.push(o);
        };
        opt("BatchMode=yes".into());
        opt(format!("ConnectTimeout={}", self.connect_timeout));
        // One TCP/SSH session per host for the whole run: stages start fast.
        opt("ControlMaster=auto".into());
        // The path includes what authenticates the session: a connection
        // opened with one key must never be reused by a run given another.
        opt(format!(
            "ControlPath=/tmp/pipeline-ssh-{:016x}-%C",
            self.auth_fingerprint()
        ));
        opt("ControlPersist=60".into());
        opt(format!(
            "StrictHostKeyChecking={}",
            match self.strict {
                StrictHostKeyChecking::Yes => "yes",
                StrictHostKeyChecking::AcceptNew => "accept-new",
                StrictHostKeyChecking::No => "no",
            }
        ));
        if let Some(kh) = &self.known_hosts {
            opt(format!("UserKnownHostsFile={}", kh.display()));
        }
        if self.key.is_some() {
            opt("IdentitiesOnly=yes".into());
        }
        for o in &self.options {
            opt(o.clone());
        }
        if let Some(key) = &self.key {
            argv.extend(["-i".into(), key.display().to_string()]);
        }
        if let Some(port) = self.port {
            argv.extend(["-p".into(), port.to_string()]);
        }
        if let Some(user) = &self.user {
            argv.extend(["-l".into(), user.clone()]);
        }
        argv.push(address.clone());
        argv.push("--".into());
        argv
    }

    /// The command as it runs on this host: unchanged locally; over SSH the
    /// remote shell gets one quoted command line. `remote_limit` makes the
    /// remote side kill the command too (`timeout`): killing the local ssh
    /// client alone would leave it running there.
    pub fn wrap(&self, spec: &CommandSpec, remote_limit: Option<Duration>) -> CommandSpec {
        if self.is_local() {
            return spec.clone();
        }
        let mut remote: Vec<String> = Vec::new();
        if let Some(limit) = remote_limit {
            // Rounded up, plus a grace: the local deadline fires first and
            // reports the timeout; this only makes sure nothing lingers.
            let secs = limit.as_secs() + u64::from(limit.subsec_nanos() > 0) + 2;
            remote.extend(["timeout".into(), "-k".into(), "5".into(), secs.to_string()]);
        }
        if !spec.env.is_empty() {
            remote.push("env".into());
            remote.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
        }
        remote.extend(spec.argv.iter().cloned());
        let mut line = shell_words(&remote);
        if let Some(cwd) = &spec.cwd {
            line = format!(
                "cd {} && {line}",
                crate::exec::shell_quote(&cwd.display().to_string())
            );
        }
        let mut argv = self.ssh_argv();
        argv.push(line);
        CommandSpec {
            argv,
            env: Vec::new(),
            cwd: None,
            timeout: spec.timeout,
        }
    }

    /// A hash of everything that decides how the session authenticates.
    fn auth_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &self.key,
            &self.known_hosts,
            &self.user,
            self.strict as u8,
            &self.options,
        )
            .hash(&mut h);
        h.finish()
    }

    /// Turns an SSH failure (ssh exits 255) into a message naming the host and
    /// the cause, with what to do about it.
    pub fn explain_ssh_failure(&self, stderr: &str) -> String {
        let who = self.describe();
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        if stderr.contains("Host key verification failed")
            || stderr.contains("No ED25519 host key is known")
            || stderr.contains("host key for")
        {
            format!(
                "host {who}: its SSH host key is unknown or changed (strict host key checking). \
                 Add it to known_hosts (`ssh-keyscan -p PORT ADDRESS >> ~/.ssh/known_hosts`, after checking it), \
                 or set `inventory.ssh.strict_host_key_checking: accept-new` explicitly"
            )
        } else if stderr.contains("Permission denied") {
            format!(
                "host {who}: the SSH key was refused ({last}); check `key` and `user` in the inventory"
            )
        } else if stderr.contains("Connection refused") {
            format!("host {who} is unreachable: connection refused (is sshd running on that port?)")
        } else if stderr.contains("timed out")
            || stderr.contains("No route to host")
            || stderr.contains("Could not resolve")
            || stderr.contains("Network is unreachable")
        {
            format!("host {who} is unreachable: {last}")
        } else {
            format!("host {who}: ssh failed: {last}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_commands_for_ssh() {
        let host = Host {
            name: "node1".into(),
            address: Some("127.0.0.2".into()),
            user: Some("root".into()),
            port: Some(2222),
            key: Some("/k".into()),
            known_hosts: Some("/kh".into()),
            ..Host::local()
        };
        let spec = CommandSpec::new(vec!["echo".into(), "a b".into()]).env("LC_ALL", "C");
        let wrapped = host.wrap(&spec, Some(Duration::from_secs(30)));
        assert_eq!(
            wrapped.argv.last().unwrap(),
            "timeout -k 5 32 env LC_ALL=C echo 'a b'"
        );
        let argv = wrapped.argv.join(" ");
        assert!(argv.starts_with("ssh -o BatchMode=yes"), "{argv}");
        assert!(argv.contains("StrictHostKeyChecking=yes"));
        assert!(
            argv.contains("-i /k -p 2222 -l root 127.0.0.2 --"),
            "{argv}"
        );
        assert_eq!(Host::local().wrap(&spec, None).argv, spec.argv);
    }
}
