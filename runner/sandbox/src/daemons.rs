//! Which daemons a sandbox runs, their Ceph names and binaries.
//!
//! The name (`osd.1`, `client.rgw.sandbox`) is what Ceph substitutes for `$name`, so it
//! also names the pid file, log file and keyring of the daemon.

use serde::{Deserialize, Serialize};

/// Id of the single monitor.
pub const MON_ID: &str = "a";
/// Id of the single manager.
pub const MGR_ID: &str = "x";
/// Ceph entity of the gateway (`radosgw -n client.rgw.sandbox`).
pub const RGW_NAME: &str = "client.rgw.sandbox";
/// Number of OSDs of the single-node sandbox: three, so pools of the default size 3
/// become active+clean (a lab has its own count, `Topology::osd_count`).
pub const OSD_COUNT: u32 = 3;

/// Kind of a Ceph daemon, with the binary that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaemonKind {
    Mon,
    Mgr,
    Osd,
    Rgw,
    /// The OCI registry for plugins (not Ceph; see `registry.rs`).
    Registry,
}

impl DaemonKind {
    /// The executable; `down` only signals processes whose `argv[0]` is this binary.
    pub fn binary(self) -> &'static str {
        match self {
            DaemonKind::Mon => "ceph-mon",
            DaemonKind::Mgr => "ceph-mgr",
            DaemonKind::Osd => "ceph-osd",
            DaemonKind::Rgw => "radosgw",
            DaemonKind::Registry => crate::registry::PROGRAM,
        }
    }
}

/// One daemon of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Daemon {
    pub kind: DaemonKind,
    /// `a`, `x`, `0`…, or `rgw.sandbox` for the gateway.
    pub id: String,
}

impl Daemon {
    pub fn mon() -> Daemon {
        Daemon {
            kind: DaemonKind::Mon,
            id: MON_ID.into(),
        }
    }
    pub fn mgr() -> Daemon {
        Daemon {
            kind: DaemonKind::Mgr,
            id: MGR_ID.into(),
        }
    }
    pub fn osd(id: u32) -> Daemon {
        Daemon {
            kind: DaemonKind::Osd,
            id: id.to_string(),
        }
    }
    pub fn rgw() -> Daemon {
        Daemon {
            kind: DaemonKind::Rgw,
            id: RGW_NAME.trim_start_matches("client.").into(),
        }
    }

    pub fn registry() -> Daemon {
        Daemon {
            kind: DaemonKind::Registry,
            id: "sandbox".into(),
        }
    }

    /// Ceph's `$name`: `mon.a`, `osd.0`, `client.rgw.sandbox`.
    /// The number of an OSD; `None` for any other daemon.
    pub fn osd_id(&self) -> Option<u32> {
        (self.kind == DaemonKind::Osd)
            .then(|| self.id.parse().ok())
            .flatten()
    }

    pub fn name(&self) -> String {
        match self.kind {
            DaemonKind::Rgw => format!("client.{}", self.id),
            kind => format!("{}.{}", kind_prefix(kind), self.id),
        }
    }

    /// Inverse of [`Daemon::name`], used to interpret pid file names.
    pub fn from_name(name: &str) -> Option<Daemon> {
        let (prefix, id) = name.split_once('.')?;
        if id.is_empty() {
            return None;
        }
        let kind = match prefix {
            "mon" => DaemonKind::Mon,
            "mgr" => DaemonKind::Mgr,
            "osd" if id.parse::<u32>().is_ok() => DaemonKind::Osd,
            "client" if id.starts_with("rgw.") => DaemonKind::Rgw,
            "registry" => DaemonKind::Registry,
            _ => return None,
        };
        Some(Daemon {
            kind,
            id: id.into(),
        })
    }

    /// Arguments (after `-c ceph.conf`) that select this daemon's identity.
    pub fn identity_args(&self) -> Vec<String> {
        match self.kind {
            DaemonKind::Rgw => vec!["-n".into(), self.name()],
            _ => vec!["-i".into(), self.id.clone()],
        }
    }

    /// Directory kind for [`crate::layout::Layout::data_dir`].
    pub fn data_kind(&self) -> &'static str {
        kind_prefix(self.kind)
    }
}

fn kind_prefix(kind: DaemonKind) -> &'static str {
    match kind {
        DaemonKind::Mon => "mon",
        DaemonKind::Mgr => "mgr",
        DaemonKind::Osd => "osd",
        DaemonKind::Rgw => "rgw",
        DaemonKind::Registry => "registry",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for daemon in crate::topology::Topology::single().daemons() {
            assert_eq!(Daemon::from_name(&daemon.name()), Some(daemon));
        }
        assert_eq!(Daemon::rgw().name(), RGW_NAME);
        assert_eq!(Daemon::osd(2).name(), "osd.2");
        let registry = Daemon::registry();
        assert_eq!(Daemon::from_name(&registry.name()), Some(registry));
    }

    #[test]
    fn unknown_names_are_rejected() {
        for name in [
            "",
            "mon",
            "mon.",
            "osd.x",
            "client.admin",
            "mds.a",
            "foo.bar",
        ] {
            assert_eq!(Daemon::from_name(name), None, "{name}");
        }
    }
}
