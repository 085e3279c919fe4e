//! How stages reach the Ceph cluster: the `cluster:` section of a pipeline,
//! resolved into the arguments every `ceph`, `rados` and `rbd` call gets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Sp;

/// `cluster:` in a pipeline. Every field may be a template (`{{ env.CEPH_CONF }}`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Path of ceph.conf. Default: `$CEPH_CONF` when set, else Ceph's own default
    /// (`/etc/ceph/ceph.conf`).
    #[serde(default)]
    pub conf: Option<Sp<String>>,
    /// Client name, e.g. `client.admin` (Ceph's default when unset).
    #[serde(default)]
    pub name: Option<Sp<String>>,
    /// Keyring path (Ceph finds it from the conf when unset).
    #[serde(default)]
    pub keyring: Option<Sp<String>>,
    /// Extra arguments for every Ceph CLI call, e.g. `[--cluster, backup]`.
    #[serde(default)]
    pub args: Vec<Sp<String>>,
    /// Limit for each single Ceph CLI call that is not itself a benchmark
    /// (status, pool create/delete, cleanup). A full cluster makes them hang.
    #[serde(default)]
    pub command_timeout: Option<Sp<String>>,
}

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
