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
    /// Sample the cluster's state (`ceph status`, once a second) beside every
    /// stage that reports figures, and flag the figures measured while PGs
    /// were not active+clean or a health check was raised. Default: true.
    #[serde(default)]
    pub watch: Option<Sp<bool>>,
    /// With the watch, read every up OSD's op counters (`perf dump osd`) and
    /// the manager's `osd perf` once a second: each OSD's ops, bytes, mean
    /// latency and queue beside the stage, and a note naming an OSD much
    /// slower than the others. Default: true.
    #[serde(default)]
    pub watch_osds: Option<Sp<bool>>,
    /// OSD flags set for the whole run and unset after it (success, failure,
    /// Ctrl-C, or `pipeline cleanup` after a kill): `noscrub`,
    /// `nodeep-scrub`. A flag already set when the run begins is left as it is.
    #[serde(default)]
    pub flags: Vec<Sp<String>>,
}

pub use pipeline_stage_api::ceph::{CephConnection, default_conf};
