//! A distribution of recorded values (latencies), kept so that percentiles
//! over several hosts, clients or jobs can be computed from the merged
//! samples instead of from the parts' percentiles (which do not combine).
//!
//! The distribution is an HDR histogram with 3 significant digits (a value is
//! known to within 0.1%), serialized in the HdrHistogram "V2 deflate" format
//! and stored as base64 text; a latency distribution of a few hundred
//! distinct buckets takes one or two KB.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Labels;

/// Significant decimal digits kept of every recorded value.
const SIGNIFICANT_DIGITS: u8 = 3;

type Hdr = hdrhistogram::Histogram<u64>;

/// Why a histogram could not be built, read or merged.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram `{name}`: cannot record the value {value}: {reason}")]
    Record {
        name: String,
        value: u64,
        reason: String,
    },
    #[error("histogram `{name}`: not a valid encoded HDR histogram: {reason}")]
    Decode { name: String, reason: String },
    #[error("histogram `{name}`: cannot encode: {reason}")]
    Encode { name: String, reason: String },
    #[error("histograms `{name}` do not merge: {reason}")]
    Merge { name: String, reason: String },
    #[error("histogram `{name}` is empty")]
    Empty { name: String },
}

/// One named distribution of recorded values, e.g. fio's read completion
/// latencies (`read_clat`, in ns) of one job on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Histogram {
    /// Named by what was recorded, e.g. `read_clat`; a metric's `histogram`
    /// rule refers to it by this name (and the metric's labels).
    pub name: String,
    /// Unit of the recorded values, e.g. `ns`.
    pub unit: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Number of recorded values.
    pub count: u64,
    /// The HDR histogram: HdrHistogram V2 deflate encoding, base64 (standard
    /// alphabet, padded).
    pub hdr: String,
}

impl Histogram {
    /// A histogram of `(value, how many times it was recorded)` pairs.
    pub fn from_counts(
        name: impl Into<String>,
        unit: &str,
        counts: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Self, HistogramError> {
        let name = name.into();
        let mut hdr = new_hdr();
        for (value, count) in counts {
            hdr.record_n(value, count)
                .map_err(|e| HistogramError::Record {
                    name: name.clone(),
                    value,
                    reason: e.to_string(),
                })?;
        }
        Self::encode(name, unit, Labels::new(), &hdr)
    }

    /// A histogram of individual recorded values.
    pub fn from_values(
        name: impl Into<String>,
        unit: &str,
        values: impl IntoIterator<Item = u64>,
    ) -> Result<Self, HistogramError> {
        Self::from_counts(name, unit, values.into_iter().map(|v| (v, 1)))
    }

    /// Adds a label (builder style).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The value at `quantile` (0..1), in [`Histogram::unit`]: the smallest
    /// recorded value (to 0.1%) that at least that share of values do not
    /// exceed, as fio computes its percentiles from its own bins.
    pub fn value_at_quantile(&self, quantile: f64) -> Result<f64, HistogramError> {
        let hdr = self.decode()?;
        if hdr.is_empty() {
            return Err(HistogramError::Empty {
                name: self.name.clone(),
            });
        }
        Ok(hdr.value_at_quantile(quantile) as f64)
    }

    /// The histogram of all values of `parts` together; name, unit and
    /// labels are the first part's. `None` when `parts` is empty.
    pub fn merge<'a>(
        parts: impl IntoIterator<Item = &'a Histogram>,
    ) -> Result<Option<Histogram>, HistogramError> {
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else {
            return Ok(None);
        };
        let mut merged = first.decode()?;
        for part in parts {
            if part.unit != first.unit {
                return Err(HistogramError::Merge {
                    name: first.name.clone(),
                    reason: format!("units differ ({} and {})", first.unit, part.unit),
                });
            }
            merged
                .add(part.decode()?)
                .map_err(|e| HistogramError::Merge {
                    name: first.name.clone(),
                    reason: e.to_string(),
                })?;
        }
        Self::encode(
            first.name.clone(),
            &first.unit,
            first.labels.clone(),
            &merged,
        )
        .map(Some)
    }

    /// The HDR histogram itself.
    pub fn decode(&self) -> Result<hdrhistogram::Histogram<u64>, HistogramError> {
        let fail = |reason: String| HistogramError::Decode {
            name: self.name.clone(),
            reason,
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.hdr)
            .map_err(|e| fail(e.to_string()))?;
        let mut hdr: Hdr = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| fail(e.to_string()))?;
        // Merging in values beyond the decoded range grows it.
        hdr.auto(true);
        Ok(hdr)
    }

    fn encode(name: String, unit: &str, labels: Labels, hdr: &Hdr) -> Result<Self, HistogramError> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(hdr, &mut bytes)
            .map_err(|e| HistogramError::Encode {
                name: name.clone(),
                reason: e.to_string(),
            })?;
        Ok(Histogram {
            name,
            unit: unit.to_string(),
            labels,
            count: hdr.len(),
            hdr: base64::engine::general_purpose::STANDARD.encode(bytes),
        })
    }
}

/// An empty histogram that grows to any value recorded.
fn new_hdr() -> Hdr {
    Hdr::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid HDR precision")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_quantiles() {
        let h = Histogram::from_values("lat", "us", 1..=1000).unwrap();
        assert_eq!(h.count, 1000);
        assert_eq!(h.value_at_quantile(0.5).unwrap(), 500.0);
        assert_eq!(h.value_at_quantile(0.99).unwrap(), 990.0);
        let json = serde_json::to_string(&h).unwrap();
        let back: Histogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn merged_quantile_is_that_of_all_values() {
        let a = Histogram::from_values("lat", "us", 1..=100).unwrap();
        let b = Histogram::from_values("lat", "us", 901..=1000).unwrap();
        let merged = Histogram::merge([&a, &b]).unwrap().unwrap();
        let all = Histogram::from_values("lat", "us", (1..=100).chain(901..=1000)).unwrap();
        assert_eq!(merged.count, 200);
        for q in [0.1, 0.5, 0.9, 0.99] {
            assert_eq!(
                merged.value_at_quantile(q).unwrap(),
                all.value_at_quantile(q).unwrap()
            );
        }
        let other_unit = Histogram::from_values("lat", "ns", [1]).unwrap();
        assert!(Histogram::merge([&a, &other_unit]).is_err());
        assert!(Histogram::merge([]).unwrap().is_none());
    }

    /// A wide latency distribution (1 µs .. 10 s in ns, ~1% steps) stays small.
    #[test]
    fn encoded_size_is_a_few_kb() {
        let mut v = 1000.0_f64;
        let mut counts = Vec::new();
        while v < 1e10 {
            counts.push((v as u64, 17));
            v *= 1.01;
        }
        let h = Histogram::from_counts("clat", "ns", counts.clone()).unwrap();
        assert!(counts.len() > 1500);
        assert!(h.hdr.len() < 4 * 1024, "{} bytes", h.hdr.len());
    }

    #[test]
    fn garbage_does_not_decode() {
        let mut h = Histogram::from_values("lat", "us", [1]).unwrap();
        h.hdr = "not base64!".into();
        assert!(h.value_at_quantile(0.5).is_err());
        h.hdr = "AAAA".into();
        assert!(matches!(h.decode(), Err(HistogramError::Decode { .. })));
    }
}
