//! How one figure measured by several parts of a run (the hosts of a per-host
//! stage, the clients of a fio stage, the jobs of one fio process) combines
//! into one figure for all of them: every [`Metric`](crate::Metric) declares
//! its rule, because no single rule is right for every figure. Rates add up
//! only when the parts ran at the same time; a percentile is never averaged
//! (the mean of two p99s is not the p99 of anything), it is taken from the
//! merged histogram of the parts' samples.
//!
//! In JSON a rule is a string (`"sum"`, `"max"`, `"min"`, `"mean"`, `"none"`)
//! or, when it has parameters, an object with one key:
//! `{"mean": {"weight": "ops"}}`, `{"histogram": {"name": "read_clat",
//! "quantile": 0.99}}`.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The rule by which a metric combines across hosts (and other parts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "StoredAggregate", into = "StoredAggregate")]
pub enum Aggregate {
    /// Add the parts' values. Only for rates measured over the same window,
    /// and only applied when the parts ran concurrently (hosts in one batch).
    Sum,
    /// The largest of the parts' values (e.g. a maximum latency).
    Max,
    /// The smallest of the parts' values (e.g. a minimum latency).
    Min,
    /// The arithmetic mean of the parts' values; with `weight`, weighted by
    /// the metric of that name with the same labels in the same part (e.g.
    /// an average latency weighted by the part's op count).
    Mean { weight: Option<Cow<'static, str>> },
    /// A quantile (0..1) of the merged histogram `name` of the parts (the
    /// histogram with that name and the metric's labels in each part).
    Histogram {
        name: Cow<'static, str>,
        quantile: f64,
    },
    /// Does not combine: no figure for all parts (standard deviations,
    /// informational values, percentiles without a histogram).
    None,
}

impl Aggregate {
    /// The rule of a metric that declares none, as results.json files written
    /// before rules existed (schema version 1) are read: rates (a unit ending
    /// in `/s`, or `IOPS`) are summed, everything else does not combine.
    pub fn inferred_from_unit(unit: &str) -> Self {
        if unit.ends_with("/s") || unit == crate::unit::IOPS {
            Aggregate::Sum
        } else {
            Aggregate::None
        }
    }

    /// The mean weighted by the metric `weight` (same labels, same part).
    pub fn mean_weighted_by(weight: impl Into<Cow<'static, str>>) -> Self {
        Aggregate::Mean {
            weight: Some(weight.into()),
        }
    }

    /// The `quantile` (0..1) of the merged histogram `name`.
    pub fn histogram(name: impl Into<Cow<'static, str>>, quantile: f64) -> Self {
        Aggregate::Histogram {
            name: name.into(),
            quantile,
        }
    }

    /// [`Aggregate::mean_weighted_by`] in a `const` (a metric declaration).
    pub const fn const_mean_weighted_by(weight: &'static str) -> Self {
        Aggregate::Mean {
            weight: Some(Cow::Borrowed(weight)),
        }
    }

    /// [`Aggregate::histogram`] in a `const` (a metric declaration).
    pub const fn const_histogram(name: &'static str, quantile: f64) -> Self {
        Aggregate::Histogram {
            name: Cow::Borrowed(name),
            quantile,
        }
    }

    /// The rule's name as results.json spells it (`sum`, `mean`, `histogram`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Aggregate::Sum => "sum",
            Aggregate::Max => "max",
            Aggregate::Min => "min",
            Aggregate::Mean { .. } => "mean",
            Aggregate::Histogram { .. } => "histogram",
            Aggregate::None => "none",
        }
    }

    /// The rule in words, as `pipeline plugins describe` shows it: `sum`,
    /// `mean weighted by ops`, `p99 of the merged histogram read_clat`,
    /// `none`.
    pub fn summary(&self) -> String {
        match self {
            Aggregate::Mean {
                weight: Some(weight),
            } => format!("mean weighted by {weight}"),
            Aggregate::Histogram { name, quantile } => {
                format!("{} of the merged histogram {name}", percentile(*quantile))
            }
            rule => rule.kind().to_string(),
        }
    }

    /// How a combined value came about, for the report: `sum of 2 hosts`,
    /// `p99 of merged histograms of 2 hosts`, `max of 3 clients`.
    pub fn describe(&self, over: &str, count: usize) -> String {
        let parts = if count == 1 {
            format!("1 {over}")
        } else {
            format!("{count} {over}s")
        };
        match self {
            Aggregate::Sum => format!("sum of {parts}"),
            Aggregate::Max => format!("max of {parts}"),
            Aggregate::Min => format!("min of {parts}"),
            Aggregate::Mean { weight: None } => format!("mean of {parts}"),
            Aggregate::Mean {
                weight: Some(weight),
            } => format!("mean of {parts} weighted by {weight}"),
            Aggregate::Histogram { quantile, .. } => {
                format!("{} of merged histograms of {parts}", percentile(*quantile))
            }
            Aggregate::None => parts,
        }
    }
}

/// `0.99` -> `p99`, `0.999` -> `p99.9`, `0.5` -> `p50`.
fn percentile(quantile: f64) -> String {
    let p = format!("{:.4}", quantile * 100.0);
    let p = p.trim_end_matches('0').trim_end_matches('.');
    format!("p{p}")
}

/// The JSON shape of [`Aggregate`]: a plain rule name, or a one-key object
/// for a rule with parameters.
#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum StoredAggregate {
    Plain(PlainRule),
    WithParameters(RuleWithParameters),
}

/// A rule without parameters.
#[derive(Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum PlainRule {
    /// Add the parts' values (rates of parts that ran at the same time).
    Sum,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
    /// The unweighted mean.
    Mean,
    /// Does not combine.
    None,
}

/// A rule with parameters.
#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum RuleWithParameters {
    /// The mean weighted by another metric of the same stage and labels.
    Mean {
        /// Name of the weighting metric (e.g. `ops`).
        weight: String,
    },
    /// A quantile of the parts' merged histogram.
    Histogram {
        /// Name of the histogram (same labels as the metric).
        name: String,
        /// Between 0 and 1, e.g. 0.99.
        quantile: f64,
    },
}

impl From<StoredAggregate> for Aggregate {
    fn from(stored: StoredAggregate) -> Self {
        match stored {
            StoredAggregate::Plain(PlainRule::Sum) => Aggregate::Sum,
            StoredAggregate::Plain(PlainRule::Max) => Aggregate::Max,
            StoredAggregate::Plain(PlainRule::Min) => Aggregate::Min,
            StoredAggregate::Plain(PlainRule::Mean) => Aggregate::Mean { weight: None },
            StoredAggregate::Plain(PlainRule::None) => Aggregate::None,
            StoredAggregate::WithParameters(RuleWithParameters::Mean { weight }) => {
                Aggregate::Mean {
                    weight: Some(Cow::Owned(weight)),
                }
            }
            StoredAggregate::WithParameters(RuleWithParameters::Histogram { name, quantile }) => {
                Aggregate::Histogram {
                    name: Cow::Owned(name),
                    quantile,
                }
            }
        }
    }
}

impl From<Aggregate> for StoredAggregate {
    fn from(rule: Aggregate) -> Self {
        match rule {
            Aggregate::Sum => StoredAggregate::Plain(PlainRule::Sum),
            Aggregate::Max => StoredAggregate::Plain(PlainRule::Max),
            Aggregate::Min => StoredAggregate::Plain(PlainRule::Min),
            Aggregate::Mean { weight: None } => StoredAggregate::Plain(PlainRule::Mean),
            Aggregate::None => StoredAggregate::Plain(PlainRule::None),
            Aggregate::Mean {
                weight: Some(weight),
            } => StoredAggregate::WithParameters(RuleWithParameters::Mean {
                weight: weight.into_owned(),
            }),
            Aggregate::Histogram { name, quantile } => {
                StoredAggregate::WithParameters(RuleWithParameters::Histogram {
                    name: name.into_owned(),
                    quantile,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(rule: &Aggregate) -> String {
        serde_json::to_string(rule).unwrap()
    }

    #[test]
    fn compact_json_both_ways() {
        let cases = [
            (Aggregate::Sum, r#""sum""#),
            (Aggregate::Max, r#""max""#),
            (Aggregate::Min, r#""min""#),
            (Aggregate::None, r#""none""#),
            (Aggregate::Mean { weight: None }, r#""mean""#),
            (
                Aggregate::mean_weighted_by("ops"),
                r#"{"mean":{"weight":"ops"}}"#,
            ),
            (
                Aggregate::histogram("read_clat", 0.99),
                r#"{"histogram":{"name":"read_clat","quantile":0.99}}"#,
            ),
        ];
        for (rule, text) in cases {
            assert_eq!(json(&rule), text);
            assert_eq!(serde_json::from_str::<Aggregate>(text).unwrap(), rule);
        }
        assert!(serde_json::from_str::<Aggregate>(r#""average""#).is_err());
        assert!(serde_json::from_str::<Aggregate>(r#"{"histogram":{"name":"x"}}"#).is_err());
    }

    #[test]
    fn inferred_like_version_1_files() {
        assert_eq!(Aggregate::inferred_from_unit("MiB/s"), Aggregate::Sum);
        assert_eq!(Aggregate::inferred_from_unit("IOPS"), Aggregate::Sum);
        assert_eq!(Aggregate::inferred_from_unit("ms"), Aggregate::None);
        assert_eq!(Aggregate::inferred_from_unit("count"), Aggregate::None);
    }

    #[test]
    fn descriptions() {
        assert_eq!(Aggregate::Sum.describe("host", 2), "sum of 2 hosts");
        assert_eq!(Aggregate::Max.describe("client", 3), "max of 3 clients");
        assert_eq!(
            Aggregate::mean_weighted_by("ops").describe("host", 2),
            "mean of 2 hosts weighted by ops"
        );
        assert_eq!(
            Aggregate::histogram("clat", 0.99).describe("host", 2),
            "p99 of merged histograms of 2 hosts"
        );
        assert_eq!(
            Aggregate::histogram("clat", 0.999).describe("job", 2),
            "p99.9 of merged histograms of 2 jobs"
        );
        assert_eq!(percentile(0.5), "p50");
        assert_eq!(Aggregate::Sum.summary(), "sum");
        assert_eq!(
            Aggregate::const_mean_weighted_by("ops").summary(),
            "mean weighted by ops"
        );
        assert_eq!(
            Aggregate::const_histogram("read_clat", 0.999).summary(),
            "p99.9 of the merged histogram read_clat"
        );
        assert_eq!(
            Aggregate::const_histogram("x", 0.5),
            Aggregate::histogram("x".to_string(), 0.5)
        );
    }
}
