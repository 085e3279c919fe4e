//! Who took a host's CPU: the Ceph daemons and the benchmark clients, each
//! by name, from `/proc/PID/stat` (and, for a client, each of its threads'
//! `/proc/PID/task/TID/stat`). The machine-wide shares of `/proc/stat` say
//! that every core was busy; these say whether radosgw, the OSDs or the
//! client took them, and catch a client held to one thread even when the
//! scheduler moves that thread between cores (no one core is then full).
//!
//! Only processes of [`WATCHED`] are kept. The text both sides read (this
//! machine in Rust, an inventory host with the shell loop of
//! [`REMOTE_SCRIPT`]) is one line per process, `p STAT`, and one per thread
//! of a client, `t PID STAT`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounded_series::{Merge, mean, mean_of_events, merge_maps};

/// Clock ticks a second in `/proc/PID/stat` (USER_HZ: 100 on every Linux
/// architecture's user ABI, whatever the kernel's own HZ).
const TICKS_PER_S: f64 = 100.0;

/// The processes watched, by the name the kernel keeps (`comm`, at most 15
/// characters), each with whether it is a benchmark client (its threads are
/// read too) and the name it is reported under.
const WATCHED: [(&str, bool, &str); 11] = [
    ("radosgw", false, "radosgw"),
    ("ceph-osd", false, "ceph-osd"),
    ("ceph-mon", false, "ceph-mon"),
    ("ceph-mgr", false, "ceph-mgr"),
    ("ceph-mds", false, "ceph-mds"),
    ("fio", true, "fio"),
    ("rados", true, "rados"),
    ("rbd", true, "rbd"),
    ("dd", true, "dd"),
    ("iperf3", true, "iperf3"),
    // The runner and its workers (`pipeline-<sha256>` on a remote host, cut to 15).
    ("pipeline", true, "pipeline"),
];

/// A thread in a process of more than this many is not read: a client
/// tool has a few dozen, a daemon hundreds.
const MAX_THREADS_READ: usize = 256;

/// The shell loop an inventory host runs each second: builtins only (no
/// process per PID), a thread's file only for a client.
pub const REMOTE_SCRIPT: &str = "for d in /proc/[0-9]*; do \
read -r l < \"$d/stat\" 2>/dev/null || continue; \
case \"$l\" in \
*' (radosgw) '*|*' (ceph-osd) '*|*' (ceph-mon) '*|*' (ceph-mgr) '*|*' (ceph-mds) '*) echo \"p $l\";; \
*' (fio) '*|*' (rados) '*|*' (rbd) '*|*' (dd) '*|*' (iperf3) '*|*' (pipeline'*) echo \"p $l\"; \
n=0; for t in \"$d\"/task/*/stat; do n=$((n+1)); [ $n -gt 256 ] && break; \
read -r tl < \"$t\" 2>/dev/null && echo \"t ${d#/proc/} $tl\"; done;; \
esac; done";

/// One process at one reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcTimes {
    /// The name it is reported under ([`WATCHED`]).
    pub name: &'static str,
    /// User + system clock ticks.
    pub ticks: u64,
    pub threads: u64,
    /// Each thread's ticks (clients only).
    pub thread_ticks: BTreeMap<u32, u64>,
}

/// The watched processes' CPU over one second, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessSample {
    /// Their CPU time together, in % of one core (200 = two cores' worth).
    pub cpu_pct: f64,
    /// How many ran.
    pub count: u64,
    /// A client's busiest thread, in % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_thread_pct: Option<f64>,
}

/// The watched processes over a span (every [`super::PROCESS_EVERY`]
/// seconds: reading every PID costs more than the rest of a second's files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessPoint {
    /// Seconds since the stage began, at the end of the span.
    pub t_s: f64,
    pub span_s: f64,
    /// By name (`radosgw`, `ceph-osd`, `fio`, ...).
    pub by_name: BTreeMap<String, ProcessSample>,
}

impl Merge for ProcessSample {
    /// CPU shares: time-weighted means; how many ran: the most.
    fn merge(&mut self, l: &Self, a: f64, b: f64) {
        self.cpu_pct = mean(self.cpu_pct, a, l.cpu_pct, b);
        self.busiest_thread_pct =
            mean_of_events(self.busiest_thread_pct, a, l.busiest_thread_pct, b);
        self.count = self.count.max(l.count);
    }
}

impl Merge for ProcessPoint {
    fn merge(&mut self, later: &Self, _: f64, _: f64) {
        // Weighted by each point's own span (a point is one reading's span, not a second).
        let (a, b) = (self.span_s, later.span_s);
        merge_maps(&mut self.by_name, &later.by_name, a, b);
        self.t_s = later.t_s;
        self.span_s = a + b;
    }
}

/// The name a `comm` is reported under, and whether it is a client.
fn watched(comm: &str) -> Option<(&'static str, bool)> {
    WATCHED.iter().find_map(|(c, client, name)| {
        let hit = if *name == "pipeline" {
            comm == "pipeline" || comm.starts_with("pipeline-")
        } else {
            comm == *c
        };
        hit.then_some((*name, *client))
    })
}

/// PID, comm and the fields after it, of one `stat` line. The comm is
/// between the first `(` and the last `)`: it may hold spaces and parentheses.
fn split_stat(line: &str) -> Option<(u32, &str, Vec<&str>)> {
    let open = line.find(" (")?;
    let close = line.rfind(") ")?;
    if close < open {
        return None;
    }
    let pid = line[..open].trim().parse().ok()?;
    let comm = &line[open + 2..close];
    Some((
        pid,
        comm,
        line[close + 2..].split_ascii_whitespace().collect(),
    ))
}

/// utime + stime (fields 14 and 15 of proc(5), the 12th and 13th after the
/// comm) and num_threads (field 20).
fn times(rest: &[&str]) -> Option<(u64, u64)> {
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    let threads: u64 = rest.get(17)?.parse().ok()?;
    Some((utime.checked_add(stime)?, threads))
}

/// The `p`/`t` lines (see the module documentation), watched processes only.
pub fn parse(text: &str) -> BTreeMap<u32, ProcTimes> {
    let mut procs: BTreeMap<u32, ProcTimes> = BTreeMap::new();
    for line in text.lines() {
        if let Some(stat) = line.strip_prefix("p ") {
            let Some((pid, comm, rest)) = split_stat(stat) else {
                continue;
            };
            let (Some((name, _)), Some((ticks, threads))) = (watched(comm), times(&rest)) else {
                continue;
            };
            procs.insert(
                pid,
                ProcTimes {
                    name,
                    ticks,
                    threads,
                    thread_ticks: BTreeMap::new(),
                },
            );
        } else if let Some(rest) = line.strip_prefix("t ") {
            let Some((pid, stat)) = rest.split_once(' ') else {
                continue;
            };
            let (Ok(pid), Some((tid, _, fields))) = (pid.parse::<u32>(), split_stat(stat)) else {
                continue;
            };
            let Some(p) = procs.get_mut(&pid) else {
                continue;
            };
            if let Some((ticks, _)) = times(&fields)
                && p.thread_ticks.len() < MAX_THREADS_READ
            {
                p.thread_ticks.insert(tid, ticks);
            }
        }
    }
    procs
}

/// This machine's watched processes, in the text [`parse`] reads.
pub fn read_local() -> String {
    let mut out = String::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let stat = stat.trim_end();
        let Some((_, comm, _)) = split_stat(stat) else {
            continue;
        };
        let Some((_, client)) = watched(comm) else {
            continue;
        };
        out.push_str("p ");
        out.push_str(stat);
        out.push('\n');
        if !client {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(entry.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten().take(MAX_THREADS_READ) {
            if let Ok(t) = std::fs::read_to_string(task.path().join("stat")) {
                out.push_str(&format!("t {pid} {}\n", t.trim_end()));
            }
        }
    }
    out
}

/// Each name's CPU between two readings `seconds` apart; a process in
/// only one of them (started or ended in the second) is left out.
pub fn between(
    before: &BTreeMap<u32, ProcTimes>,
    after: &BTreeMap<u32, ProcTimes>,
    seconds: f64,
) -> BTreeMap<String, ProcessSample> {
    let pct = |ticks: u64| (1000.0 * ticks as f64 / TICKS_PER_S / seconds).round() / 10.0;
    let mut out: BTreeMap<String, ProcessSample> = BTreeMap::new();
    for (pid, a) in after {
        let Some(b) = before.get(pid).filter(|b| b.name == a.name) else {
            continue;
        };
        let e = out.entry(a.name.to_string()).or_default();
        e.count += 1;
        e.cpu_pct = ((e.cpu_pct + pct(a.ticks.saturating_sub(b.ticks))) * 10.0).round() / 10.0;
        let busiest = a
            .thread_ticks
            .iter()
            .filter_map(|(tid, t)| Some(t.saturating_sub(*b.thread_ticks.get(tid)?)))
            .max();
        if let Some(ticks) = busiest {
            let p = pct(ticks);
            e.busiest_thread_pct = Some(e.busiest_thread_pct.map_or(p, |q: f64| q.max(p)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> String {
        let path = format!("{}/../../tests/procfs/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn comm_names_with_spaces_and_parentheses_split_at_the_last_one() {
        let (pid, comm, rest) = split_stat("42 (a) b) (x) S 1 2").unwrap();
        assert_eq!((pid, comm, rest), (42, "a) b) (x", vec!["S", "1", "2"]));
        assert!(split_stat("garbage").is_none());
        assert!(split_stat("12 ) x (").is_none());
        assert_eq!(watched("pipeline-77f841"), Some(("pipeline", true)));
        assert_eq!(watched("ceph-osd"), Some(("ceph-osd", false)));
        assert_eq!(watched("bash"), None);
    }

    /// Two readings a second apart on the sandbox (Debian 12, Ceph 16.2)
    /// while fio read at 200 IOPS through librbd and a `dd if=/dev/zero
    /// of=/dev/null` ran: dd held one core on one thread.
    #[test]
    fn a_second_of_the_sandbox_with_a_busy_dd() {
        let before = parse(&capture("debian12-sandbox-dd-busy-0.procs"));
        let after = parse(&capture("debian12-sandbox-dd-busy-1.procs"));
        assert_eq!(after.len(), 9, "{after:?}");
        assert_eq!(after[&32127].name, "fio");
        assert_eq!(after[&32127].threads, 18);
        assert_eq!(after[&32127].thread_ticks.len(), 18);
        assert!(
            after[&29119].thread_ticks.is_empty(),
            "a daemon's threads are not read"
        );
        let by_name = between(&before, &after, 1.0);
        let names: Vec<&str> = by_name.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "ceph-mgr", "ceph-mon", "ceph-osd", "dd", "fio", "pipeline", "radosgw"
            ]
        );
        let dd = &by_name["dd"];
        assert_eq!(
            (dd.cpu_pct, dd.count, dd.busiest_thread_pct),
            (100.0, 1, Some(100.0))
        );
        let osd = &by_name["ceph-osd"];
        assert_eq!(
            (osd.cpu_pct, osd.count, osd.busiest_thread_pct),
            (6.0, 3, None)
        );
        assert_eq!(by_name["fio"].cpu_pct, 6.0);
        assert!(by_name["fio"].busiest_thread_pct.unwrap() <= 6.0);
        // Half the time between the readings: twice the share.
        assert_eq!(between(&before, &after, 0.5)["dd"].cpu_pct, 200.0);
    }

    #[test]
    fn this_machine_reads_itself() {
        let text = read_local();
        for line in text.lines() {
            assert!(line.starts_with("p ") || line.starts_with("t "), "{line}");
        }
        // Whatever runs here, what is read parses, and nothing unwatched is kept.
        for p in parse(&text).values() {
            assert!(WATCHED.iter().any(|(_, _, n)| *n == p.name));
        }
    }

    #[test]
    fn garbage_is_skipped_not_a_panic() {
        let text = "p 1 (fio) S\nt x y\nt 1 2 (fio) S\np 99999999999 (fio) R 1\n\u{1b}[2J\np \n";
        assert!(parse(text).is_empty());
    }
}
