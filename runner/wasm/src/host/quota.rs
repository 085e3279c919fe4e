//! How much a plugin may hand the host: every byte and every item a guest
//! passes in (log lines, progress, metrics, series, names, artifacts,
//! command output it reads back) has a limit here, in one place, with its
//! default. Without them one guest call reusing a 1 MiB buffer makes the
//! host allocate gigabytes, fill the disk with `plugin.log`, or write a
//! results.json and report.md no one can open.
//!
//! What happens past a limit: for what the plugin *returns* or *emits*
//! (metrics, series, names, entries, artifacts, non-finite values) the
//! stage fails with an error naming the limit; for the plugin's own log
//! the excess is dropped after one marker line; progress messages are
//! shortened and thinned out (they are a status line, nothing is lost that
//! plugin.log does not keep). The run always goes on, and cleanup runs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pipeline_model::{Labels, Metric, Series};
use pipeline_stage_api::stage::{StageError, StageOutput};

/// The limits on what a plugin hands the host, per stage instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    /// Bytes of one name: a metric, series, label key, output, environment
    /// fact or artifact name. Default 256.
    pub name_bytes: usize,
    /// Bytes of one short text: a unit, a label value. Default 1 KiB.
    pub text_bytes: usize,
    /// Bytes of one message: a log line, a skip reason, an error text.
    /// Longer log lines are cut; a longer skip reason or error is cut
    /// with a marker. Default 64 KiB.
    pub message_bytes: usize,
    /// Bytes of `plugin.log`; past it one marker line, then nothing. Default 16 MiB.
    pub log_bytes: u64,
    /// Bytes of one progress message shown (cut with `…`). Default 200.
    pub progress_bytes: usize,
    /// At most one progress message per this interval reaches the
    /// terminal; the others are dropped. Default 100 ms.
    pub progress_interval: Duration,
    /// Metrics per stage, emitted and returned together. Default 10 000.
    pub metrics: usize,
    /// Labels per metric or series. Default 32.
    pub labels: usize,
    /// Series per stage. Default 1 000.
    pub series: usize,
    /// Points of all series of a stage together (each series is saved as
    /// JSON, ~35 bytes a point: ~9 MB at the limit). Default 250 000, a
    /// point a second for 69 hours.
    pub series_points: usize,
    /// Outputs per stage, and environment facts per stage (each). Default 256.
    pub entries: usize,
    /// Bytes of one output or environment value as JSON. Default 1 MiB.
    pub value_bytes: usize,
    /// Artifacts per stage. Default 256.
    pub artifacts: usize,
    /// Bytes of all artifacts of a stage together. Default 256 MiB.
    pub artifact_bytes: u64,
    /// Bytes of a command's stdout (and of its stderr) handed back to the
    /// guest; the full output stays in the `NN-*.stdout|.stderr` file.
    /// Default 16 MiB.
    pub exec_output_bytes: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            name_bytes: 256,
            text_bytes: 1 << 10,
            message_bytes: 64 << 10,
            log_bytes: 16 << 20,
            progress_bytes: 200,
            progress_interval: Duration::from_millis(100),
            metrics: 10_000,
            labels: 32,
            series: 1_000,
            series_points: 250_000,
            entries: 256,
            value_bytes: 1 << 20,
            artifacts: 256,
            artifact_bytes: 256 << 20,
            exec_output_bytes: 16 << 20,
        }
    }
}

/// A limit a plugin went past: what, how much, and the limit's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} ({found}) is over the limit of {limit} (`{name}`)")]
pub struct OverLimit {
    pub what: String,
    pub found: String,
    pub limit: String,
    /// The field of [`Quota`].
    pub name: &'static str,
}

/// Why the host refuses what a plugin returned or emitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    OverLimit(#[from] OverLimit),
    #[error(
        "{owner} has the value {value}, which is not a finite number (results.json holds only finite numbers)"
    )]
    NotFinite { owner: String, value: f64 },
    #[error(
        "point {index} of {owner} is ({t}, {v}), which is not a pair of finite numbers (results hold only finite numbers)"
    )]
    PointNotFinite {
        owner: String,
        index: usize,
        t: f64,
        v: f64,
    },
}

fn over(what: impl Into<String>, found: usize, limit: usize, name: &'static str) -> OverLimit {
    OverLimit {
        what: what.into(),
        found: found.to_string(),
        limit: limit.to_string(),
        name,
    }
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// `text`, cut to at most `max` bytes at a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A short, printable preview of a (possibly huge, possibly hostile) name
/// for an error message.
pub fn preview(text: &str) -> String {
    let cut = clip(text, 40);
    let shown: String = cut
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if cut.len() < text.len() {
        format!("`{shown}…`")
    } else {
        format!("`{shown}`")
    }
}

/// `text` cut to `max` bytes with `…` when it was longer.
pub fn shorten(text: &str, max: usize) -> String {
    let cut = clip(text, max);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

/// Thins out progress messages: one per interval passes.
#[derive(Debug, Default, Clone)]
pub struct ProgressGate {
    last: Option<Instant>,
}

impl ProgressGate {
    /// Whether a message arriving `now` is shown.
    pub fn admit(&mut self, now: Instant, interval: Duration) -> bool {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < interval)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

impl Quota {
    fn name(&self, kind: &str, name: &str) -> Result<(), OverLimit> {
        if name.len() > self.name_bytes {
            return Err(OverLimit {
                what: format!("the {kind} name {}", preview(name)),
                found: bytes(name.len() as u64),
                limit: bytes(self.name_bytes as u64),
                name: "name_bytes",
            });
        }
        Ok(())
    }

    fn text(&self, what: &str, text: &str) -> Result<(), OverLimit> {
        if text.len() > self.text_bytes {
            return Err(OverLimit {
                what: what.to_string(),
                found: bytes(text.len() as u64),
                limit: bytes(self.text_bytes as u64),
                name: "text_bytes",
            });
        }
        Ok(())
    }

    fn labels(&self, owner: &str, labels: &Labels) -> Result<(), OverLimit> {
        if labels.len() > self.labels {
            return Err(over(
                format!("the number of labels of {owner}"),
                labels.len(),
                self.labels,
                "labels",
            ));
        }
        for (k, v) in labels {
            self.name("label", k)?;
            self.text(&format!("the value of label `{k}` of {owner}"), v)?;
        }
        Ok(())
    }

    /// One metric, whether emitted or returned: its name, unit and labels
    /// in bounds, its value a finite number.
    pub fn metric(&self, m: &Metric) -> Result<(), Refused> {
        self.name("metric", &m.name)?;
        let owner = format!("metric {}", preview(&m.name));
        self.text(&format!("the unit of {owner}"), &m.unit)?;
        self.labels(&owner, &m.labels)?;
        if !m.value.is_finite() {
            return Err(Refused::NotFinite {
                owner,
                value: m.value,
            });
        }
        Ok(())
    }

    fn one_series(&self, s: &Series) -> Result<(), Refused> {
        self.name("series", &s.name)?;
        let owner = format!("series {}", preview(&s.name));
        self.text(&format!("the unit of {owner}"), &s.unit)?;
        self.labels(&owner, &s.labels)?;
        if let Some((index, &[t, v])) = s
            .points
            .iter()
            .enumerate()
            .find(|(_, [t, v])| !t.is_finite() || !v.is_finite())
        {
            return Err(Refused::PointNotFinite { owner, index, t, v });
        }
        Ok(())
    }

    fn entries(
        &self,
        kind: &str,
        entries: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(), OverLimit> {
        if entries.len() > self.entries {
            return Err(over(
                format!("the number of {kind}s"),
                entries.len(),
                self.entries,
                "entries",
            ));
        }
        for (name, value) in entries {
            self.name(kind, name)?;
            // Measured without building the text: a counting writer.
            let mut counter = Counter(0);
            let _ = serde_json::to_writer(&mut counter, value);
            if counter.0 > self.value_bytes {
                return Err(OverLimit {
                    what: format!("the value of {kind} {}", preview(name)),
                    found: bytes(counter.0 as u64),
                    limit: bytes(self.value_bytes as u64),
                    name: "value_bytes",
                });
            }
        }
        Ok(())
    }

    /// Text of a message the plugin wrote (an error), cut to
    /// [`Quota::message_bytes`] with a marker saying so.
    pub fn message(&self, text: String) -> String {
        if text.len() <= self.message_bytes {
            return text;
        }
        format!(
            "{} [... cut: {} bytes, over the limit of {} per message (`message_bytes`)]",
            clip(&text, self.message_bytes),
            text.len(),
            bytes(self.message_bytes as u64)
        )
    }

    /// A plugin's own error with each of its texts within bounds.
    pub fn stage_error(&self, e: StageError) -> StageError {
        match e {
            StageError::Failed(m) => StageError::Failed(self.message(m)),
            StageError::Param { name, message } => StageError::Param {
                name: self.message(name),
                message: self.message(message),
            },
            StageError::CommandFailed {
                command,
                status,
                stderr_tail,
            } => StageError::CommandFailed {
                command: self.message(command),
                status: self.message(status),
                stderr_tail: self.message(stderr_tail),
            },
            other => other,
        }
    }

    /// Everything a stage returns, with the metrics it emitted before
    /// (`emitted`, already checked one by one): `Err` names the first limit
    /// it goes past.
    pub fn output(
        &self,
        emitted: usize,
        out: &StageOutput,
        artifacts: &[(String, Vec<u8>)],
    ) -> Result<(), Refused> {
        let metrics = emitted + out.metrics.len();
        if metrics > self.metrics {
            return Err(over("the number of metrics", metrics, self.metrics, "metrics").into());
        }
        for m in &out.metrics {
            self.metric(m)?;
        }
        if out.series.len() > self.series {
            return Err(over(
                "the number of series",
                out.series.len(),
                self.series,
                "series",
            )
            .into());
        }
        let points: usize = out.series.iter().map(|s| s.points.len()).sum();
        if points > self.series_points {
            return Err(over(
                "the number of series points",
                points,
                self.series_points,
                "series_points",
            )
            .into());
        }
        for s in &out.series {
            self.one_series(s)?;
        }
        self.entries("output", &out.outputs)?;
        self.entries("environment fact", &out.environment)?;
        if let Some(reason) = &out.skipped
            && reason.len() > self.message_bytes
        {
            return Err(OverLimit {
                what: "the skip reason".into(),
                found: bytes(reason.len() as u64),
                limit: bytes(self.message_bytes as u64),
                name: "message_bytes",
            }
            .into());
        }
        if artifacts.len() > self.artifacts {
            return Err(over(
                "the number of artifacts",
                artifacts.len(),
                self.artifacts,
                "artifacts",
            )
            .into());
        }
        let mut total: u64 = 0;
        for (name, contents) in artifacts {
            self.name("artifact", name)?;
            total = total.saturating_add(contents.len() as u64);
        }
        if total > self.artifact_bytes {
            return Err(OverLimit {
                what: "the artifacts together".into(),
                found: bytes(total),
                limit: bytes(self.artifact_bytes),
                name: "artifact_bytes",
            }
            .into());
        }
        Ok(())
    }
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::Direction;

    fn metric(name: &str, value: f64) -> Metric {
        let mut m = Metric::new(name, value, "s", Direction::Lower);
        m.labels.insert("host".into(), "a".into());
        m
    }

    #[test]
    fn a_metric_must_be_finite_and_small() {
        let q = Quota::default();
        assert!(q.metric(&metric("lat", 1.5)).is_ok());
        let e = q.metric(&metric("lat", f64::NAN)).unwrap_err().to_string();
        assert!(e.contains("`lat` has the value NaN"), "{e}");
        assert!(q.metric(&metric("lat", f64::INFINITY)).is_err());
        let e = q
            .metric(&metric(&"n".repeat(1 << 20), 1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 MiB) is over the limit of 256 bytes (`name_bytes`)"),
            "{e}"
        );
        assert!(
            e.len() < 200,
            "the error quotes a preview, not the name: {e}"
        );
    }

    #[test]
    fn counts_and_sizes_of_an_output() {
        let q = Quota {
            metrics: 3,
            series_points: 4,
            artifact_bytes: 10,
            ..Quota::default()
        };
        let mut out = StageOutput {
            metrics: vec![metric("a", 1.0), metric("b", 2.0)],
            ..StageOutput::default()
        };
        assert!(q.output(1, &out, &[]).is_ok());
        let e = q.output(2, &out, &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "the number of metrics (4) is over the limit of 3 (`metrics`)"
        );
        let mut s = Series::new("ramp", "s", Direction::None);
        s.points = vec![[0.0, 1.0]; 5];
        out.series.push(s);
        let e = q.output(0, &out, &[]).unwrap_err().to_string();
        assert!(e.contains("`series_points`"), "{e}");
        out.series[0].points = vec![[0.0, 1.0], [f64::NAN, 1.0]];
        let e = q.output(0, &out, &[]).unwrap_err().to_string();
        assert!(e.contains("point 1 of series `ramp` is (NaN, 1)"), "{e}");
        out.series.clear();
        let e = q
            .output(
                0,
                &out,
                &[("a".into(), vec![0; 6]), ("b".into(), vec![0; 6])],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("`artifact_bytes`"), "{e}");
    }

    #[test]
    fn clip_cuts_at_a_character_boundary() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
        assert_eq!(preview("a\u{1b}[2Kb"), "`a?[2Kb`");
        assert_eq!(shorten("abcdef", 3), "abc…");
    }

    #[test]
    fn progress_passes_once_per_interval() {
        let mut gate = ProgressGate::default();
        let t0 = Instant::now();
        let every = Duration::from_millis(100);
        let passed = (0..1000)
            .filter(|i| gate.admit(t0 + Duration::from_millis(*i), every))
            .count();
        assert_eq!(passed, 10);
    }

    #[test]
    fn long_errors_are_cut_with_a_marker() {
        let q = Quota {
            message_bytes: 8,
            ..Quota::default()
        };
        let e = q.stage_error(StageError::Failed("x".repeat(100)));
        assert_eq!(
            e.to_string(),
            "xxxxxxxx [... cut: 100 bytes, over the limit of 8 bytes per message (`message_bytes`)]"
        );
    }
}
