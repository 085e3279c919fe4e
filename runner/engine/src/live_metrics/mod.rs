//! A run's figures while it runs, for Prometheus (`pipeline run
//! --metrics-listen ADDR`, `--metrics-push URL`): which stage is running,
//! each running stage's per-second series as they are measured, each
//! watched host's telemetry of the last second, and every finished stage's
//! figures, as in results.json. Every sample carries the suite and the run
//! id; stage samples the stage instance, host samples the host.
//!
//! The run folder stays the record: this is a view of it kept in memory,
//! bounded (the latest value per series, per host reading, per figure).

mod exposition;
mod push;
mod server;

pub use push::{PushError, push};
pub use server::{ListenError, listen};

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use pipeline_stage_api::live::LiveSink;

use crate::host_watch::HostSample;
use crate::results::StageRecord;
use exposition::{Family, Labels, add_foreign};

/// The shared view: the runner, the stages, the host samplers write it; the
/// listener reads it.
pub struct LiveMetrics {
    state: Mutex<State>,
    /// Signalled after each scrape (see [`LiveMetrics::finish`]).
    scraped: Condvar,
}

#[derive(Default)]
struct State {
    suite: String,
    run_id: String,
    /// Stage instances seen, with their plugin and whether they run now.
    stages: BTreeMap<String, StageState>,
    /// Latest point per (instance, host, series).
    series: BTreeMap<(String, String, String), SeriesPoint>,
    /// Latest reading per (host, figure, device).
    hosts: BTreeMap<(String, &'static str, String), f64>,
    /// Finished stages' figures, as in their records.
    figures: Vec<(Labels, f64)>,
    finished: bool,
    scrapes: u64,
}

struct StageState {
    plugin: String,
    running: bool,
    status: Option<String>,
}

struct SeriesPoint {
    unit: String,
    t_s: f64,
    value: f64,
}

/// At most this many finished figures are kept (a long suite's tail wins):
/// the view stays bounded whatever the stages report.
const MAX_FIGURES: usize = 50_000;
/// At most this many live series (instance × host × series).
const MAX_SERIES: usize = 10_000;

impl LiveMetrics {
    /// Empty until [`run_started`](Self::run_started): the listener is
    /// bound before the run has an id.
    pub fn new() -> LiveMetrics {
        LiveMetrics {
            state: Mutex::new(State::default()),
            scraped: Condvar::new(),
        }
    }

    pub fn run_started(&self, suite: &str, run_id: &str) {
        let mut s = self.state();
        s.suite = suite.to_string();
        s.run_id = run_id.to_string();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stage_started(&self, instance: &str, plugin: &str) {
        let mut s = self.state();
        s.stages.insert(
            instance.to_string(),
            StageState {
                plugin: plugin.to_string(),
                running: true,
                status: None,
            },
        );
    }

    /// A stage instance is done: its live series and the hosts' readings
    /// go, its figures stay.
    pub fn stage_finished(&self, record: &StageRecord) {
        let mut s = self.state();
        let status = record.status.as_str().to_string();
        let stage = s
            .stages
            .entry(record.id.clone())
            .or_insert_with(|| StageState {
                plugin: record.plugin.clone(),
                running: false,
                status: None,
            });
        stage.running = false;
        stage.status = Some(status);
        s.series
            .retain(|(instance, _, _), _| *instance != record.id);
        // Hosts are watched beside one stage at a time: its readings end with it.
        s.hosts.clear();
        // A repeated suite's later round replaces the stage's figures.
        s.figures
            .retain(|(labels, _)| labels.get("stage") != Some(&record.id));
        for m in &record.metrics {
            let mut labels = Labels::new();
            labels.insert("stage".into(), record.id.clone());
            labels.insert("metric".into(), m.name.clone());
            labels.insert("unit".into(), m.unit.clone());
            for (k, v) in &m.labels {
                add_foreign(&mut labels, k, v);
            }
            s.figures.push((labels, m.value));
        }
        let excess = s.figures.len().saturating_sub(MAX_FIGURES);
        s.figures.drain(..excess);
    }

    /// One second of a watched host (the host sampler's reading).
    pub fn host_sample(&self, host: &str, sample: &HostSample) {
        let mut s = self.state();
        let mut put = |figure: &'static str, device: &str, value: f64| {
            s.hosts
                .insert((host.to_string(), figure, device.to_string()), value);
        };
        if !sample.cpu_busy_pct.is_empty() {
            let mean = sample.cpu_busy_pct.iter().sum::<f64>() / sample.cpu_busy_pct.len() as f64;
            put("cpu_busy_percent", "", mean);
        }
        put("cpu_iowait_percent", "", sample.cpu_iowait_pct);
        put("cpu_steal_percent", "", sample.cpu_steal_pct);
        if sample.memory_total_bytes > 0 {
            put(
                "memory_available_bytes",
                "",
                sample.memory_available_bytes as f64,
            );
        }
        for (disk, d) in &sample.disks {
            put("disk_util_percent", disk, d.util_pct);
        }
        for (nic, n) in &sample.nics {
            put("nic_rx_bytes_per_second", nic, n.rx_bytes_per_s);
            put("nic_tx_bytes_per_second", nic, n.tx_bytes_per_s);
        }
    }

    /// The run is over (its state `finished`, no stage running).
    pub fn finish(&self) {
        let mut s = self.state();
        s.finished = true;
        for stage in s.stages.values_mut() {
            stage.running = false;
        }
    }

    /// Waits up to `linger` for one more scrape, so a Prometheus scraping
    /// every few seconds also gets the last stages' figures. `true`: it came.
    pub fn wait_for_scrape(&self, linger: Duration) -> bool {
        let mut s = self.state();
        let seen = s.scrapes;
        let until = Instant::now() + linger;
        while s.scrapes == seen {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .scraped
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// The text of one scrape (`openmetrics`: with `# EOF`); counted as a
    /// scrape when `count`.
    pub fn render(&self, openmetrics: bool, count: bool) -> String {
        let text = {
            let s = self.state();
            exposition::render(&s.families(), openmetrics)
        };
        if count {
            self.state().scrapes += 1;
            self.scraped.notify_all();
        }
        text
    }
}

impl State {
    fn base(&self) -> Labels {
        let mut l = Labels::new();
        l.insert("suite".into(), self.suite.clone());
        l.insert("run_id".into(), self.run_id.clone());
        l
    }

    fn families(&self) -> Vec<Family> {
        let mut run = self.base();
        run.insert(
            "state".into(),
            if self.finished { "finished" } else { "running" }.into(),
        );
        let mut running = Vec::new();
        let mut finished = Vec::new();
        for (id, st) in &self.stages {
            let mut l = self.base();
            l.insert("stage".into(), id.clone());
            l.insert("plugin".into(), st.plugin.clone());
            running.push((l.clone(), if st.running { 1.0 } else { 0.0 }));
            if let Some(status) = &st.status {
                l.insert("status".into(), status.clone());
                finished.push((l, 1.0));
            }
        }
        let mut series = Vec::new();
        let mut series_t = Vec::new();
        for ((instance, host, name), p) in &self.series {
            let mut l = self.base();
            l.insert("stage".into(), instance.clone());
            l.insert("host".into(), host.clone());
            l.insert("series".into(), name.clone());
            l.insert("unit".into(), p.unit.clone());
            series.push((l.clone(), p.value));
            series_t.push((l, p.t_s));
        }
        let mut hosts: BTreeMap<&'static str, Vec<(Labels, f64)>> = BTreeMap::new();
        for ((host, figure, device), value) in &self.hosts {
            let mut l = self.base();
            l.insert("host".into(), host.clone());
            if !device.is_empty() {
                l.insert("device".into(), device.clone());
            }
            hosts.entry(figure).or_default().push((l, *value));
        }
        let figures = self
            .figures
            .iter()
            .map(|(labels, v)| {
                let mut l = self.base();
                l.extend(labels.clone());
                (l, *v)
            })
            .collect();
        let mut families = vec![
            Family {
                name: "pipeline_run_state",
                help: "1, labelled by the run's suite, id and state (running, finished).",
                samples: vec![(run, 1.0)],
            },
            Family {
                name: "pipeline_stage_running",
                help: "1 while the stage instance runs, 0 once it ended.",
                samples: running,
            },
            Family {
                name: "pipeline_stage_finished",
                help: "1 for a stage instance that ended, labelled by its status.",
                samples: finished,
            },
            Family {
                name: "pipeline_stage_series",
                help: "A running stage's per-second series: its last finished second, in the series' unit.",
                samples: series,
            },
            Family {
                name: "pipeline_stage_series_second",
                help: "Which second of the measured phase pipeline_stage_series holds (its end, seconds).",
                samples: series_t,
            },
            Family {
                name: "pipeline_stage_metric",
                help: "A finished stage's figure, as in results.json (its unit and labels).",
                samples: figures,
            },
        ];
        for (figure, samples) in hosts {
            families.push(Family {
                name: host_family(figure),
                help: host_help(figure),
                samples,
            });
        }
        families
    }
}

fn host_family(figure: &str) -> &'static str {
    match figure {
        "cpu_busy_percent" => "pipeline_host_cpu_busy_percent",
        "cpu_iowait_percent" => "pipeline_host_cpu_iowait_percent",
        "cpu_steal_percent" => "pipeline_host_cpu_steal_percent",
        "memory_available_bytes" => "pipeline_host_memory_available_bytes",
        "disk_util_percent" => "pipeline_host_disk_util_percent",
        "nic_rx_bytes_per_second" => "pipeline_host_nic_rx_bytes_per_second",
        _ => "pipeline_host_nic_tx_bytes_per_second",
    }
}

fn host_help(figure: &str) -> &'static str {
    match figure {
        "cpu_busy_percent" => {
            "A watched host's CPU busy share over the last second, mean of its cores, %."
        }
        "cpu_iowait_percent" => {
            "A watched host's share of CPU time waiting on I/O over the last second, %."
        }
        "cpu_steal_percent" => {
            "A watched host's CPU time taken by the hypervisor over the last second, %."
        }
        "memory_available_bytes" => "A watched host's MemAvailable at the last reading, bytes.",
        "disk_util_percent" => "A watched host's disk busy time over the last second, %.",
        "nic_rx_bytes_per_second" => {
            "A watched host's interface receive rate over the last second, bytes/s."
        }
        _ => "A watched host's interface transmit rate over the last second, bytes/s.",
    }
}

impl Default for LiveMetrics {
    fn default() -> Self {
        LiveMetrics::new()
    }
}

impl LiveSink for LiveMetrics {
    fn point(&self, instance: &str, host: &str, series: &str, unit: &str, t_s: f64, value: f64) {
        let mut s = self.state();
        let key = (instance.to_string(), host.to_string(), series.to_string());
        if s.series.len() >= MAX_SERIES && !s.series.contains_key(&key) {
            return;
        }
        s.series.insert(
            key,
            SeriesPoint {
                unit: unit.to_string(),
                t_s,
                value,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: serde_json::Value) -> StageRecord {
        serde_json::from_value(json).expect("a stage record")
    }

    #[test]
    fn a_run_is_seen_running_then_its_figures_stay_after_the_stage() {
        let live = LiveMetrics::new();
        live.run_started("s3-suite", "20261205T154000Z-ab12cd-s3-suite");
        live.stage_started("put", "s3-bench");
        live.point("put", "local", "put_ops_per_s", "ops/s", 3.0, 812.0);
        let during = live.render(true, false);
        assert!(during.contains(
            "pipeline_stage_running{plugin=\"s3-bench\",run_id=\"20261205T154000Z-ab12cd-s3-suite\",stage=\"put\",suite=\"s3-suite\"} 1\n"
        ), "{during}");
        assert!(during.contains(
            "pipeline_stage_series{host=\"local\",run_id=\"20261205T154000Z-ab12cd-s3-suite\",series=\"put_ops_per_s\",stage=\"put\",suite=\"s3-suite\",unit=\"ops/s\"} 812\n"
        ), "{during}");
        // A hostile plugin's metric: its label names cannot take ours, nor
        // its text break the exposition.
        live.stage_finished(&record(serde_json::json!({
            "id": "put", "stage": "put", "plugin": "s3-bench", "status": "succeeded",
            "params": {},
            "metrics": [{"name": "ops\"}\n# EOF", "value": 10.5, "unit": "ops", "direction": "higher",
                         "aggregate": "sum", "labels": {"stage": "forged", "op": "put", "a b": "x\u{1b}[2J"}}]
        })));
        let after = live.render(true, false);
        assert!(!after.contains("pipeline_stage_series{"), "{after}");
        assert!(after.contains(
            "pipeline_stage_metric{a_b=\"x[2J\",label_stage=\"forged\",metric=\"ops\\\"}\\n# EOF\",op=\"put\",run_id=\"20261205T154000Z-ab12cd-s3-suite\",stage=\"put\",suite=\"s3-suite\",unit=\"ops\"} 10.5\n"
        ), "{after}");
        assert!(after.contains(
            "pipeline_stage_running{plugin=\"s3-bench\",run_id=\"20261205T154000Z-ab12cd-s3-suite\",stage=\"put\",suite=\"s3-suite\"} 0\n"
        ), "{after}");
        assert!(after.contains(
            "pipeline_stage_finished{plugin=\"s3-bench\",run_id=\"20261205T154000Z-ab12cd-s3-suite\",stage=\"put\",status=\"succeeded\",suite=\"s3-suite\"} 1\n"
        ), "{after}");
        assert_eq!(
            after.matches("# EOF").count(),
            1 + 1,
            "the escaped one and the real one: {after}"
        );
        assert!(after.ends_with("\n# EOF\n"));
    }

    #[test]
    fn the_end_waits_for_a_scrape_and_no_longer() {
        let live = std::sync::Arc::new(LiveMetrics::new());
        let scraper = {
            let live = std::sync::Arc::clone(&live);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                live.render(true, true);
            })
        };
        assert!(live.wait_for_scrape(Duration::from_secs(60)));
        scraper.join().unwrap();
        let started = Instant::now();
        assert!(!live.wait_for_scrape(Duration::from_millis(50)));
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
