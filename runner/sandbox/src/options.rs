//! What `up` can be asked for, with defaults measured on the target machines.

use std::path::PathBuf;
use std::time::Duration;

use crate::conf::MON_PORTS;
use crate::error::SandboxError;

/// Directory used when neither the caller nor `$PIPELINE_SANDBOX_DIR` names one.
pub const DEFAULT_DIR: &str = "/tmp/pipeline-sandbox";
/// Environment variable that overrides [`DEFAULT_DIR`].
pub const DIR_ENV: &str = "PIPELINE_SANDBOX_DIR";
/// The gateway port clients expect by default.
pub const DEFAULT_RGW_PORT: u16 = 7480;
/// Smallest store accepted: below this the gateway's pools alone fill the OSDs.
pub const MIN_STORE_BYTES: u64 = 256 << 20;
/// Memstore size per OSD: 4 GiB. Memstore keeps data in RAM (~1.45x the bytes stored).
pub const DEFAULT_MEMSTORE_BYTES: u64 = 4 << 30;
/// Bluestore sparse-file size per OSD when none is given: 10 GiB (sparse, so cheap).
pub const DEFAULT_BLUESTORE_BYTES: u64 = 10 << 30;

/// The sandbox directory: `$PIPELINE_SANDBOX_DIR` if set and non-empty, else [`DEFAULT_DIR`].
pub fn default_dir() -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(DEFAULT_DIR),
    }
}

/// Which object store the OSDs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ObjectStore {
    /// Data in RAM (`memstore_device_bytes` of [`SandboxOptions::memstore_bytes`]); no disk
    /// needed, fastest start, but RSS grows with the data stored.
    Memstore,
    /// Bluestore on a sparse file of `size` bytes per OSD under the sandbox directory:
    /// bounded memory, closer to a real cluster, a few seconds slower to start.
    Bluestore { size: u64 },
}

/// Options for [`crate::up`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxOptions {
    /// Where everything lives: config, keys, pid files, logs, data.
    pub dir: PathBuf,
    /// Memstore capacity per OSD (only used with [`ObjectStore::Memstore`]).
    pub memstore_bytes: u64,
    pub objectstore: ObjectStore,
    /// `mon_allow_pool_delete`. Tests of the "pool deletion is disabled" path need `false`.
    pub allow_pool_delete: bool,
    /// Upper bound for the whole `up`, from first command to "gateway answering".
    pub ready_timeout: Duration,
    /// Port of the radosgw beast frontend (on 127.0.0.1, or on its lab host).
    pub rgw_port: u16,
    /// A lab of several hosts instead of the single-node sandbox (needs root).
    pub lab: Option<crate::lab::LabSpec>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            dir: default_dir(),
            memstore_bytes: DEFAULT_MEMSTORE_BYTES,
            objectstore: ObjectStore::Memstore,
            allow_pool_delete: true,
            ready_timeout: Duration::from_secs(60),
            rgw_port: DEFAULT_RGW_PORT,
            lab: None,
        }
    }
}

impl SandboxOptions {
    /// Rejects values that would only fail later, deep inside a daemon log.
    pub fn validate(&self) -> Result<(), SandboxError> {
        let invalid = |reason: String| Err(SandboxError::InvalidOption { reason });
        let store_bytes = match self.objectstore {
            ObjectStore::Memstore => self.memstore_bytes,
            ObjectStore::Bluestore { size } => size,
        };
        if store_bytes < MIN_STORE_BYTES {
            return invalid(format!(
                "object store size {store_bytes} bytes is below the minimum of {MIN_STORE_BYTES}"
            ));
        }
        if self.rgw_port == 0 || MON_PORTS.contains(&self.rgw_port) {
            return invalid(format!(
                "gateway port {} is 0 or a monitor port ({MON_PORTS:?})",
                self.rgw_port
            ));
        }
        if let Some(spec) = &self.lab {
            crate::lab::LabPlan::new(spec.clone())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_nonsense_is_not() {
        SandboxOptions::default().validate().unwrap();
        for bad in [
            SandboxOptions {
                memstore_bytes: 0,
                ..Default::default()
            },
            SandboxOptions {
                objectstore: ObjectStore::Bluestore { size: 1024 },
                ..Default::default()
            },
            SandboxOptions {
                rgw_port: 6789,
                ..Default::default()
            },
            SandboxOptions {
                rgw_port: 0,
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
