//! What limited a stage's figures, from its host samples. A resource limits
//! the figures when it was at its limit for at least half of the stage's
//! samples: a benchmark that saturated the client's CPU measured the
//! client, not the cluster. Each finding says how long it held
//! ("every core of local ≥ 90% busy (28 s of 30)").
//!
//! The thresholds are those an engineer reading `mpstat`/`iostat` beside a
//! benchmark would use: ≥ 90% on every core is CPU-bound (niced time is
//! not busy: it yields to the benchmark); one core ≥ 95%
//! while the others average under 50% is one thread's limit; a device with
//! I/O in flight ≥ 90% of the time is at its limit; a NIC moving ≥ 90% of
//! its link speed in either direction is.

use std::collections::BTreeMap;

use super::HostSample;
use super::procfs::LinkRate;
use super::procs::ProcessPoint;

const ALL_CORES_BUSY_PCT: f64 = 90.0;
const ONE_CORE_BUSY_PCT: f64 = 95.0;
const OTHER_CORES_BELOW_PCT: f64 = 50.0;
const DISK_UTIL_PCT: f64 = 90.0;
const NIC_SHARE: f64 = 0.9;
/// Mean steal worth a mention.
const STEAL_PCT: f64 = 5.0;
/// Mean niced CPU time worth a mention: not busy for the verdict (a niced
/// process yields the core), but it shares caches and memory bandwidth.
const NICE_PCT: f64 = 20.0;

#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub limited_by: Vec<String>,
    pub observations: Vec<String>,
}

/// The findings for `host`, whose stage ran `duration_s` with these samples
/// (each after the first spanning `sample_s` seconds) and these readings
/// of its daemons' and clients' CPU; `rates` is what the interfaces can carry (link speed, egress shaping);
/// `osds_on` names the OSDs each of its disks serves (`loop1` → `osd.1 of
/// node1`, [`super::osd_disks`]).
pub fn verdict(
    host: &str,
    samples: &[HostSample],
    sample_s: f64,
    processes: &[ProcessPoint],
    duration_s: f64,
    rates: &BTreeMap<String, LinkRate>,
    osds_on: &BTreeMap<String, String>,
) -> Verdict {
    let mut out = Verdict::default();
    if samples.is_empty() {
        return out;
    }
    let total = duration_s.round().max(1.0);
    let of = |n: usize| format!("({:.0} s of {total:.0})", (n as f64 * sample_s).min(total));
    let limiting = |n: usize| 2 * n >= samples.len() && n > 0;

    let all_busy = samples
        .iter()
        .filter(|s| {
            !s.cpu_busy_pct.is_empty()
                && s.cpu_busy_pct
                    .iter()
                    .all(|p| *p >= ALL_CORES_BUSY_PCT - steal_of(s))
        })
        .count();
    if limiting(all_busy) {
        out.limited_by.push(format!(
            "CPU: every core of {host} ≥ {ALL_CORES_BUSY_PCT:.0}% busy {}{}",
            of(all_busy),
            who_took_it(processes)
        ));
    } else {
        let one_busy = samples.iter().filter(|s| one_core_saturated(s)).count();
        if limiting(one_busy) {
            out.limited_by.push(format!(
                "CPU: one core of {host} ≥ {ONE_CORE_BUSY_PCT:.0}% busy while the others idled {} (a single-threaded client or daemon){}",
                of(one_busy),
                who_took_it(processes)
            ));
        } else if let Some(finding) = one_busy_thread(host, processes, total, mean_steal(samples)) {
            out.limited_by.push(finding);
        }
    }

    let mut disks: Vec<&String> = samples.iter().flat_map(|s| s.disks.keys()).collect();
    disks.sort();
    disks.dedup();
    for disk in disks {
        let busy = samples
            .iter()
            .filter(|s| {
                s.disks
                    .get(disk)
                    .is_some_and(|d| d.util_pct >= DISK_UTIL_PCT)
            })
            .count();
        if limiting(busy) {
            let serving = osds_on
                .get(disk)
                .map(|osds| format!(" ({osds})"))
                .unwrap_or_default();
            out.limited_by.push(format!(
                "disk: {disk} of {host}{serving} ≥ {DISK_UTIL_PCT:.0}% utilised {}",
                of(busy)
            ));
        }
    }

    for (nic, rate) in rates {
        // What it receives is bounded by the link; what it sends also by its shaping.
        let egress = match (rate.link_bits, rate.egress_bits) {
            (Some(l), Some(e)) if e < l => Some((e, true)),
            (Some(l), _) => Some((l, false)),
            (None, Some(e)) => Some((e, true)),
            (None, None) => None,
        };
        let directions = [
            ("received", rate.link_bits.map(|l| (l, false)), true),
            ("sent", egress, false),
        ];
        for (verb, limit, rx) in directions {
            let Some((bits, shaped)) = limit else {
                continue;
            };
            let full = samples
                .iter()
                .filter(|s| {
                    s.nics.get(nic).is_some_and(|n| {
                        let bytes = if rx {
                            n.rx_bytes_per_s
                        } else {
                            n.tx_bytes_per_s
                        };
                        8.0 * bytes >= NIC_SHARE * bits
                    })
                })
                .count();
            if limiting(full) {
                let what = if shaped {
                    format!(
                        "the {} its egress is shaped to ({})",
                        link(bits),
                        rate.shaper.unwrap_or("tc")
                    )
                } else {
                    format!(
                        "its {} link{}",
                        link(bits),
                        if rate.declared { " (declared)" } else { "" }
                    )
                };
                out.limited_by.push(format!(
                    "network: {nic} of {host} {verb} ≥ {:.0}% of {what} {}",
                    NIC_SHARE * 100.0,
                    of(full)
                ));
            }
        }
    }

    let steal = mean_steal(samples);
    if steal >= STEAL_PCT {
        out.observations.push(format!(
            "the hypervisor took {steal:.0}% of {host}'s CPU time (steal)"
        ));
    }
    let nice = samples.iter().map(|s| s.cpu_nice_pct).sum::<f64>() / samples.len() as f64;
    if nice >= NICE_PCT {
        out.observations.push(format!(
            "niced processes took {nice:.0}% of {host}'s CPU time (low-priority work such as a background build; not counted as busy, it yields to the benchmark)"
        ));
    }
    let retransmits: u64 = samples.iter().map(|s| s.tcp_retransmits).sum();
    if retransmits > 0 {
        out.observations.push(format!(
            "{retransmits} TCP segment(s) retransmitted on {host}"
        ));
    }
    let mut dropped: BTreeMap<&str, u64> = BTreeMap::new();
    for s in samples {
        for (nic, n) in &s.nics {
            *dropped.entry(nic).or_default() += n.dropped;
        }
    }
    for (nic, n) in dropped.into_iter().filter(|(_, n)| *n > 0) {
        out.observations
            .push(format!("{n} packet(s) dropped on {nic} of {host}"));
    }
    let lowest = samples
        .iter()
        .filter(|s| s.memory_total_bytes > 0)
        .map(|s| s.memory_available_bytes as f64 / s.memory_total_bytes as f64)
        .min_by(f64::total_cmp);
    if let Some(share) = lowest.filter(|s| *s < LOW_MEMORY_SHARE) {
        out.observations.push(format!(
            "{host}'s available memory fell to {:.1}% of its total (memory pressure: reclaim or swapping may have slowed it)",
            share * 100.0
        ));
    }
    out
}

/// The watched processes that took the most CPU over the stage (a mean of
/// its readings, weighted by their spans), to three, each at 10% of a core
/// or more: "; radosgw 112%, fio 61% of a core". Empty without readings.
fn who_took_it(processes: &[ProcessPoint]) -> String {
    let span: f64 = processes.iter().map(|p| p.span_s).sum();
    if span <= 0.0 {
        return String::new();
    }
    let mut by_name: BTreeMap<&str, f64> = BTreeMap::new();
    for p in processes {
        for (name, s) in &p.by_name {
            *by_name.entry(name).or_default() += s.cpu_pct * p.span_s / span;
        }
    }
    let mut top: Vec<(&str, f64)> = by_name
        .into_iter()
        .filter(|(_, pct)| *pct >= 10.0)
        .collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(3);
    if top.is_empty() {
        return String::new();
    }
    let named: Vec<String> = top
        .iter()
        .map(|(n, pct)| format!("{n} {pct:.0}%"))
        .collect();
    format!("; {} of a core", named.join(", "))
}

/// A client whose busiest thread held a core (≥ 95% of one, less steal)
/// for at least half of the process readings: the client's own limit, found
/// even when that thread moved between cores and no core was full.
fn one_busy_thread(
    host: &str,
    processes: &[ProcessPoint],
    total: f64,
    steal: f64,
) -> Option<String> {
    let mut names: Vec<&String> = processes.iter().flat_map(|p| p.by_name.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let busy: Vec<&ProcessPoint> = processes
            .iter()
            .filter(|p| {
                p.by_name
                    .get(name)
                    .and_then(|s| s.busiest_thread_pct)
                    .is_some_and(|pct| pct >= ONE_CORE_BUSY_PCT - steal)
            })
            .collect();
        if !busy.is_empty() && 2 * busy.len() >= processes.len() {
            let seconds: f64 = busy.iter().map(|p| p.span_s).sum();
            return Some(format!(
                "CPU: one thread of {name} on {host} ≥ {ONE_CORE_BUSY_PCT:.0}% of a core ({:.0} s of {total:.0}) (a single-threaded client)",
                seconds.min(total)
            ));
        }
    }
    None
}

/// The stage's mean steal, in % of the CPU time.
fn mean_steal(samples: &[HostSample]) -> f64 {
    samples.iter().map(|s| s.cpu_steal_pct).sum::<f64>() / samples.len().max(1) as f64
}

/// Below this share of MemAvailable a host's memory is worth a note.
const LOW_MEMORY_SHARE: f64 = 0.05;

/// Steal counts against a core's availability: a core the hypervisor took
/// 20% of is at its limit at 80% busy.
fn steal_of(s: &HostSample) -> f64 {
    s.cpu_steal_pct
}

fn one_core_saturated(s: &HostSample) -> bool {
    let n = s.cpu_busy_pct.len();
    if n < 2 {
        return false;
    }
    let (top, at) = s
        .cpu_busy_pct
        .iter()
        .enumerate()
        .fold(
            (f64::MIN, 0),
            |(m, i), (j, p)| if *p > m { (*p, j) } else { (m, i) },
        );
    let others: f64 = s
        .cpu_busy_pct
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != at)
        .map(|(_, p)| p)
        .sum::<f64>()
        / (n - 1) as f64;
    top >= ONE_CORE_BUSY_PCT - steal_of(s) && others < OTHER_CORES_BELOW_PCT
}

fn link(bits: f64) -> String {
    if bits >= 1e9 {
        format!("{:.0} Gb/s", bits / 1e9)
    } else {
        format!("{:.0} Mb/s", bits / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DiskSample, NicSample};
    use super::*;

    /// The verdict of a host with no known link rates and no OSD disks.
    fn judge(
        host: &str,
        samples: &[HostSample],
        sample_s: f64,
        processes: &[ProcessPoint],
        duration_s: f64,
    ) -> Verdict {
        verdict(
            host,
            samples,
            sample_s,
            processes,
            duration_s,
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
    }

    fn cpu(busy: &[f64]) -> HostSample {
        HostSample {
            cpu_busy_pct: busy.to_vec(),
            ..HostSample::default()
        }
    }

    #[test]
    fn cores_full_of_niced_work_are_not_cpu_bound_but_said() {
        // A `nice -n 19` build on both cores beside a disk-bound benchmark.
        let samples: Vec<HostSample> = (0..3)
            .map(|_| HostSample {
                cpu_nice_pct: 70.0,
                ..cpu(&[25.0, 30.0])
            })
            .collect();
        let v = judge("local", &samples, 1.0, &[], 3.0);
        assert!(v.limited_by.is_empty(), "{v:?}");
        assert_eq!(
            v.observations,
            [
                "niced processes took 70% of local's CPU time (low-priority work such as a background build; not counted as busy, it yields to the benchmark)"
            ]
        );
    }

    /// An hour's stage kept in bounded memory (8-second points): a disk
    /// saturated for its last 40 minutes, retransmits spread over it.
    #[test]
    fn an_hour_long_stage_merged_in_memory_keeps_its_verdict_and_counts() {
        let mut series = crate::bounded_series::BoundedSeries::default();
        for t in 0..3600 {
            let mut s = HostSample {
                t_s: t as f64,
                tcp_retransmits: 1,
                ..cpu(&[20.0, 20.0])
            };
            let util_pct = if t >= 1200 { 100.0 } else { 5.0 };
            s.disks.insert(
                "vda".into(),
                DiskSample {
                    util_pct,
                    ..DiskSample::default()
                },
            );
            series.push(s);
        }
        let (samples, width) = series.finish();
        assert_eq!((samples.len(), width), (451, 8));
        let v = judge("node1", &samples, width as f64, &[], 3600.0);
        assert_eq!(
            v.limited_by,
            ["disk: vda of node1 ≥ 90% utilised (2400 s of 3600)"]
        );
        assert_eq!(
            v.observations,
            ["3600 TCP segment(s) retransmitted on node1"]
        );
    }

    fn point(t_s: f64, named: &[(&str, f64, Option<f64>)]) -> ProcessPoint {
        ProcessPoint {
            t_s,
            span_s: 5.0,
            by_name: named
                .iter()
                .map(|(n, cpu_pct, busiest_thread_pct)| {
                    (
                        n.to_string(),
                        crate::host_watch::procs::ProcessSample {
                            cpu_pct: *cpu_pct,
                            count: 1,
                            busiest_thread_pct: *busiest_thread_pct,
                        },
                    )
                })
                .collect(),
        }
    }

    /// A VM's virtio NIC whose speed the kernel does not report, declared
    /// 1 Gb/s in the inventory.
    #[test]
    fn a_declared_link_speed_is_judged_and_said_to_be_declared() {
        let mut s = cpu(&[20.0, 20.0]);
        s.nics.insert(
            "ens3".into(),
            NicSample {
                rx_bytes_per_s: 120e6,
                ..NicSample::default()
            },
        );
        let mut rates = BTreeMap::new();
        crate::host_watch::procfs::declare_speeds(
            &BTreeMap::from([("ens3".to_string(), 1e9)]),
            &mut rates,
        );
        let v = verdict(
            "osd1",
            std::slice::from_ref(&s),
            1.0,
            &[],
            1.0,
            &rates,
            &BTreeMap::new(),
        );
        assert_eq!(
            v.limited_by,
            ["network: ens3 of osd1 received ≥ 90% of its 1 Gb/s link (declared) (1 s of 1)"]
        );
    }

    /// Both cores full: who took them is said with the finding.
    #[test]
    fn every_core_busy_names_who_took_it() {
        let samples = [cpu(&[97.0, 99.0]), cpu(&[99.0, 95.0]), cpu(&[98.0, 96.0])];
        let processes = [
            point(
                5.0,
                &[("radosgw", 120.0, None), ("pipeline", 60.0, Some(30.0))],
            ),
            point(
                10.0,
                &[
                    ("radosgw", 100.0, None),
                    ("pipeline", 70.0, Some(35.0)),
                    ("ceph-osd", 8.0, None),
                ],
            ),
        ];
        let v = judge("local", &samples, 1.0, &processes, 3.0);
        assert_eq!(
            v.limited_by,
            [
                "CPU: every core of local ≥ 90% busy (3 s of 3); radosgw 110%, pipeline 65% of a core"
            ]
        );
    }

    /// A single-threaded client whose thread the scheduler moved between
    /// the cores: neither core was full, its thread was.
    #[test]
    fn a_client_thread_that_held_a_core_while_moving_between_cores() {
        let samples: Vec<HostSample> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    cpu(&[70.0, 40.0])
                } else {
                    cpu(&[40.0, 70.0])
                }
            })
            .collect();
        let processes = [
            point(5.0, &[("dd", 99.0, Some(99.0)), ("ceph-osd", 12.0, None)]),
            point(10.0, &[("dd", 98.0, Some(98.0)), ("ceph-osd", 12.0, None)]),
        ];
        let v = judge("local", &samples, 1.0, &processes, 10.0);
        assert_eq!(
            v.limited_by,
            [
                "CPU: one thread of dd on local ≥ 95% of a core (10 s of 10) (a single-threaded client)"
            ]
        );
        // Without the process readings there is nothing to go on.
        let v = judge("local", &samples, 1.0, &[], 10.0);
        assert!(v.limited_by.is_empty(), "{v:?}");
    }

    #[test]
    fn every_core_busy_most_of_the_stage_is_cpu_bound() {
        let samples = [cpu(&[97.0, 93.0]), cpu(&[99.0, 95.0]), cpu(&[40.0, 30.0])];
        let v = judge("local", &samples, 1.0, &[], 3.0);
        assert_eq!(
            v.limited_by,
            ["CPU: every core of local ≥ 90% busy (2 s of 3)"]
        );
    }

    #[test]
    fn one_saturated_core_while_the_other_idles_is_one_threads_limit() {
        let samples = [cpu(&[99.0, 8.0]), cpu(&[12.0, 98.0])];
        let v = judge("client1", &samples, 1.0, &[], 2.0);
        assert_eq!(
            v.limited_by,
            [
                "CPU: one core of client1 ≥ 95% busy while the others idled (2 s of 2) (a single-threaded client or daemon)"
            ]
        );
    }

    #[test]
    fn a_busy_disk_a_full_link_steal_and_retransmits() {
        let mut s = cpu(&[20.0, 20.0]);
        s.disks.insert(
            "vda".into(),
            DiskSample {
                util_pct: 99.0,
                ..DiskSample::default()
            },
        );
        s.nics.insert(
            "eth0".into(),
            NicSample {
                rx_bytes_per_s: 118e6,
                tx_bytes_per_s: 1e6,
                ..NicSample::default()
            },
        );
        s.cpu_steal_pct = 12.0;
        s.tcp_retransmits = 3;
        s.nics.get_mut("eth0").unwrap().dropped = 7;
        s.memory_total_bytes = 1000;
        s.memory_available_bytes = 20;
        s.nics.insert(
            "veth1".into(),
            NicSample {
                rx_bytes_per_s: 1e6,
                tx_bytes_per_s: 24.5e6,
                ..NicSample::default()
            },
        );
        let rates = BTreeMap::from([
            (
                "eth0".to_string(),
                LinkRate {
                    link_bits: Some(1e9),
                    ..LinkRate::default()
                },
            ),
            (
                "veth1".to_string(),
                LinkRate {
                    link_bits: Some(10e9),
                    egress_bits: Some(200e6),
                    shaper: Some("tbf"),
                    declared: false,
                },
            ),
        ]);
        let v = verdict(
            "local",
            std::slice::from_ref(&s),
            1.0,
            &[],
            1.0,
            &rates,
            &BTreeMap::new(),
        );
        let osds_on = BTreeMap::from([("vda".to_string(), "osd.3 of node2".to_string())]);
        assert_eq!(
            verdict(
                "node2",
                std::slice::from_ref(&s),
                1.0,
                &[],
                1.0,
                &BTreeMap::new(),
                &osds_on
            )
            .limited_by,
            ["disk: vda of node2 (osd.3 of node2) ≥ 90% utilised (1 s of 1)"]
        );
        assert_eq!(
            v.limited_by,
            [
                "disk: vda of local ≥ 90% utilised (1 s of 1)",
                "network: eth0 of local received ≥ 90% of its 1 Gb/s link (1 s of 1)",
                "network: veth1 of local sent ≥ 90% of the 200 Mb/s its egress is shaped to (tbf) (1 s of 1)"
            ]
        );
        assert_eq!(
            v.observations,
            [
                "the hypervisor took 12% of local's CPU time (steal)",
                "3 TCP segment(s) retransmitted on local",
                "7 packet(s) dropped on eth0 of local",
                "local's available memory fell to 2.0% of its total (memory pressure: reclaim or swapping may have slowed it)"
            ]
        );
    }

    #[test]
    fn a_limit_for_less_than_half_the_stage_is_not_the_limit() {
        let samples = [cpu(&[99.0, 99.0]), cpu(&[10.0, 10.0]), cpu(&[10.0, 10.0])];
        assert_eq!(judge("local", &samples, 1.0, &[], 3.0), Verdict::default());
    }
}
