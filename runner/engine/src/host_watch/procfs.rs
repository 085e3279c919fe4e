//! The counters the host watch reads from `/proc`, and the rates between two
//! readings. Parsers take the files' text (tested on captures of this
//! machine's files, `tests/procfs/`); anything they do not recognise is
//! skipped, never a panic: the files are the kernel's, but the text of a
//! remote host's could be anything.

use std::collections::BTreeMap;

use super::{DiskSample, HostSample, NicSample};

/// One CPU's time, in clock ticks, split the way the verdict needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// user, system, irq, softirq (guest time is inside user). Not nice:
    /// a niced process (a background build under `nice -n 19`) yields the
    /// core to any normal-priority thread that wants it, so its time was
    /// there for the benchmark to take, like idle time.
    pub busy: u64,
    /// User time of niced processes (their system time is in `system`).
    pub nice: u64,
    pub idle: u64,
    pub iowait: u64,
    /// Taken by the hypervisor for other guests.
    pub steal: u64,
    /// The parts of `busy` worth telling apart: user; system; softirq
    /// (network receive work lands there).
    pub user: u64,
    pub system: u64,
    pub softirq: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.busy + self.nice + self.idle + self.iowait + self.steal
    }
}

/// The per-core lines of `/proc/stat` (`cpu0`, `cpu1`, …), in order.
pub fn parse_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let name = fields.next()?;
            let core = name.strip_prefix("cpu")?;
            if core.is_empty() || !core.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
            let at = |i: usize| n.get(i).copied().unwrap_or(0);
            (n.len() >= 4).then(|| CpuTimes {
                busy: at(0)
                    .saturating_add(at(2))
                    .saturating_add(at(5))
                    .saturating_add(at(6)),
                nice: at(1),
                idle: at(3),
                iowait: at(4),
                steal: at(7),
                user: at(0),
                system: at(2),
                softirq: at(6),
            })
        })
        .collect()
}

/// A device or interface name as the kernel gives it: short, printable, no
/// spaces. Anything else (a hostile host's answer) is skipped, so names are
/// safe in the report and the terminal.
fn plausible_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_graphic())
}

/// An interface's counters from `/proc/net/dev`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NicCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Packets dropped, received and sent (a full ring, a full qdisc).
    pub dropped: u64,
}

/// `/proc/net/dev`: interface → its counters.
pub fn parse_net_dev(text: &str) -> BTreeMap<String, NicCounters> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        let n: Vec<u64> = counters
            .split_ascii_whitespace()
            .map_while(|f| f.parse().ok())
            .collect();
        if n.len() >= 9 && plausible_name(name.trim()) {
            out.insert(
                name.trim().to_string(),
                NicCounters {
                    rx_bytes: n[0],
                    tx_bytes: n[8],
                    // rx: bytes packets errs drop …; tx from the 9th on, the same.
                    dropped: n[3].saturating_add(n.get(11).copied().unwrap_or(0)),
                },
            );
        }
    }
    out
}

/// `RetransSegs` of the `Tcp:` lines of `/proc/net/snmp`.
pub fn parse_tcp_retransmits(text: &str) -> Option<u64> {
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let names = tcp.next()?;
    let values = tcp.next()?;
    let at = names
        .split_ascii_whitespace()
        .position(|n| n == "RetransSegs")?;
    values.split_ascii_whitespace().nth(at)?.parse().ok()
}

/// A block device's counters from `/proc/diskstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskCounters {
    pub reads: u64,
    pub writes: u64,
    /// Milliseconds the completed reads and writes took, queue included.
    pub read_ms: u64,
    pub write_ms: u64,
    pub sectors_read: u64,
    pub sectors_written: u64,
    /// Milliseconds the device had I/O in flight (its utilisation).
    pub io_ticks_ms: u64,
}

/// `/proc/diskstats`: device → counters.
pub fn parse_diskstats(text: &str) -> BTreeMap<String, DiskCounters> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        if fields.len() < 14 {
            continue;
        }
        let n = |i: usize| fields[i].parse::<u64>().ok();
        // major minor name, then reads merged sectors ms, writes merged sectors ms, in-flight, io_ticks.
        if let (Some(read), Some(written), Some(ticks), true) =
            (n(5), n(9), n(12), plausible_name(fields[2]))
        {
            out.insert(
                fields[2].to_string(),
                DiskCounters {
                    reads: n(3).unwrap_or(0),
                    read_ms: n(6).unwrap_or(0),
                    writes: n(7).unwrap_or(0),
                    write_ms: n(10).unwrap_or(0),
                    sectors_read: read,
                    sectors_written: written,
                    io_ticks_ms: ticks,
                },
            );
        }
    }
    out
}

/// What an interface can carry, bits/s: its link speed
/// (`/sys/class/net/IF/speed`; virtual interfaces report none or a nominal
/// one) and the rate its egress is shaped to (a root `tbf`, `netem` or
/// `cake` qdisc with a rate), which caps what it sends.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkRate {
    pub link_bits: Option<f64>,
    pub egress_bits: Option<f64>,
    /// The qdisc that shapes the egress (`tbf`).
    pub shaper: Option<&'static str>,
    /// `link_bits` is the inventory's, not the kernel's.
    pub declared: bool,
}

/// The inventory's speeds over the kernel's: the operator knows a VM's
/// virtio NIC or a veth carries 10 Gb/s when the kernel says nothing, or
/// that a 25 Gb/s port is capped upstream.
pub fn declare_speeds(declared: &BTreeMap<String, f64>, rates: &mut BTreeMap<String, LinkRate>) {
    for (nic, bits) in declared {
        let rate = rates.entry(nic.clone()).or_default();
        rate.link_bits = Some(*bits);
        rate.declared = true;
    }
}

/// `/sys/class/net/*/speed` lines as the remote script prints them
/// (`eth0 10000`, Mb/s), into each interface's link speed.
pub fn parse_speeds(text: &str, rates: &mut BTreeMap<String, LinkRate>) {
    for line in text.lines() {
        let Some((name, mbit)) = line.split_once(' ') else {
            continue;
        };
        if let Ok(mbit) = mbit.trim().parse::<f64>()
            && mbit > 0.0
            && mbit.is_finite()
            && plausible_name(name)
        {
            rates.entry(name.to_string()).or_default().link_bits = Some(mbit * 1e6);
        }
    }
}

/// `tc -j qdisc show`: each interface's root shaping rate (tc prints rates
/// in bytes/s).
pub fn parse_tc_qdiscs(json: &str, rates: &mut BTreeMap<String, LinkRate>) {
    let Ok(serde_json::Value::Array(qdiscs)) = serde_json::from_str::<serde_json::Value>(json)
    else {
        return;
    };
    for q in qdiscs {
        if q.get("root").and_then(serde_json::Value::as_bool) != Some(true) {
            continue;
        }
        let (Some(dev), Some(kind)) = (
            q.get("dev").and_then(serde_json::Value::as_str),
            q.get("kind").and_then(serde_json::Value::as_str),
        ) else {
            continue;
        };
        let shaper = match kind {
            "tbf" => "tbf",
            "netem" => "netem",
            "cake" => "cake",
            _ => continue,
        };
        let options = q.get("options");
        let rate = options
            .and_then(|o| o.get("rate").or_else(|| o.get("bandwidth")))
            .and_then(serde_json::Value::as_f64);
        if let Some(bytes) = rate.filter(|r| *r > 0.0 && r.is_finite())
            && plausible_name(dev)
        {
            let entry = rates.entry(dev.to_string()).or_default();
            entry.egress_bits = Some(bytes * 8.0);
            entry.shaper = Some(shaper);
        }
    }
}

/// One reading of every counter.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub cpus: Vec<CpuTimes>,
    pub nics: BTreeMap<String, NicCounters>,
    pub tcp_retransmits: Option<u64>,
    pub disks: BTreeMap<String, DiskCounters>,
    pub memory: Option<Memory>,
    /// The watched processes, when this reading included them.
    pub procs: Option<BTreeMap<u32, super::procs::ProcTimes>>,
}

/// `/proc/meminfo`'s total and available memory, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Memory {
    pub total: u64,
    pub available: u64,
}

/// `MemTotal` and `MemAvailable` of `/proc/meminfo` (kB there).
pub fn parse_meminfo(text: &str) -> Option<Memory> {
    let kb = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            let n: u64 = rest.split_ascii_whitespace().next()?.parse().ok()?;
            n.checked_mul(1024)
        })
    };
    let (total, available) = (kb("MemTotal")?, kb("MemAvailable")?);
    (total > 0 && available <= total).then_some(Memory { total, available })
}

/// The texts of `/proc/stat`, `/proc/net/dev`, `/proc/net/snmp`,
/// `/proc/diskstats` and `/proc/meminfo`, parsed.
pub fn snapshot(stat: &str, net_dev: &str, snmp: &str, diskstats: &str, meminfo: &str) -> Snapshot {
    Snapshot {
        cpus: parse_stat(stat),
        nics: parse_net_dev(net_dev),
        tcp_retransmits: parse_tcp_retransmits(snmp),
        disks: parse_diskstats(diskstats),
        memory: parse_meminfo(meminfo),
        procs: None,
    }
}

/// Percentages are kept to a tenth: the verdict needs no more, results.json stays small.
fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// What happened between two snapshots `seconds` apart, as the sample at
/// `t_s`. Devices and interfaces that did nothing are left out; counters
/// that went backwards (a device replaced, a counter reset) count as idle.
pub fn between(before: &Snapshot, after: &Snapshot, seconds: f64, t_s: f64) -> HostSample {
    let seconds = seconds.max(1e-3);
    let mut cpu_busy_pct = Vec::new();
    let (mut iowait, mut steal, mut total) = (0u64, 0u64, 0u64);
    let (mut user, mut nice, mut system, mut softirq) = (0u64, 0u64, 0u64, 0u64);
    for (b, a) in before.cpus.iter().zip(&after.cpus) {
        let d = |x: u64, y: u64| y.saturating_sub(x);
        let t = d(b.total(), a.total());
        let busy = d(b.busy, a.busy);
        cpu_busy_pct.push(if t == 0 {
            0.0
        } else {
            tenth(100.0 * busy as f64 / t as f64)
        });
        iowait += d(b.iowait, a.iowait);
        steal += d(b.steal, a.steal);
        user += d(b.user, a.user);
        nice += d(b.nice, a.nice);
        system += d(b.system, a.system);
        softirq += d(b.softirq, a.softirq);
        total += t;
    }
    let share = |x: u64| {
        if total == 0 {
            0.0
        } else {
            tenth(100.0 * x as f64 / total as f64)
        }
    };
    let mut nics = BTreeMap::new();
    for (name, now) in &after.nics {
        let Some(then) = before.nics.get(name) else {
            continue;
        };
        let rx = now.rx_bytes.saturating_sub(then.rx_bytes);
        let tx = now.tx_bytes.saturating_sub(then.tx_bytes);
        let dropped = now.dropped.saturating_sub(then.dropped);
        if rx > 0 || tx > 0 || dropped > 0 {
            nics.insert(
                name.clone(),
                NicSample {
                    rx_bytes_per_s: (rx as f64 / seconds).round(),
                    tx_bytes_per_s: (tx as f64 / seconds).round(),
                    dropped,
                },
            );
        }
    }
    let mut disks = BTreeMap::new();
    for (name, c) in &after.disks {
        let Some(c0) = before.disks.get(name) else {
            continue;
        };
        let ticks = c.io_ticks_ms.saturating_sub(c0.io_ticks_ms);
        let read = c.sectors_read.saturating_sub(c0.sectors_read);
        let written = c.sectors_written.saturating_sub(c0.sectors_written);
        let reads = c.reads.saturating_sub(c0.reads);
        let writes = c.writes.saturating_sub(c0.writes);
        let io_ms = c
            .read_ms
            .saturating_sub(c0.read_ms)
            .saturating_add(c.write_ms.saturating_sub(c0.write_ms));
        if ticks > 0 || read > 0 || written > 0 {
            let ios = reads.saturating_add(writes);
            disks.insert(
                name.clone(),
                DiskSample {
                    util_pct: tenth((100.0 * ticks as f64 / (1000.0 * seconds)).min(100.0)),
                    reads_per_s: (reads as f64 / seconds).round(),
                    writes_per_s: (writes as f64 / seconds).round(),
                    // iostat's await: the time an I/O completed in this second took, queue included.
                    await_ms: (ios > 0).then(|| tenth(io_ms as f64 / ios as f64)),
                    // /proc/diskstats counts 512-byte sectors whatever the device's own size.
                    read_bytes_per_s: (read as f64 * 512.0 / seconds).round(),
                    write_bytes_per_s: (written as f64 * 512.0 / seconds).round(),
                },
            );
        }
    }
    let tcp_retransmits = match (before.tcp_retransmits, after.tcp_retransmits) {
        (Some(b), Some(a)) => a.saturating_sub(b),
        _ => 0,
    };
    HostSample {
        t_s: (t_s * 1000.0).round() / 1000.0,
        cpu_busy_pct,
        cpu_iowait_pct: share(iowait),
        cpu_steal_pct: share(steal),
        cpu_user_pct: share(user),
        cpu_nice_pct: share(nice),
        cpu_system_pct: share(system),
        cpu_softirq_pct: share(softirq),
        memory_total_bytes: after.memory.map_or(0, |m| m.total),
        memory_available_bytes: after.memory.map_or(0, |m| m.available),
        disks,
        nics,
        tcp_retransmits,
        gateways: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> String {
        let path = format!("{}/../../tests/procfs/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn snap(prefix: &str) -> Snapshot {
        let or_empty = |suffix: &str| {
            let path = format!(
                "{}/../../tests/procfs/{prefix}.{suffix}",
                env!("CARGO_MANIFEST_DIR")
            );
            std::fs::read_to_string(path).unwrap_or_default()
        };
        snapshot(
            &or_empty("stat"),
            &or_empty("net-dev"),
            &or_empty("net-snmp"),
            &or_empty("diskstats"),
            &or_empty("meminfo"),
        )
    }

    #[test]
    fn this_machines_files_parse() {
        let cpus = parse_stat(&capture("debian12-idle-0.stat"));
        assert_eq!(cpus.len(), 2, "two cores here");
        assert_eq!(cpus[0].idle, 1293394);
        assert_eq!(cpus[0].steal, 12197);
        let nics = parse_net_dev(&capture("debian12-idle-0.net-dev"));
        assert_eq!(
            (nics["eth0"].rx_bytes, nics["eth0"].tx_bytes),
            (787778316, 1063020)
        );
        assert!(nics.contains_key("lo"));
        assert_eq!(
            parse_tcp_retransmits(&capture("debian12-idle-0.net-snmp")),
            Some(8155)
        );
        let memory = parse_meminfo(&capture("debian12-idle-0.meminfo")).unwrap();
        assert_eq!(memory.total, 24683792 * 1024);
        assert_eq!(memory.available, 23430300 * 1024);
        assert_eq!(
            parse_meminfo("MemTotal: 10 kB\nMemAvailable: 20 kB\n"),
            None
        );
        assert_eq!(parse_meminfo("MemTotal: 99999999999999999999 kB"), None);
        let disks = parse_diskstats(&capture("debian12-idle-0.diskstats"));
        assert!(disks.contains_key("vda") && disks.contains_key("loop0"));
    }

    #[test]
    fn the_labs_tbf_shaping_is_each_interfaces_egress_rate() {
        let mut rates = BTreeMap::new();
        parse_tc_qdiscs(&capture("debian12-lab-client1.tc-qdisc.json"), &mut rates);
        parse_speeds("eth0 10000\nlo \nbond0 -1\n", &mut rates);
        let eth0 = rates["eth0"];
        assert_eq!(eth0.egress_bits, Some(200e6));
        assert_eq!(eth0.link_bits, Some(10e9));
        assert_eq!(eth0.shaper, Some("tbf"));
        assert!(!rates.contains_key("lo") && !rates.contains_key("bond0"));
        let mut machine = BTreeMap::new();
        parse_tc_qdiscs(&capture("debian12-lab-machine.tc-qdisc.json"), &mut machine);
        assert_eq!(machine["pl-client1"].egress_bits, Some(200e6));
        assert!(!machine.contains_key("eth0"), "pfifo_fast shapes nothing");
        parse_tc_qdiscs("not json", &mut machine);
        parse_tc_qdiscs(
            "[{\"root\":true,\"dev\":\"x\",\"kind\":\"tbf\",\"options\":{\"rate\":-1}}]",
            &mut machine,
        );
        assert!(!machine.contains_key("x"));
    }

    #[test]
    fn one_busy_core_and_a_direct_io_write_between_two_readings() {
        let s = between(
            &snap("debian12-one-core-busy-0"),
            &snap("debian12-one-core-busy-1"),
            1.0,
            1.0,
        );
        // A shell loop on cpu1: 98 user ticks and no idle; cpu0 idle.
        assert_eq!(s.cpu_busy_pct.len(), 2);
        assert!(s.cpu_busy_pct[1] > 95.0, "{s:?}");
        assert!(s.cpu_busy_pct[0] < 10.0, "{s:?}");

        let s = between(
            &snap("debian12-dd-direct-0"),
            &snap("debian12-dd-direct-1"),
            1.0,
            1.0,
        );
        // dd oflag=direct to vda: 544 ms of I/O in flight, 1632448 sectors written.
        let vda = &s.disks["vda"];
        assert_eq!(vda.util_pct, 54.4);
        assert_eq!(vda.write_bytes_per_s, 1632448.0 * 512.0);
        // 1606 writes and 8 reads completed, taking 980 + 6 ms: iostat's await.
        assert_eq!((vda.writes_per_s, vda.reads_per_s), (1606.0, 8.0));
        assert_eq!(vda.await_ms, Some(0.6));
        // Of the two cores' 212 ticks: 25 system (dd's), 5 user, 6 softirq.
        assert_eq!(
            (s.cpu_system_pct, s.cpu_user_pct, s.cpu_softirq_pct),
            (11.8, 2.4, 2.8)
        );
        assert!(!s.disks.contains_key("loop0"), "idle devices are left out");
    }

    #[test]
    fn niced_work_is_apart_from_busy() {
        // `nice -n 19` busy loops pinned to each core, one second apart: 98
        // and 100 nice ticks, next to nothing else.
        let s = between(
            &snap("debian12-two-niced-loops-0"),
            &snap("debian12-two-niced-loops-1"),
            1.0,
            1.0,
        );
        assert_eq!(s.cpu_busy_pct.len(), 2);
        assert!(s.cpu_busy_pct.iter().all(|p| *p < 5.0), "{s:?}");
        assert!(s.cpu_nice_pct > 95.0, "{s:?}");
        assert!(s.cpu_user_pct < 5.0, "{s:?}");
    }

    #[test]
    fn garbage_and_counters_that_go_backwards_are_no_panic() {
        assert!(parse_stat("cpu0 x y z\ncpufoo 1 2 3 4\n\u{1b}[2J").is_empty());
        assert!(parse_net_dev("eth0: 1 2\n:::").is_empty());
        assert_eq!(parse_tcp_retransmits("Tcp: RetransSegs\n"), None);
        assert!(parse_diskstats("1 2 sda 1 2").is_empty());
        let drops = parse_net_dev("eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16");
        assert_eq!(drops["eth0"].dropped, 4 + 12);
        assert!(parse_net_dev("\u{1b}]0;x\u{7}: 1 2 3 4 5 6 7 8 9 10").is_empty());
        let later = snap("debian12-dd-direct-1");
        let earlier = snap("debian12-dd-direct-0");
        let s = between(&later, &earlier, 1.0, 1.0);
        assert!(s.disks.is_empty() && s.nics.is_empty() && s.tcp_retransmits == 0);
    }
}
