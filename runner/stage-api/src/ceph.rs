//! How stages reach the Ceph cluster: the pipeline's `cluster:` section,
//! resolved into the arguments every `ceph`, `rados` and `rbd` call gets.

use serde::Serialize;

/// The ceph.conf to use when the pipeline names none: `$CEPH_CONF`; else
/// Ceph's own default (`/etc/ceph/ceph.conf`) when it exists; else the local
/// sandbox's (`pipeline sandbox up`), so `pipeline sandbox up && pipeline run
/// pipelines/full-baseline.yaml` works as it reads.
pub fn default_conf() -> Option<String> {
    if let Some(conf) = std::env::var("CEPH_CONF").ok().filter(|c| !c.is_empty()) {
        return Some(conf);
    }
    if std::path::Path::new("/etc/ceph/ceph.conf").exists() {
        return None;
    }
    let sandbox = std::env::var("PIPELINE_SANDBOX_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp/pipeline-sandbox".into());
    let conf = std::path::Path::new(&sandbox).join("ceph.conf");
    conf.exists().then(|| conf.display().to_string())
}

/// The resolved connection: what stages use.
#[derive(Debug, Clone, Serialize)]
pub struct CephConnection {
    pub conf: Option<String>,
    pub name: Option<String>,
    pub keyring: Option<String>,
    pub args: Vec<String>,
    /// Seconds.
    pub command_timeout: f64,
}

impl Default for CephConnection {
    fn default() -> Self {
        CephConnection {
            conf: default_conf(),
            name: None,
            keyring: None,
            args: Vec::new(),
            command_timeout: 120.0,
        }
    }
}

impl CephConnection {
    /// Arguments that select the cluster, for `ceph`, `rados` and `rbd` alike.
    pub fn cli_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(conf) = &self.conf {
            args.extend(["--conf".to_string(), conf.clone()]);
        }
        if let Some(name) = &self.name {
            args.extend(["--name".to_string(), name.clone()]);
        }
        if let Some(keyring) = &self.keyring {
            args.extend(["--keyring".to_string(), keyring.clone()]);
        }
        args.extend(self.args.iter().cloned());
        args
    }

    /// `program <cluster args> <args>`.
    pub fn argv(&self, program: &str, args: &[&str]) -> Vec<String> {
        let mut argv = vec![program.to_string()];
        argv.extend(self.cli_args());
        argv.extend(args.iter().map(|a| a.to_string()));
        argv
    }
}
