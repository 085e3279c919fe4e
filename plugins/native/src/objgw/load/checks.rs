//! What `pipeline validate` says of the load's parameters: each check adds
//! `(parameter, message)` problems, in the order of the parameters.

use std::time::Duration;

use super::config::{LoadConfig, MAX_OBJECT_BYTES, Workload};

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn bad(&mut self, name: &str, message: &str) {
        self.0.push((name.into(), message.into()));
    }
}

impl LoadConfig {
    /// Problems with the load parameters and the stage's gateway URL
    /// (`url_param`, plain `http://` only), as `(parameter, message)`.
    pub fn check_with_url(
        &self,
        stage: &str,
        url_param: &str,
        url: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if url.is_some_and(|u| !u.starts_with("http://")) {
            p.push((
                url_param.to_string(),
                format!("must start with http:// ({stage} speaks plain HTTP; TLS comes later)"),
            ));
        }
        p.extend(self.check());
        p
    }

    /// Problems with the load parameters, as `(parameter, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut p = Problems::default();
        self.check_threads(&mut p);
        self.check_sizes(&mut p);
        self.check_length(&mut p);
        self.check_errors_and_rate(&mut p);
        self.check_steady_state(&mut p);
        self.check_hosts_and_bucket(&mut p);
        self.check_mix(&mut p);
        p.0
    }

    fn check_threads(&self, p: &mut Problems) {
        if self.concurrency < 1 {
            p.bad("concurrency", "must be at least 1");
        }
        if self.worker_threads < 1 {
            p.bad("worker_threads", "must be at least 1");
        }
    }

    fn check_sizes(&self, p: &mut Problems) {
        if self.object_size.0 == 0 {
            p.bad("object_size", "must be more than 0");
        }
        if self.multipart_threshold.is_some() && self.part_size.0 < 5 << 20 {
            p.bad(
                "part_size",
                "must be at least 5 MiB (S3 and radosgw refuse smaller parts but the last)",
            );
        }
        if self.multipart_threshold.is_some_and(|t| t.0 == 0) {
            p.bad("multipart_threshold", "must be more than 0");
        }
        if !self.object_sizes.is_empty() && self.object_size_range.is_some() {
            p.bad(
                "object_sizes",
                "give `object_sizes` or `object_size_range`, not both",
            );
        }
        if self
            .object_sizes
            .iter()
            .any(|w| w.size.0 == 0 || w.weight == 0)
        {
            p.bad("object_sizes", "every size and weight must be more than 0");
        }
        if let Some(r) = &self.object_size_range
            && (r.min.0 == 0 || r.min.0 > r.max.0)
        {
            p.bad("object_size_range", "needs 0 < min <= max");
        }
        if self.largest_object() > MAX_OBJECT_BYTES as usize {
            p.bad(
                "object_size",
                "objects are at most 1 GiB (the payload is kept in memory)",
            );
        }
    }

    /// The keys, and how long the measured phase lasts.
    fn check_length(&self, p: &mut Problems) {
        if self.buckets < 1 || self.objects_per_bucket < 1 {
            p.bad(
                "objects_per_bucket",
                "buckets and objects_per_bucket must be at least 1",
            );
        }
        if self.operations.is_none() && self.duration.0.is_zero() {
            p.bad("duration", "must be more than 0 (or set `operations`)");
        }
        if self.operations == Some(0) {
            p.bad("operations", "must be at least 1");
        }
    }

    fn check_errors_and_rate(&self, p: &mut Problems) {
        if !(0.0..=1.0).contains(&self.max_error_rate) {
            p.bad("max_error_rate", "is a share of requests, between 0 and 1");
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && r > 0.0 && r <= 1e7)
        {
            p.bad(
                "rate",
                "is operations per second: more than 0 (at most 10000000)",
            );
        }
    }

    fn check_steady_state(&self, p: &mut Problems) {
        let Some(ss) = &self.steady_state else {
            return;
        };
        if self.operations.is_some() {
            p.bad(
                "steady_state",
                "ends a timed run early; it does not go with `operations`",
            );
        } else if ss.window.0.as_secs() < 2 || ss.window.0 > self.duration.0 {
            p.bad(
                "steady_state",
                "its `window` is whole seconds, at least 2 and at most `duration`",
            );
        } else if !(ss.within.is_finite() && ss.within > 0.0 && ss.within < 100.0) {
            p.bad(
                "steady_state",
                "its `within` is a percentage between 0 and 100",
            );
        }
    }

    /// Client hosts' workers, and a pre-existing bucket.
    fn check_hosts_and_bucket(&self, p: &mut Problems) {
        if self.worker_silence.0 < Duration::from_secs(2) {
            p.bad(
                "worker_silence",
                "must be at least 2s (a worker says `alive` every second)",
            );
        }
        if self.bucket.is_some() && self.buckets != 1 {
            p.bad("buckets", "must be 1 with a pre-existing `bucket`");
        }
    }

    fn check_mix(&self, p: &mut Problems) {
        if self.workload != Workload::Mixed {
            return;
        }
        let m = &self.mix;
        if m.get + m.put + m.delete + m.head + m.list == 0 {
            p.bad("mix", "needs at least one weight above 0");
        } else if m.delete > 0 && m.put == 0 {
            p.bad(
                "mix",
                "deletes without puts empty the buckets; give `put` a weight",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(with: serde_json::Value) -> LoadConfig {
        serde_json::from_value(with).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let c = config(serde_json::json!({}));
        assert_eq!(c.workload, Workload::Put);
        assert_eq!(c.concurrency, 16);
        assert!(!c.needs_prefill());
        assert!(c.check().is_empty());
        let bad = config(serde_json::json!({
            "workload": "mixed", "mix": {"get": 1, "delete": 1}, "concurrency": 0
        }));
        let params: Vec<String> = bad.check().into_iter().map(|(p, _)| p).collect();
        assert_eq!(params, vec!["concurrency", "mix"]);
    }
}
