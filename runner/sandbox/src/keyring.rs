//! Keyring files in the format `ceph-authtool` writes.
//!
//! The monitor's mkfs keyring holds the keys of `mon.`, `client.admin`, `mgr.x` and
//! `client.rgw.sandbox` with their caps: `ceph-mon --mkfs` imports them all, so the manager
//! and the gateway can start right after the monitor without a `ceph auth get-or-create`
//! round trip each (and without a window where a daemon starts before its key exists).

use std::fmt::Write as _;

use crate::daemons::{MGR_ID, RGW_NAME};

/// One entity of a keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyEntry {
    pub name: String,
    pub key: String,
    /// `(service, capability)` pairs, e.g. `("mon", "allow *")`.
    pub caps: Vec<(&'static str, &'static str)>,
}

impl KeyEntry {
    pub fn mon(key: String) -> KeyEntry {
        KeyEntry {
            name: "mon.".into(),
            key,
            caps: vec![("mon", "allow *")],
        }
    }
    pub fn admin(key: String) -> KeyEntry {
        KeyEntry {
            name: "client.admin".into(),
            key,
            caps: vec![
                ("mds", "allow *"),
                ("mgr", "allow *"),
                ("mon", "allow *"),
                ("osd", "allow *"),
            ],
        }
    }
    pub fn mgr(key: String) -> KeyEntry {
        KeyEntry {
            name: format!("mgr.{MGR_ID}"),
            key,
            caps: vec![
                ("mds", "allow *"),
                ("mon", "allow profile mgr"),
                ("osd", "allow *"),
            ],
        }
    }
    pub fn rgw(key: String) -> KeyEntry {
        KeyEntry {
            name: RGW_NAME.into(),
            key,
            caps: vec![
                ("mgr", "allow rw"),
                ("mon", "allow rw"),
                ("osd", "allow rwx"),
            ],
        }
    }
    /// An OSD's own keyring: caps live in the monitor (set by `ceph osd new`).
    pub fn osd(id: u32, key: String) -> KeyEntry {
        KeyEntry {
            name: format!("osd.{id}"),
            key,
            caps: vec![],
        }
    }
}

/// Renders entries as a keyring file.
pub(crate) fn render(entries: &[KeyEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        let _ = writeln!(s, "[{}]", e.name);
        let _ = writeln!(s, "\tkey = {}", e.key);
        for (service, cap) in &e.caps {
            let _ = writeln!(s, "\tcaps {service} = \"{cap}\"");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_ceph_authtool() {
        let text = render(&[KeyEntry::admin(
            "AQD4QA1retvrABAAc94owtdxjzQSyP0h2m2QMg==".into(),
        )]);
        // Captured from `ceph-authtool --create-keyring … -n client.admin --cap …` (16.2.15).
        assert_eq!(
            text,
            "[client.admin]\n\tkey = AQD4QA1retvrABAAc94owtdxjzQSyP0h2m2QMg==\n\
             \tcaps mds = \"allow *\"\n\tcaps mgr = \"allow *\"\n\
             \tcaps mon = \"allow *\"\n\tcaps osd = \"allow *\"\n"
        );
    }

    #[test]
    fn ceph_authtool_accepts_generated_keys() {
        if crate::process::find_program("ceph-authtool").is_none() {
            eprintln!("skipped: ceph-authtool is not installed");
            return;
        }
        let dir = std::env::temp_dir().join(format!("sbx-keyring-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k");
        let key = crate::keys::cephx_key(crate::release::KeyCipher::Aes128).unwrap();
        std::fs::write(&path, render(&[KeyEntry::rgw(key.clone())])).unwrap();
        let out = std::process::Command::new("ceph-authtool")
            .arg("-l")
            .arg(&path)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(stdout.contains(&key), "{stdout}");
        assert!(stdout.contains("caps osd = \"allow rwx\""), "{stdout}");
    }
}
