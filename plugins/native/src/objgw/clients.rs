//! `s3-bench` and `swift-bench` from many client hosts at once: their
//! load runs in a [remote worker](pipeline_stage_api::remote_worker) on
//! each host of the stage's `on:` (the kind [`super::worker::LoadWorker`]),
//! and this is what the runner adds for S3 and Swift: what `plan` says,
//! which ledger entries a worker may claim (its own buckets, or its key
//! prefix in the suite's bucket), and how the hosts' figures merge:
//!
//! - latency percentiles of `host=all` from the hosts' merged HDR
//!   histograms (never an average of percentiles);
//! - `ops_per_s` and `bandwidth` of `host=all` summed over the window in
//!   which every host was in its measured phase and still issuing requests
//!   (each host's warm-up and ramp-down left out), from each host's
//!   completions per 100 ms;
//! - counts (`ops`, `bytes`, `errors`) summed over the whole measured phase.
//!
//! With `lost_hosts: exclude`, a lost host's figures are left out of
//! `host=all`, and the report says so.

use std::time::Duration;

use pipeline_model::combine::{Parts, combine};
use pipeline_model::{Aggregate, Direction, Metric, unit};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::remote_worker::{self, End, Ran, Rules, shown};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::start_report::add_start_report;
use serde::Serialize;

use super::load::{LoadConfig, Window};
use super::{S3_BUCKET, S3_OBJECTS, bucket_name, key_prefix};

/// The common window is summed from completions per this much time.
const BIN: Duration = Duration::from_millis(100);

/// Whether the stage runs its load in this process (no `on:`, or `on: local`).
pub fn runs_here(ctx: &StageContext) -> bool {
    remote_worker::runs_here(&ctx.targets)
}

/// What `pipeline plan` shows: on client hosts, where each worker runs and
/// from which binary, before the load's own actions.
pub fn plan(ctx: &PlanContext, load: Vec<Action>) -> Vec<Action> {
    if remote_worker::runs_here(ctx.targets) {
        return load;
    }
    let mut actions = remote_worker::plan_notes(ctx.targets, "prefilled");
    actions.extend(load.into_iter().map(|mut a| {
        // Each host's buckets carry its name: hosts never share keys.
        a.summary = format!(
            "each host: {}",
            a.summary.replace(
                "named after the run id",
                "named after the run id and the host"
            )
        );
        a
    }));
    actions.push(Action::note(
        "host=all: latency percentiles of the merged histograms; ops/s and MiB/s summed over the window all hosts measured in",
    ));
    actions
}

/// Runs the load on every host of the stage's `on:` and merges it.
/// `config` is the stage's config with its endpoint and keys resolved.
pub fn run<C: Serialize>(
    stage: &str,
    config: &C,
    load: &LoadConfig,
    ctx: &mut StageContext,
) -> Result<StageOutput, StageError> {
    let (run_id, instance) = (ctx.run_id.clone(), ctx.instance_id.clone());
    let owns = |host: &pipeline_stage_api::hosts::Host, kind: &str, name: &str| {
        owned(&run_id, &instance, load, &host.name, kind, name)
    };
    let rules = Rules {
        silence: load.worker_silence.0,
        lost_hosts: load.lost_hosts,
        grace: load.request_timeout.0 + Duration::from_secs(30),
        preparing: "prefill",
        owns: &owns,
        declared: &super::load::metrics(),
    };
    let ran: Ran<Window> = remote_worker::session::run(stage, config, &rules, ctx)?;
    merge(&ran)
}

/// Whether a ledger entry a worker reports is one its job lets it make: its
/// own buckets, or its key prefix in the suite's pre-existing bucket. A
/// worker must not put another run's pool or bucket in this run's ledger,
/// where cleanup would remove it.
fn owned(
    run_id: &str,
    instance: &str,
    load: &LoadConfig,
    host: &str,
    kind: &str,
    name: &str,
) -> bool {
    let load_name = format!("{instance}@{host}");
    match kind {
        S3_BUCKET => {
            load.bucket.is_none()
                && (0..load.buckets).any(|i| bucket_name(run_id, &load_name, i) == name)
        }
        S3_OBJECTS => load
            .bucket
            .as_ref()
            .is_some_and(|b| name == format!("{b}/{}", key_prefix(run_id, &load_name))),
        _ => false,
    }
}

/// One host's measured phase at full load, in this machine's clock, and
/// what it completed per [`BIN`].
pub struct HostWindow<'a> {
    pub start_ns: i128,
    pub end_ns: i128,
    pub tenths: &'a std::collections::BTreeMap<String, Vec<[u64; 2]>>,
}

/// The window all hosts measured in, and per operation the sum of the
/// hosts' rates over it: `(ops/s, bytes/s)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonWindow {
    pub start_ns: i128,
    pub end_ns: i128,
    pub rates: std::collections::BTreeMap<String, (f64, f64)>,
}

impl CommonWindow {
    pub fn seconds(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }
}

/// The common window of `hosts`: from the latest start to the earliest end
/// of issuing. Each host's rate is what it completed in its bins that lie
/// wholly inside the window, per second of those bins; the rates are
/// summed. `None` when the window holds no whole bin of some host.
pub fn common_window(hosts: &[HostWindow]) -> Option<CommonWindow> {
    let start = hosts.iter().map(|h| h.start_ns).max()?;
    let end = hosts.iter().map(|h| h.end_ns).min()?;
    let bin = BIN.as_nanos() as i128;
    let mut rates: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for h in hosts {
        // Bins k with h.start + k*bin >= start and h.start + (k+1)*bin <= end.
        let first = (start - h.start_ns + bin - 1).div_euclid(bin).max(0);
        let last = (end - h.start_ns).div_euclid(bin); // exclusive
        if last <= first {
            return None;
        }
        let seconds = ((last - first) * bin) as f64 / 1e9;
        for (op, bins) in h.tenths {
            let (ops, bytes) = (first as usize..last as usize)
                .filter_map(|k| bins.get(k))
                .fold((0u64, 0u64), |(o, b), x| (o + x[0], b + x[1]));
            let r = rates.entry(op.clone()).or_default();
            r.0 += ops as f64 / seconds;
            r.1 += bytes as f64 / seconds;
        }
    }
    Some(CommonWindow {
        start_ns: start,
        end_ns: end,
        rates,
    })
}

/// The stage's output: each host's figures labelled `host=NAME`, and
/// A client host that was lost: its figures are not in `host=all`. A
/// headline, so that the summary says the figures lack a host.
pub const HOST_LOST: MetricDecl = MetricDecl::declare(
    "host_lost",
    unit::COUNT,
    Direction::Lower,
    Aggregate::Sum,
    "1 for each client host lost during the run (label `host`); its figures are not in host=all.",
)
.headline();
pub const CLIENT_CORES_BUSY: MetricDecl = MetricDecl::declare(
    "client_cores_busy",
    "cores",
    Direction::None,
    Aggregate::Sum,
    "Cores the load kept busy on a client host in the measured phase (label `host`).",
);
pub const CLIENT_CORES: MetricDecl = MetricDecl::declare(
    "client_cores",
    "cores",
    Direction::None,
    Aggregate::Sum,
    "Cores the load may use on a client host (label `host`).",
);
pub const WORKER_MAX_RSS: MetricDecl = MetricDecl::info(
    "worker_max_rss",
    "MiB",
    "Peak resident memory of the load's worker on a client host (label `host`).",
);
pub const COMMON_WINDOW_SECONDS: MetricDecl = MetricDecl::info(
    "common_window_seconds",
    unit::SECONDS,
    "The time in which every client host was measuring: host=all rates are over it.",
);

/// The metrics of a run on client hosts, besides the load's own: lost
/// hosts, each host's cores and memory, the common window, the start report.
pub fn metrics() -> Vec<MetricDecl> {
    let mut all = vec![
        HOST_LOST,
        CLIENT_CORES_BUSY,
        CLIENT_CORES,
        WORKER_MAX_RSS,
        COMMON_WINDOW_SECONDS,
    ];
    all.extend(pipeline_stage_api::start_report::metrics());
    all
}

/// `host=all` by each metric's rule, rates over the common window.
fn merge(ran: &Ran<Window>) -> Result<StageOutput, StageError> {
    let mut out = StageOutput::default();
    let mut windows = Vec::new();
    let mut measured = 0;
    for w in &ran.hosts {
        let name = &w.host.name;
        let Some(End::Done(done)) = &w.end else {
            out.notes.push(format!(
                "host {name} was lost{}: its figures are NOT in host=all",
                match &w.end {
                    Some(End::Lost(why)) | Some(End::Failed(why)) => format!(" ({why})"),
                    _ => String::new(),
                }
            ));
            // A headline: the summary says the figures lack a host.
            out.metrics
                .push(HOST_LOST.value(1.0).label("host", name.clone()));
            continue;
        };
        let (output, window, max_rss_kib) = (&done.output, &done.window, &done.max_rss_kib);
        measured += 1;
        let part = StageOutput {
            metrics: output.metrics.clone(),
            histograms: output.histograms.clone(),
            series: output.series.clone(),
            notes: output.notes.iter().map(|n| shown(n)).collect(),
            ..Default::default()
        }
        .for_host(name);
        out.merge_from(part);
        let offset = w.offset.map_or(0, |o| o.offset_ns) as i128;
        windows.push((name.clone(), window, offset));
        let host_metric =
            |decl: &MetricDecl, value: f64| decl.value(value).label("host", name.clone());
        let measure_s = (window.issuing_end_unix_ns - window.measure_start_unix_ns) as f64 / 1e9;
        if measure_s > 0.0 {
            out.metrics.push(host_metric(
                &CLIENT_CORES_BUSY,
                window.cpu_seconds / measure_s,
            ));
        }
        out.metrics.push(host_metric(&CLIENT_CORES, window.cores));
        out.metrics
            .push(host_metric(&WORKER_MAX_RSS, *max_rss_kib as f64 / 1024.0));
    }
    // Each host's clock (this machine's own for a local worker) and the
    // start it reported, in this machine's clock.
    add_start_report(&mut out, &ran.start_report());
    if measured >= 2 {
        add_host_all(&mut out, measured, &windows);
    }
    Ok(out)
}

/// `host=all` figures: every rule but the rates, which are summed over
/// the common window.
fn add_host_all(out: &mut StageOutput, hosts: usize, windows: &[(String, &Window, i128)]) {
    let parts = Parts {
        over: "host",
        concurrent: true,
        at_least: 2,
    };
    let mut all = combine(&out.metrics, &out.histograms, parts);
    let host_windows: Vec<HostWindow> = windows
        .iter()
        .map(|(_, w, offset)| HostWindow {
            start_ns: i128::from(w.measure_start_unix_ns) - offset,
            end_ns: i128::from(w.issuing_end_unix_ns) - offset,
            tenths: &w.tenths,
        })
        .collect();
    let common = common_window(&host_windows);
    let is_rate = |m: &Metric| {
        (m.name == "ops_per_s" || m.name == "bandwidth")
            && m.labels.get("phase").map(String::as_str) == Some("measure")
    };
    all.metrics.retain_mut(|m| {
        if !is_rate(m) {
            return true;
        }
        let Some(c) = &common else { return false };
        let op = m.labels.get("op").cloned().unwrap_or_default();
        let Some((ops, bytes)) = c.rates.get(&op) else {
            return false;
        };
        m.value = if m.name == "ops_per_s" {
            *ops
        } else {
            bytes / super::recorder::MIB
        };
        if let Some(combined) = m.combined.as_mut() {
            combined.window_s = Some(c.seconds());
        }
        true
    });
    match &common {
        Some(c) => {
            out.notes.push(format!(
                "host=all ops_per_s and bandwidth: each host's rate over the {:.2} s in which all {hosts} hosts were measuring (warm-up and ramp-down of each excluded), summed; counts are over each host's whole measured phase",
                c.seconds()
            ));
            all.metrics
                .push(COMMON_WINDOW_SECONDS.value(c.seconds()).label("host", "all"));
        }
        None => out.notes.push(format!(
            "no host=all ops_per_s or bandwidth: the {hosts} hosts' measured phases overlapped by less than {} ms",
            BIN.as_millis()
        )),
    }
    out.absorb_host_all(all);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn tenths(per_bin: &[u64]) -> BTreeMap<String, Vec<[u64; 2]>> {
        let mut m = BTreeMap::new();
        m.insert(
            "put".to_string(),
            per_bin.iter().map(|&o| [o, o * 10]).collect(),
        );
        m
    }

    #[test]
    fn rates_are_summed_over_the_window_all_hosts_measured_in() {
        // Host a: 1 s from t=0, 10 ops per 100 ms. Host b: started 250 ms
        // later, ran to t=1.5 s, 20 ops per 100 ms after a slow first bin
        // of 2 (its ramp-up, inside the window).
        let a = tenths(&[10; 10]);
        let mut b_bins = vec![20u64; 12];
        b_bins[0] = 2;
        let b = tenths(&b_bins);
        let ms = 1_000_000i128;
        let hosts = [
            HostWindow {
                start_ns: 0,
                end_ns: 1000 * ms,
                tenths: &a,
            },
            HostWindow {
                start_ns: 250 * ms,
                end_ns: 1500 * ms,
                tenths: &b,
            },
        ];
        let c = common_window(&hosts).unwrap();
        assert_eq!((c.start_ns, c.end_ns), (250 * ms, 1000 * ms));
        assert!((c.seconds() - 0.75).abs() < 1e-9);
        // a: bins 3..10 (300..1000 ms: 70 ops in 0.7 s = 100/s); b: bins
        // 0..7 (250..950 ms; the next would end past 1000 ms): 2 + 6*20 =
        // 122 ops in 0.7 s.
        let (ops, bytes) = c.rates["put"];
        let expected = 100.0 + 122.0 / 0.7;
        assert!((ops - expected).abs() < 1e-9, "{ops} vs {expected}");
        assert!((bytes - expected * 10.0).abs() < 1e-6);
        // No overlap of a whole bin: no common window.
        let late = [
            HostWindow {
                start_ns: 0,
                end_ns: 100 * ms,
                tenths: &a,
            },
            HostWindow {
                start_ns: 50 * ms,
                end_ns: 900 * ms,
                tenths: &b,
            },
        ];
        assert!(common_window(&late).is_none());
    }

    #[test]
    fn a_worker_may_only_claim_its_own_buckets() {
        let load: LoadConfig = serde_json::from_value(serde_json::json!({"buckets": 2})).unwrap();
        let mine = bucket_name("run", "s3@node1", 1);
        assert!(mine.starts_with("pl-run-s3-node1"), "{mine}");
        assert!(owned("run", "s3", &load, "node1", S3_BUCKET, &mine));
        // Another host's, another run's, one past its count, another kind.
        assert!(!owned("run", "s3", &load, "node2", S3_BUCKET, &mine));
        assert!(!owned("other", "s3", &load, "node1", S3_BUCKET, &mine));
        assert!(!owned(
            "run",
            "s3",
            &load,
            "node1",
            S3_BUCKET,
            &bucket_name("run", "s3@node1", 2)
        ));
        assert!(!owned("run", "s3", &load, "node1", "pool", "rbd"));
        // In the suite's own bucket: only its key prefix.
        let shared: LoadConfig =
            serde_json::from_value(serde_json::json!({"bucket": "b"})).unwrap();
        let prefix = format!("b/{}", key_prefix("run", "s3@node1"));
        assert!(owned("run", "s3", &shared, "node1", S3_OBJECTS, &prefix));
        assert!(!owned("run", "s3", &shared, "node1", S3_OBJECTS, "b/"));
        assert!(!owned("run", "s3", &shared, "node1", S3_BUCKET, "b"));
    }
}
