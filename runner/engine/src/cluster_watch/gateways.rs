//! What each radosgw did beside a stage, from its admin socket (`perf
//! dump`, read by the sampler on this machine, and on each watched inventory
//! host by the same script over SSH: [`crate::host_watch::remote`]; parsed
//! by [`pipeline_parsers::rgw_perf`]):
//! per second its requests, failed requests, PUTs and GETs and their bytes
//! (two readings differenced), and two gauges at the reading: the requests
//! in flight (`qactive`) and `qlen`. With the beast frontend (every release
//! here) both count a request from its start to its end (rgw_asio_client.cc
//! increments them together), so they are equal; with the thread-pool
//! frontends (civetweb, fastcgi) `qlen` counts the requests waiting for a
//! thread, and more of them than are active means the gateway's threads,
//! not the cluster, were the limit of an S3 or Swift figure.

use std::collections::BTreeMap;

use pipeline_parsers::rgw_perf::Counters;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClusterSample, ClusterWatch, is_zero, is_zero_f64};
use crate::bounded_series::{Merge, mean};

/// One gateway over one second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GatewaySample {
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub requests_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub failed_requests_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub puts_per_s: f64,
    /// HEADs included (the gateway counts them as GETs).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub gets_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub put_bytes_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub get_bytes_per_s: f64,
    /// `qlen` at the reading (see the module documentation).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: u64,
    /// Requests in flight at the reading (`qactive`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active: u64,
}

impl Merge for GatewaySample {
    /// Rates: time-weighted means; the queue and requests in flight: their highest.
    fn merge(&mut self, later: &Self, a: f64, b: f64) {
        self.requests_per_s = mean(self.requests_per_s, a, later.requests_per_s, b);
        self.failed_requests_per_s = mean(
            self.failed_requests_per_s,
            a,
            later.failed_requests_per_s,
            b,
        );
        self.puts_per_s = mean(self.puts_per_s, a, later.puts_per_s, b);
        self.gets_per_s = mean(self.gets_per_s, a, later.gets_per_s, b);
        self.put_bytes_per_s = mean(self.put_bytes_per_s, a, later.put_bytes_per_s, b);
        self.get_bytes_per_s = mean(self.get_bytes_per_s, a, later.get_bytes_per_s, b);
        self.queued = self.queued.max(later.queued);
        self.active = self.active.max(later.active);
    }
}

/// One gateway over the whole stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GatewayActivity {
    /// The daemon's name (`client.rgw.NAME`, from its socket's file name).
    pub name: String,
    /// The inventory host whose admin socket it was read from, over SSH
    /// (its per-second series is that host's `samples[].gateways`);
    /// absent: this machine's, read by the cluster sampler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_requests: u64,
    pub max_queued: u64,
    pub max_active: u64,
}

/// Each gateway's previous reading.
#[derive(Default)]
pub struct Deltas {
    previous: BTreeMap<String, (f64, Counters)>,
}

impl Deltas {
    /// The second that ended at `t_s` for each gateway read then; a first
    /// reading (or one whose counters went back: restarted) sets a baseline.
    pub fn sample(
        &mut self,
        t_s: f64,
        readings: BTreeMap<String, Counters>,
    ) -> BTreeMap<String, GatewaySample> {
        let mut out = BTreeMap::new();
        let names: Vec<String> = readings.keys().cloned().collect();
        for (name, now) in readings {
            let Some((t0, before)) = self.previous.insert(name.clone(), (t_s, now.clone())) else {
                continue;
            };
            let seconds = t_s - t0;
            let pairs = [
                (now.requests, before.requests),
                (now.failed_requests, before.failed_requests),
                (now.put_ops, before.put_ops),
                (now.get_ops, before.get_ops),
                (now.put_bytes, before.put_bytes),
                (now.get_bytes, before.get_bytes),
            ];
            if seconds <= 0.0 || pairs.iter().any(|(a, b)| a < b) {
                continue;
            }
            let rate = |(a, b): (u64, u64)| ((a - b) as f64 / seconds * 1000.0).round() / 1000.0;
            out.insert(
                name,
                GatewaySample {
                    requests_per_s: rate(pairs[0]),
                    failed_requests_per_s: rate(pairs[1]),
                    puts_per_s: rate(pairs[2]),
                    gets_per_s: rate(pairs[3]),
                    put_bytes_per_s: rate(pairs[4]),
                    get_bytes_per_s: rate(pairs[5]),
                    queued: now.queue_length.unwrap_or(0),
                    active: now.active_requests.unwrap_or(0),
                },
            );
        }
        self.previous.retain(|name, _| names.contains(name));
        out
    }
}

/// Each gateway's totals and peaks over the samples.
pub fn activity(samples: &[ClusterSample], interval_s: f64) -> Vec<GatewayActivity> {
    activity_of(samples.iter().map(|s| (s.t_s, &s.gateways)), interval_s)
}

/// Each gateway's totals and peaks over a series of (seconds since the
/// stage began, that point's gateways), in time order.
pub fn activity_of<'a>(
    series: impl Iterator<Item = (f64, &'a BTreeMap<String, GatewaySample>)>,
    interval_s: f64,
) -> Vec<GatewayActivity> {
    let mut by_name: BTreeMap<&str, (f64, f64, u64, u64)> = BTreeMap::new();
    let mut previous_t = 0.0;
    for (t_s, gateways) in series {
        let seconds = (t_s - previous_t).clamp(0.0, super::osds::max_gap_s(interval_s));
        previous_t = t_s;
        for (name, g) in gateways {
            let e = by_name.entry(name).or_default();
            e.0 += g.requests_per_s * seconds;
            e.1 += g.failed_requests_per_s * seconds;
            e.2 = e.2.max(g.queued);
            e.3 = e.3.max(g.active);
        }
    }
    by_name
        .into_iter()
        .map(
            |(name, (requests, failed, queued, active))| GatewayActivity {
                name: name.to_string(),
                host: None,
                requests: requests.round() as u64,
                failed_requests: failed.round() as u64,
                max_queued: queued,
                max_active: active,
            },
        )
        .collect()
}

/// Worth saying beside the figures: requests that waited for a frontend
/// thread (a `qlen` above `qactive`: the gateway's threads were the limit),
/// and failed requests.
pub fn notes(activity: &[GatewayActivity]) -> Vec<String> {
    let mut notes = Vec::new();
    for g in activity {
        let name = match &g.host {
            Some(host) => format!("{} on {host}", g.name),
            None => g.name.clone(),
        };
        if g.max_queued > g.max_active {
            notes.push(format!(
                "{name}: up to {} request(s) queued for at most {} being served: the gateway's threads were busy",
                g.max_queued, g.max_active
            ));
        }
        if g.failed_requests > 0 {
            notes.push(format!(
                "{name}: {} of {} requests failed",
                g.failed_requests, g.requests
            ));
        }
    }
    notes
}

/// The gateways read on inventory hosts take the place of this machine's
/// readings of the same daemons (a lab's hosts are namespaces of this
/// machine and share its sockets; the host's reading says where the daemon
/// runs): their activity and notes join the cluster watch's, and the local
/// series and notes of those names leave it.
pub fn take_over_remote(watch: &mut ClusterWatch, remote: &[GatewayActivity]) {
    if remote.is_empty() {
        return;
    }
    let replaced: Vec<&str> = remote.iter().map(|g| g.name.as_str()).collect();
    let (gone, kept): (Vec<GatewayActivity>, Vec<GatewayActivity>) =
        std::mem::take(&mut watch.gateways)
            .into_iter()
            .partition(|g| replaced.contains(&g.name.as_str()));
    let gone_notes = notes(&gone);
    watch.observations.retain(|o| !gone_notes.contains(o));
    watch.gateways = kept;
    for sample in &mut watch.samples {
        sample
            .gateways
            .retain(|name, _| !replaced.contains(&name.as_str()));
    }
    watch.gateways.extend(remote.iter().cloned());
    watch.observations.extend(notes(remote));
}

/// A daemon name as a socket's file gives it: short and printable, or
/// left out (it reaches the report and the terminal).
pub fn plausible_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_parsers::rgw_perf;

    fn fixture(name: &str) -> Counters {
        let path = format!(
            "{}/../../plugins/parsers/tests/data/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        rgw_perf::counters(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn two_dumps_give_the_gateways_second_and_a_queue_is_noted() {
        let mut d = Deltas::default();
        let one = |c: Counters| BTreeMap::from([("client.rgw.sandbox".to_string(), c)]);
        // Captured on 16.2.15: a bucket created, then 5 PUTs, 3 GETs, a HEAD, a DELETE, a listing.
        assert!(
            d.sample(1.0, one(fixture("rgw-perf-dump-16.2.15-before-local.json")))
                .is_empty()
        );
        let mut after = fixture("rgw-perf-dump-16.2.15-after-local.json");
        // As a thread-pool frontend would show it: 24 requests for 16 threads.
        after.queue_length = Some(24);
        after.active_requests = Some(16);
        let s = d.sample(3.0, one(after));
        let g = &s["client.rgw.sandbox"];
        // 11 requests over 2 s, 5 PUTs of 20480 bytes.
        assert_eq!(
            (g.requests_per_s, g.puts_per_s, g.put_bytes_per_s),
            (5.5, 2.5, 10240.0)
        );
        assert_eq!((g.queued, g.active), (24, 16));
        let samples = [
            ClusterSample {
                t_s: 1.0,
                ..ClusterSample::default()
            },
            ClusterSample {
                t_s: 3.0,
                gateways: s,
                ..ClusterSample::default()
            },
        ];
        let a = activity(&samples, 1.0);
        assert_eq!(
            (a[0].requests, a[0].max_queued, a[0].max_active),
            (11, 24, 16)
        );
        assert_eq!(
            notes(&a),
            [
                "client.rgw.sandbox: up to 24 request(s) queued for at most 16 being served: the gateway's threads were busy"
            ]
        );
        // beast counts every request in flight in both: no queue.
        let beast = GatewayActivity {
            max_queued: 60,
            max_active: 60,
            ..a[0].clone()
        };
        assert!(notes(&[beast]).is_empty());
        assert!(plausible_name("client.rgw.sandbox") && !plausible_name("rgw\u{1b}[2J"));
    }

    #[test]
    fn a_gateway_read_on_its_host_replaces_this_machines_reading_of_it() {
        let local = |name: &str, failed| GatewayActivity {
            name: name.into(),
            requests: 10,
            failed_requests: failed,
            ..GatewayActivity::default()
        };
        let mut watch = ClusterWatch {
            samples: vec![ClusterSample {
                t_s: 1.0,
                gateways: BTreeMap::from([
                    ("client.rgw.a".to_string(), GatewaySample::default()),
                    ("client.rgw.b".to_string(), GatewaySample::default()),
                ]),
                ..ClusterSample::default()
            }],
            gateways: vec![local("client.rgw.a", 2), local("client.rgw.b", 1)],
            observations: vec!["osd.1: slow".into()],
            ..ClusterWatch::default()
        };
        watch.observations.extend(notes(&watch.gateways));
        let remote = GatewayActivity {
            host: Some("node3".into()),
            failed_requests: 3,
            ..local("client.rgw.a", 0)
        };
        take_over_remote(&mut watch, &[remote]);
        let names: Vec<(&str, Option<&str>)> = watch
            .gateways
            .iter()
            .map(|g| (g.name.as_str(), g.host.as_deref()))
            .collect();
        assert_eq!(
            names,
            [("client.rgw.b", None), ("client.rgw.a", Some("node3"))]
        );
        assert_eq!(
            watch.observations,
            [
                "osd.1: slow",
                "client.rgw.b: 1 of 10 requests failed",
                "client.rgw.a on node3: 3 of 10 requests failed"
            ]
        );
        assert_eq!(
            watch.samples[0].gateways.keys().collect::<Vec<_>>(),
            ["client.rgw.b"]
        );
    }
}
