//! The load's parameters (`with:` of `s3-bench` and `swift-bench`, beside
//! their credentials), what follows from them (prefill, each key's size)
//! and how they read in `pipeline plan`.

pub use pipeline_stage_api::remote_worker::LostHosts;
use pipeline_stage_api::stage::Action;
use pipeline_stage_api::typed::{ByteSize, Seconds};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The load parameters `s3-bench` and `swift-bench` share (flattened into
/// each stage's `with:` beside its credentials).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct LoadConfig {
    /// What the requests do: `put`, `get`, `head` or `list` (the last three after a prefill), or `mixed` (weights in `mix`, after a prefill).
    #[serde(default)]
    pub workload: Workload,
    /// Weights of the operations of a `mixed` workload.
    #[serde(default)]
    pub mix: Mix,
    /// Size of every object (unless `object_sizes` or `object_size_range` is given).
    #[serde(default = "four_kib")]
    pub object_size: ByteSize,
    /// Sizes with weights instead of one size, e.g. `[{size: 4K, weight: 9}, {size: 1M, weight: 1}]`. Each key keeps its size for the run, so a GET checks what was PUT.
    #[serde(default)]
    pub object_sizes: Vec<WeightedSize>,
    /// Objects of this size or larger are PUT in parts: S3 multipart uploads, Swift segmented (dynamic large) objects. Latency is reported per whole object (`put`) and per part (`put-part`).
    #[serde(default)]
    pub multipart_threshold: Option<ByteSize>,
    /// Size of each part of a multipart PUT (at least 5 MiB, as S3 and radosgw require of all but the last).
    #[serde(default = "eight_mib")]
    pub part_size: ByteSize,
    /// Sizes spread evenly between `min` and `max` instead of one size. On S3 their bodies are signed `UNSIGNED-PAYLOAD` (hashing every length would cost the client more than the request).
    #[serde(default)]
    pub object_size_range: Option<SizeRange>,
    /// Requests in flight.
    #[serde(default = "sixteen")]
    pub concurrency: u32,
    /// How long the measured phase lasts (unless `operations` is set).
    #[serde(default = "ten_seconds")]
    pub duration: Seconds,
    /// Stop after this many measured operations instead of after `duration`.
    #[serde(default)]
    pub operations: Option<u64>,
    /// Load before the measured phase, excluded from the figures.
    #[serde(default = "no_time")]
    pub warmup: Seconds,
    /// Buckets the keys spread over (one bucket's index slows PUTs as it grows).
    #[serde(default = "one")]
    pub buckets: u32,
    /// Keys per bucket: the objects GET reads and PUT (over)writes.
    #[serde(default = "thousand")]
    pub objects_per_bucket: u32,
    /// Use this existing bucket instead of creating buckets: it is never deleted, and only this run's keys (its prefix) are removed from it.
    #[serde(default)]
    pub bucket: Option<String>,
    /// Threads of the client's runtime (the cores the load generator may use).
    #[serde(default = "two")]
    pub worker_threads: u32,
    /// A request not answered within this time counts as a `timeout` error.
    #[serde(default = "thirty_seconds")]
    pub request_timeout: Seconds,
    /// Share of failed requests (0..1) the stage tolerates; above it the stage fails with the counts. 0: any error fails it.
    #[serde(default)]
    pub max_error_rate: f64,
    /// Target operations per second of all requests together, divided evenly among the `on:` client hosts (default: as fast as `concurrency` allows). Requests then follow a fixed schedule and latency counts from each one's intended start, so a gateway that falls behind shows its queue instead of hiding it (coordinated omission).
    #[serde(default)]
    pub rate: Option<f64>,
    /// End the measured phase early once throughput is steady, like fio's `steadystate` and warp's `--autoterm`: when every second of the last `window` is within `within` percent of their mean. `duration` stays the limit; the report says whether steady state was reached.
    #[serde(default)]
    pub steady_state: Option<SteadyState>,
    /// With `on:` client hosts: what a host lost mid-run (its worker died, its SSH session broke, or it went silent) does: `fail` the stage (default), or `exclude` it: the other hosts' figures are reported, host=all without it, and the report says so.
    #[serde(default)]
    pub lost_hosts: LostHosts,
    /// With `on:` client hosts: a worker that sends nothing for this long (it says `alive` every second) counts as lost.
    #[serde(default = "ten_seconds")]
    pub worker_silence: Seconds,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    #[default]
    Put,
    Get,
    /// HEAD of existing objects (metadata only).
    Head,
    /// One listing page (up to 1000 keys) of this run's prefix per request.
    List,
    Mixed,
}

/// One object size of a mix, and how often it comes.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightedSize {
    pub size: ByteSize,
    #[serde(default = "one")]
    pub weight: u32,
}

/// The smallest and the largest object size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SizeRange {
    pub min: ByteSize,
    pub max: ByteSize,
}

/// Largest object a run may write: the payload is kept in memory once.
pub(super) const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// When throughput counts as steady.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteadyState {
    /// The seconds that must agree (default 10 s).
    #[serde(default = "ten_seconds")]
    pub window: Seconds,
    /// How far (percent) each second may be from their mean (default 5).
    #[serde(default = "five")]
    pub within: f64,
}

fn five() -> f64 {
    5.0
}

impl SteadyState {
    /// Whether the last `window` seconds of `per_second` are steady.
    pub(super) fn reached(&self, per_second: &[f64]) -> bool {
        let w = self.window.0.as_secs() as usize;
        if w == 0 || per_second.len() < w {
            return false;
        }
        let last = &per_second[per_second.len() - w..];
        let mean = last.iter().sum::<f64>() / w as f64;
        mean > 0.0
            && last
                .iter()
                .all(|x| (x - mean).abs() <= self.within / 100.0 * mean)
    }
}

/// Weights of the operations of a mixed workload.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    #[serde(default)]
    pub get: u32,
    #[serde(default)]
    pub put: u32,
    #[serde(default)]
    pub delete: u32,
    #[serde(default)]
    pub head: u32,
    #[serde(default)]
    pub list: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            get: 60,
            put: 30,
            delete: 10,
            head: 0,
            list: 0,
        }
    }
}

fn four_kib() -> ByteSize {
    ByteSize::kib(4)
}
fn eight_mib() -> ByteSize {
    ByteSize::mib(8)
}
fn sixteen() -> u32 {
    16
}
pub(super) fn ten_seconds() -> Seconds {
    Seconds::secs(10)
}
fn thirty_seconds() -> Seconds {
    Seconds::secs(30)
}
fn no_time() -> Seconds {
    Seconds::secs(0)
}
fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn thousand() -> u32 {
    1000
}

impl LoadConfig {
    /// The load each of `hosts` client hosts runs: `rate` is the total, so
    /// each host follows its share of the schedule.
    pub fn per_host(&self, hosts: usize) -> LoadConfig {
        let mut each = self.clone();
        each.rate = self.rate.map(|r| r / hosts.max(1) as f64);
        each
    }

    pub(super) fn needs_prefill(&self) -> bool {
        match self.workload {
            Workload::Put => false,
            Workload::Get | Workload::Head | Workload::List => true,
            Workload::Mixed => {
                let m = &self.mix;
                m.get + m.delete + m.head + m.list > 0
            }
        }
    }

    /// The size of the object at key `index`: fixed for the run, so a GET
    /// knows what a PUT wrote.
    pub(super) fn size_of(&self, index: usize) -> usize {
        let r = splitmix64(index as u64);
        if let Some(range) = &self.object_size_range {
            let span = range.max.0 - range.min.0 + 1;
            return (range.min.0 + r % span) as usize;
        }
        let total: u64 = self.object_sizes.iter().map(|w| u64::from(w.weight)).sum();
        if total == 0 {
            return self.object_size.0 as usize;
        }
        let mut pick = r % total;
        for w in &self.object_sizes {
            if pick < u64::from(w.weight) {
                return w.size.0 as usize;
            }
            pick -= u64::from(w.weight);
        }
        self.object_size.0 as usize
    }

    pub(super) fn largest_object(&self) -> usize {
        if let Some(r) = &self.object_size_range {
            return r.max.0 as usize;
        }
        self.object_sizes
            .iter()
            .map(|w| w.size.0 as usize)
            .max()
            .unwrap_or(self.object_size.0 as usize)
    }

    /// The object sizes whose body hash is computed once (all but a range's).
    pub(super) fn hashed_sizes(&self) -> Vec<usize> {
        if self.object_size_range.is_some() {
            return Vec::new();
        }
        if self.object_sizes.is_empty() {
            return vec![self.object_size.0 as usize];
        }
        self.object_sizes
            .iter()
            .map(|w| w.size.0 as usize)
            .collect()
    }

    pub(super) fn describe_sizes(&self) -> String {
        if let Some(r) = &self.object_size_range {
            return format!("objects of {} to {} B", r.min.0, r.max.0);
        }
        if self.object_sizes.is_empty() {
            return format!("{} B objects", self.object_size.0);
        }
        let total: u32 = self.object_sizes.iter().map(|w| w.weight).sum();
        let parts: Vec<String> = self
            .object_sizes
            .iter()
            .map(|w| {
                format!(
                    "{} B ({:.0}%)",
                    w.size.0,
                    100.0 * f64::from(w.weight) / f64::from(total.max(1))
                )
            })
            .collect();
        format!("objects of {}", parts.join(", "))
    }

    pub(super) fn slots(&self) -> usize {
        self.buckets as usize * self.objects_per_bucket as usize
    }

    pub(super) fn describe_workload(&self) -> String {
        let what = match self.workload {
            Workload::Put => "PUT".to_string(),
            Workload::Get => "GET".to_string(),
            Workload::Head => "HEAD".to_string(),
            Workload::List => "LIST".to_string(),
            Workload::Mixed => {
                let m = &self.mix;
                format!(
                    "mixed get:put:delete:head:list = {}:{}:{}:{}:{}",
                    m.get, m.put, m.delete, m.head, m.list
                )
            }
        };
        let length = match self.operations {
            Some(n) => format!("{n} operations"),
            None => format!("{} s", self.duration.as_secs_f64()),
        };
        let rate = self
            .rate
            .map(|r| format!(" at a target rate of {r} ops/s"))
            .unwrap_or_default();
        format!(
            "{what} of {}, {} in flight{rate}, {length} after {} s warm-up, {} bucket(s) x {} keys",
            self.describe_sizes(),
            self.concurrency,
            self.warmup.as_secs_f64(),
            self.buckets,
            self.objects_per_bucket
        )
    }

    /// What a run does, for `pipeline plan`; `bucket` names the store's
    /// buckets (`bucket`, `container`), `at` its address.
    pub fn plan(&self, bucket: &str, at: &str) -> Vec<Action> {
        let mut actions = Vec::new();
        match &self.bucket {
            Some(b) => actions.push(Action::note(format!(
                "use the existing {bucket} `{b}` at {at}; keys under this run's prefix only"
            ))),
            None => actions.push(Action::note(format!(
                "create {} {bucket}(s) named after the run id at {at}",
                self.buckets
            ))),
        }
        if self.needs_prefill() {
            actions.push(Action::note(format!(
                "prefill: PUT {} {} (reported as phase `prefill`)",
                self.slots(),
                self.describe_sizes()
            )));
        }
        actions.push(Action::note(self.describe_workload()));
        let removal = match &self.bucket {
            Some(b) => format!("delete this run's keys from `{b}` (the {bucket} stays)"),
            None => format!("empty and delete the {bucket}s this stage created"),
        };
        actions
            .push(Action::note(format!("{removal}, also after a failure or Ctrl-C")).destructive());
        actions
    }
}

/// SplitMix64 of a key index: its size, the same every time it is asked.
pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(with: serde_json::Value) -> LoadConfig {
        serde_json::from_value(with).unwrap()
    }

    #[test]
    fn steady_state_is_every_second_of_the_window_near_their_mean() {
        let ss = SteadyState {
            window: Seconds::secs(3),
            within: 5.0,
        };
        assert!(!ss.reached(&[100.0, 100.0]), "shorter than the window");
        assert!(ss.reached(&[10.0, 400.0, 100.0, 103.0, 98.0]));
        assert!(!ss.reached(&[100.0, 100.0, 120.0]));
        assert!(!ss.reached(&[0.0, 0.0, 0.0]), "no load is not steady load");
        let c = config(serde_json::json!({"steady_state": {"window": "3s"}, "duration": "10s"}));
        assert!(c.check().is_empty(), "{:?}", c.check());
        let bad = config(serde_json::json!({"steady_state": {}, "operations": 10}));
        assert_eq!(bad.check()[0].0, "steady_state");
    }

    #[test]
    fn each_key_keeps_one_size_drawn_by_the_weights() {
        let c = config(serde_json::json!({
            "object_sizes": [{"size": 1024, "weight": 3}, {"size": 65536, "weight": 1}]
        }));
        assert!(c.check().is_empty(), "{:?}", c.check());
        assert_eq!(c.largest_object(), 65536);
        assert_eq!(c.hashed_sizes(), vec![1024, 65536]);
        let small = (0..10_000).filter(|i| c.size_of(*i) == 1024).count();
        assert!((7000..8000).contains(&small), "{small}");
        assert!((0..100).all(|i| c.size_of(i) == c.size_of(i)));
        assert!(
            c.describe_sizes().contains("1024 B (75%)"),
            "{}",
            c.describe_sizes()
        );

        let r = config(serde_json::json!({"object_size_range": {"min": 1000, "max": 2000}}));
        assert!((0..1000).all(|i| (1000..=2000).contains(&r.size_of(i))));
        assert!(r.hashed_sizes().is_empty(), "a range is sent unsigned");
        let both = config(serde_json::json!({
            "object_sizes": [{"size": 1}], "object_size_range": {"min": 1, "max": 2}
        }));
        assert_eq!(both.check()[0].0, "object_sizes");
        let huge = config(serde_json::json!({"object_size": 2147483648u64}));
        assert_eq!(huge.check()[0].0, "object_size");
    }
}
