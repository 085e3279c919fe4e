//! What a host is, read once per stage beside its samples: kernel, CPU
//! model and count, memory, each interface's MTU and link speed, and the
//! network and memory sysctls that move storage figures. Kept once per run
//! (`host_manifests` in results.json); `compare` names what changed between
//! two runs ("host node1 mtu eth0 1500 → 9000"). Read from `/proc` and
//! `/sys` (over the host's SSH session for a remote one): a host needs no
//! tool. The text may come from a hostile host: names and values that are
//! not short and printable are left out.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The sysctls recorded, as paths under `/proc/sys/`.
pub const SYSCTLS: [&str; 14] = [
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/netdev_max_backlog",
    "net/core/somaxconn",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_mtu_probing",
    "net/ipv4/tcp_slow_start_after_idle",
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/swappiness",
    "vm/min_free_kbytes",
    "vm/zone_reclaim_mode",
];

/// At most this many interfaces are recorded.
const MAX_INTERFACES: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostManifest {
    /// `/proc/sys/kernel/osrelease` (`uname -r`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `/proc/sys/kernel/random/boot_id`: hosts that show the same one are
    /// network namespaces of one machine (as a lab's are) and share its CPUs
    /// and disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// `/proc/sys/kernel/hostname`: the name an OSD's metadata gives its
    /// host, by which a saturated disk is named by the OSD on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The first `model name` of `/proc/cpuinfo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Processors `/proc/cpuinfo` lists.
    #[serde(default)]
    pub cpus: usize,
    #[serde(default)]
    pub memory_total_bytes: u64,
    /// Each interface's MTU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mtu: BTreeMap<String, u64>,
    /// Each interface's link speed as the kernel reports it, Mb/s (none
    /// for virtual interfaces that report none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub link_speed_mbit: BTreeMap<String, u64>,
    /// `net.core.rmem_max` → `212992`; whitespace runs as one space.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctls: BTreeMap<String, String>,
}

/// A value as recorded: whitespace runs as one space, printable, at most
/// 200 characters; anything else is not recorded.
fn value(text: &str) -> Option<String> {
    let v = text.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
    (!v.is_empty() && v.len() <= 200 && v.chars().all(|c| !c.is_control())).then_some(v)
}

fn name(text: &str) -> Option<&str> {
    (!text.is_empty() && text.len() <= 64 && text.bytes().all(|b| b.is_ascii_graphic()))
        .then_some(text)
}

/// `IF VALUE` lines (`eth0 1500`) into numbers by interface.
fn per_interface(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (nic, n) = line.split_once(' ')?;
            let n: u64 = n.trim().parse().ok().filter(|n| *n > 0)?;
            Some((name(nic)?.to_string(), n))
        })
        .take(MAX_INTERFACES)
        .collect()
}

/// The texts a manifest is read from, as the host printed them.
#[derive(Debug, Default)]
pub struct Texts<'a> {
    /// `/proc/sys/kernel/osrelease`.
    pub osrelease: &'a str,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: &'a str,
    /// `/proc/sys/kernel/hostname`.
    pub hostname: &'a str,
    /// `/proc/cpuinfo`.
    pub cpuinfo: &'a str,
    /// `/proc/meminfo`.
    pub meminfo: &'a str,
    /// `IF MTU` lines.
    pub mtu: &'a str,
    /// `IF SPEED` lines.
    pub speed: &'a str,
    /// `PATH VALUE` lines of the [`SYSCTLS`] (`net/core/rmem_max 212992`).
    pub sysctl: &'a str,
}

/// The manifest from its texts.
pub fn parse(texts: &Texts<'_>) -> HostManifest {
    let field = |line: &str, key: &str| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    };
    let sysctls = texts
        .sysctl
        .lines()
        .filter_map(|line| {
            let (path, v) = line.split_once(' ')?;
            SYSCTLS.contains(&path).then_some(())?;
            Some((path.replace('/', "."), value(v)?))
        })
        .collect();
    let cpuinfo = texts.cpuinfo;
    HostManifest {
        kernel: value(texts.osrelease),
        boot_id: value(texts.boot_id),
        hostname: name(texts.hostname.trim()).map(String::from),
        cpu_model: cpuinfo
            .lines()
            .find_map(|l| field(l, "model name"))
            .and_then(|m| value(&m)),
        cpus: cpuinfo
            .lines()
            .filter(|l| field(l, "processor").is_some())
            .count(),
        memory_total_bytes: super::procfs::parse_meminfo(texts.meminfo).map_or(0, |m| m.total),
        mtu: per_interface(texts.mtu),
        link_speed_mbit: per_interface(texts.speed),
        sysctls,
    }
}

/// This machine's manifest.
pub fn local() -> HostManifest {
    let read = |path: &str| super::read_bounded(path).unwrap_or_default();
    let mut mtu = String::new();
    let mut speed = String::new();
    if let Ok(entries) = std::fs::read_dir("/sys/class/net") {
        for entry in entries.flatten().take(MAX_INTERFACES) {
            let nic = entry.file_name().to_string_lossy().to_string();
            for (file, out) in [("mtu", &mut mtu), ("speed", &mut speed)] {
                if let Some(v) = super::read_bounded(&format!("/sys/class/net/{nic}/{file}")) {
                    out.push_str(&format!("{nic} {}\n", v.trim()));
                }
            }
        }
    }
    let mut sysctl = String::new();
    for path in SYSCTLS {
        if let Some(v) = super::read_bounded(&format!("/proc/sys/{path}")) {
            sysctl.push_str(&format!("{path} {}\n", v.trim()));
        }
    }
    parse(&Texts {
        osrelease: &read("/proc/sys/kernel/osrelease"),
        boot_id: &read("/proc/sys/kernel/random/boot_id"),
        hostname: &read("/proc/sys/kernel/hostname"),
        cpuinfo: &read("/proc/cpuinfo"),
        meminfo: &read("/proc/meminfo"),
        mtu: &mtu,
        speed: &speed,
        sysctl: &sysctl,
    })
}

/// The shell lines that print what [`parse`] reads, between `@@` markers
/// (the remote watch's script runs them when the runner asks for `m`).
pub fn remote_script() -> String {
    let sysctls: Vec<String> = SYSCTLS
        .iter()
        .map(|p| format!("echo \"{p} $(cat /proc/sys/{p} 2>/dev/null)\""))
        .collect();
    format!(
        "echo @@osrelease; cat /proc/sys/kernel/osrelease; \
         echo @@bootid; cat /proc/sys/kernel/random/boot_id; \
         echo @@hostname; cat /proc/sys/kernel/hostname; \
         echo @@cpuinfo; cat /proc/cpuinfo; \
         echo @@meminfo; cat /proc/meminfo; \
         echo @@mtu; for f in /sys/class/net/*/mtu; do n=${{f%/mtu}}; echo \"${{n##*/}} $(cat \"$f\" 2>/dev/null)\"; done; \
         echo @@speed; for f in /sys/class/net/*/speed; do n=${{f%/speed}}; echo \"${{n##*/}} $(cat \"$f\" 2>/dev/null)\"; done; \
         echo @@sysctl; {}; \
         echo @@end",
        sysctls.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_and_hostile_text() {
        let here = local();
        assert!(here.kernel.is_some() && here.cpus >= 1, "{here:?}");
        assert!(
            here.memory_total_bytes > 0 && here.mtu.contains_key("lo"),
            "{here:?}"
        );
        assert!(here.sysctls.contains_key("net.core.rmem_max"), "{here:?}");
        let tcp_rmem = &here.sysctls["net.ipv4.tcp_rmem"];
        assert_eq!(tcp_rmem.split(' ').count(), 3, "tabs as spaces: {tcp_rmem}");

        assert_eq!(here.boot_id.as_ref().map(String::len), Some(36), "{here:?}");
        assert!(here.hostname.is_some(), "{here:?}");
        let m = parse(&Texts {
            osrelease: "6.1.0\u{1b}[2J\n",
            boot_id: "\u{1b}]0;boot\n",
            hostname: "osd\u{1b}[1m3\n",
            cpuinfo: "processor\t: 0\nmodel name\t: Some CPU\nprocessor\t: 1\n",
            meminfo: "",
            mtu: "eth0 9000\n\u{7}bad 1500\nlo x\n",
            speed: "eth0 -1\n",
            sysctl: "net/core/rmem_max 4194304\n/etc/shadow root\nvm/swappiness \u{1b}]0;\n",
        });
        assert_eq!(m.kernel, None, "a control character: not recorded");
        assert_eq!(m.boot_id, None, "a control character: not recorded");
        assert_eq!(m.hostname, None, "a control character: not recorded");
        let named = parse(&Texts {
            hostname: "ceph-osd3\n",
            ..Texts::default()
        });
        assert_eq!(named.hostname.as_deref(), Some("ceph-osd3"));
        assert_eq!((m.cpu_model.as_deref(), m.cpus), (Some("Some CPU"), 2));
        assert_eq!(m.mtu, BTreeMap::from([("eth0".to_string(), 9000)]));
        assert!(m.link_speed_mbit.is_empty());
        assert_eq!(
            m.sysctls,
            BTreeMap::from([("net.core.rmem_max".to_string(), "4194304".to_string())])
        );
    }
}
