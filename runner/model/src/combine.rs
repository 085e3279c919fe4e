//! One figure for all parts of a measurement — the hosts of a per-host stage,
//! the clients of a fio stage, the jobs of one fio process — from the parts'
//! figures, each by the [`Aggregate`] rule its metric declares.
//!
//! The parts are told apart by one label (`over`: `host`, `client`, `job`);
//! figures with the same name, unit and other labels belong together, and
//! their combination gets `over=all`. Histograms of the same name and other
//! labels are merged likewise.

use std::collections::BTreeMap;

use crate::{Aggregate, Combined, Histogram, Labels, Metric, unit};

/// How the parts ran, and how few of them make a combination.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    /// The label that tells the parts apart.
    pub over: &'a str,
    /// The parts ran at the same time: `sum` rules apply. When false, rates
    /// are not summed (they were measured over different windows).
    pub concurrent: bool,
    /// Figures measured by fewer parts get no combination. With 1, a figure
    /// of a single part is copied as it is, whatever its rule: the figure
    /// for all parts is that part's.
    pub at_least: usize,
}

/// What [`combine`] computed, and what it could not.
#[derive(Debug, Default)]
pub struct Combination {
    /// Labelled `over=all`.
    pub metrics: Vec<Metric>,
    /// The merged histograms, labelled `over=all`.
    pub histograms: Vec<Histogram>,
    /// Names of `sum` metrics left without a combination because the parts
    /// did not run at the same time.
    pub unsummed: Vec<String>,
    /// Figures whose rule could not be applied, and why.
    pub problems: Vec<String>,
}

/// A figure's identity apart from its part: name, unit, the other labels.
type Key = (String, String, Vec<(String, String)>);

fn key(name: &str, unit: &str, labels: &Labels, over: &str) -> Key {
    let others = labels
        .iter()
        .filter(|(k, _)| *k != over)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (name.to_string(), unit.to_string(), others)
}

/// Whether the item belongs to a part (has the `over` label, not `all`).
fn in_a_part(labels: &Labels, over: &str) -> bool {
    labels.get(over).is_some_and(|v| v != "all")
}

/// Combines the parts' `metrics` and `histograms` (each labelled with its
/// part's `over` label); see the module docs.
pub fn combine(metrics: &[Metric], histograms: &[Histogram], parts: Parts) -> Combination {
    let mut out = Combination::default();
    let mut groups: BTreeMap<Key, Vec<&Metric>> = BTreeMap::new();
    for m in metrics.iter().filter(|m| in_a_part(&m.labels, parts.over)) {
        groups
            .entry(key(&m.name, &m.unit, &m.labels, parts.over))
            .or_default()
            .push(m);
    }
    for ((name, _, _), group) in groups {
        if group.len() < parts.at_least.max(1) {
            continue;
        }
        let combined = if group.len() == 1 {
            Ok(Some(all(group[0], parts.over, None)))
        } else {
            combine_group(&group, metrics, histograms, parts)
        };
        match combined {
            Ok(Some(m)) => out.metrics.push(m),
            Ok(None) => {}
            Err(Skipped::NotConcurrent) => out.unsummed.push(name),
            Err(Skipped::Problem(why)) => out.problems.push(format!("{name}: {why}")),
        }
    }
    out.histograms = merge_histograms(histograms, parts, &mut out.problems);
    out
}

/// Why a group got no combination.
enum Skipped {
    NotConcurrent,
    Problem(String),
}

/// The combination of two or more parts' figures; `None` for rule `none`.
fn combine_group(
    group: &[&Metric],
    metrics: &[Metric],
    histograms: &[Histogram],
    parts: Parts,
) -> Result<Option<Metric>, Skipped> {
    let rule = &group[0].aggregate;
    if group.iter().any(|m| m.aggregate != *rule) {
        return Err(Skipped::Problem(format!(
            "the {}s declare different rules",
            parts.over
        )));
    }
    let values = group.iter().map(|m| m.value);
    let value = match rule {
        Aggregate::None => return Ok(None),
        Aggregate::Sum if !parts.concurrent => return Err(Skipped::NotConcurrent),
        Aggregate::Sum => values.sum(),
        Aggregate::Max => values.fold(f64::NEG_INFINITY, f64::max),
        Aggregate::Min => values.fold(f64::INFINITY, f64::min),
        Aggregate::Mean { weight: None } => values.sum::<f64>() / group.len() as f64,
        Aggregate::Mean {
            weight: Some(weight),
        } => weighted_mean(group, weight, metrics, parts.over)?,
        Aggregate::Histogram { name, quantile } => {
            merged_quantile(group, name, *quantile, histograms, parts.over)?
        }
    };
    let mut m = all(group[0], parts.over, Some(group.len()));
    m.value = value;
    m.headline = group.iter().any(|x| x.headline);
    Ok(Some(m))
}

/// A copy of `m` labelled `over=all`, marked as combined from `count` parts.
fn all(m: &Metric, over: &str, count: Option<usize>) -> Metric {
    let mut m = m.clone();
    m.labels.insert(over.to_string(), "all".to_string());
    m.combined = count.map(|count| Combined {
        over: over.to_string(),
        count,
        window_s: None,
    });
    m
}

fn part_name<'a>(m: &'a Metric, over: &str) -> &'a str {
    m.labels.get(over).map_or("?", String::as_str)
}

/// The mean of the group's values, each weighted by the metric `weight`
/// with the same labels (the same part).
fn weighted_mean(
    group: &[&Metric],
    weight: &str,
    metrics: &[Metric],
    over: &str,
) -> Result<f64, Skipped> {
    let mut total = 0.0;
    let mut weighted = 0.0;
    for m in group {
        let w = metrics
            .iter()
            .find(|w| w.name == weight && w.labels == m.labels)
            .ok_or_else(|| {
                Skipped::Problem(format!(
                    "no `{weight}` to weight it by for {over} {}",
                    part_name(m, over)
                ))
            })?
            .value;
        total += w;
        weighted += w * m.value;
    }
    if total > 0.0 {
        Ok(weighted / total)
    } else {
        Err(Skipped::Problem(format!(
            "the `{weight}` weights add up to 0"
        )))
    }
}

/// `quantile` of the merged histograms `name` of the group's parts, in the
/// metric's unit.
fn merged_quantile(
    group: &[&Metric],
    name: &str,
    quantile: f64,
    histograms: &[Histogram],
    over: &str,
) -> Result<f64, Skipped> {
    let mut found = Vec::new();
    for m in group {
        let h = histograms
            .iter()
            .find(|h| h.name == name && h.labels == m.labels)
            .ok_or_else(|| {
                Skipped::Problem(format!(
                    "no histogram `{name}` for {over} {}",
                    part_name(m, over)
                ))
            })?;
        found.push(h);
    }
    let problem = |e: crate::HistogramError| Skipped::Problem(e.to_string());
    let merged = Histogram::merge(found)
        .map_err(problem)?
        .ok_or_else(|| Skipped::Problem(format!("no histogram `{name}`")))?;
    let value = merged.value_at_quantile(quantile).map_err(problem)?;
    let to = &group[0].unit;
    let factor = unit::factor(&merged.unit, to).ok_or_else(|| {
        Skipped::Problem(format!(
            "histogram `{name}` is in {}, which does not convert to {to}",
            merged.unit
        ))
    })?;
    Ok(value * factor)
}

/// The histograms of the same name and other labels merged over the parts,
/// labelled `over=all`; histograms of a single part are copied when
/// `parts.at_least` allows that.
fn merge_histograms(
    histograms: &[Histogram],
    parts: Parts,
    problems: &mut Vec<String>,
) -> Vec<Histogram> {
    let mut groups: BTreeMap<Key, Vec<&Histogram>> = BTreeMap::new();
    for h in histograms
        .iter()
        .filter(|h| in_a_part(&h.labels, parts.over))
    {
        groups
            .entry(key(&h.name, &h.unit, &h.labels, parts.over))
            .or_default()
            .push(h);
    }
    let mut out = Vec::new();
    for ((name, _, _), group) in groups {
        if group.len() < parts.at_least.max(1) {
            continue;
        }
        match Histogram::merge(group) {
            Ok(Some(mut h)) => {
                h.labels.insert(parts.over.to_string(), "all".to_string());
                out.push(h);
            }
            Ok(None) => {}
            Err(e) => problems.push(format!("histogram {name}: {e}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Direction;

    const HOSTS: Parts = Parts {
        over: "host",
        concurrent: true,
        at_least: 2,
    };

    fn on(host: &str, m: Metric) -> Metric {
        m.label("host", host)
    }

    fn find<'a>(c: &'a Combination, name: &str) -> Option<&'a Metric> {
        c.metrics.iter().find(|m| m.name == name)
    }

    #[test]
    fn each_rule() {
        let metrics = vec![
            on("a", Metric::new("bw", 100.0, "B/s", Direction::Higher)),
            on("b", Metric::new("bw", 50.0, "B/s", Direction::Higher)),
            on(
                "a",
                Metric::new("lat_max", 9.0, "ms", Direction::Lower).aggregate(Aggregate::Max),
            ),
            on(
                "b",
                Metric::new("lat_max", 12.0, "ms", Direction::Lower).aggregate(Aggregate::Max),
            ),
            on(
                "a",
                Metric::new("lat_min", 1.0, "ms", Direction::Lower).aggregate(Aggregate::Min),
            ),
            on(
                "b",
                Metric::new("lat_min", 0.5, "ms", Direction::Lower).aggregate(Aggregate::Min),
            ),
            on(
                "a",
                Metric::new("temp", 40.0, "C", Direction::None)
                    .aggregate(Aggregate::Mean { weight: None }),
            ),
            on(
                "b",
                Metric::new("temp", 50.0, "C", Direction::None)
                    .aggregate(Aggregate::Mean { weight: None }),
            ),
            on(
                "a",
                Metric::new("lat_avg", 2.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::mean_weighted_by("ops")),
            ),
            on(
                "b",
                Metric::new("lat_avg", 5.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::mean_weighted_by("ops")),
            ),
            on(
                "a",
                Metric::new("ops", 300.0, "count", Direction::None).aggregate(Aggregate::Sum),
            ),
            on(
                "b",
                Metric::new("ops", 100.0, "count", Direction::None).aggregate(Aggregate::Sum),
            ),
            on("a", Metric::new("stddev", 1.0, "ms", Direction::None)),
            on("b", Metric::new("stddev", 2.0, "ms", Direction::None)),
        ];
        let c = combine(&metrics, &[], HOSTS);
        let value = |name| find(&c, name).unwrap().value;
        assert_eq!(value("bw"), 150.0);
        assert_eq!(value("lat_max"), 12.0);
        assert_eq!(value("lat_min"), 0.5);
        assert_eq!(value("temp"), 45.0);
        assert_eq!(value("lat_avg"), (300.0 * 2.0 + 100.0 * 5.0) / 400.0);
        assert_eq!(value("ops"), 400.0);
        assert!(find(&c, "stddev").is_none());
        let bw = find(&c, "bw").unwrap();
        assert_eq!(bw.labels["host"], "all");
        assert_eq!(bw.combination().as_deref(), Some("sum of 2 hosts"));
        assert!(c.problems.is_empty() && c.unsummed.is_empty());
    }

    #[test]
    fn sums_need_concurrent_parts() {
        let metrics = vec![
            on("a", Metric::new("bw", 100.0, "B/s", Direction::Higher)),
            on("b", Metric::new("bw", 50.0, "B/s", Direction::Higher)),
            on(
                "a",
                Metric::new("lat_max", 9.0, "ms", Direction::Lower).aggregate(Aggregate::Max),
            ),
            on(
                "b",
                Metric::new("lat_max", 12.0, "ms", Direction::Lower).aggregate(Aggregate::Max),
            ),
        ];
        let sequential = Parts {
            concurrent: false,
            ..HOSTS
        };
        let c = combine(&metrics, &[], sequential);
        assert!(find(&c, "bw").is_none());
        assert_eq!(c.unsummed, ["bw"]);
        assert_eq!(find(&c, "lat_max").unwrap().value, 12.0);
    }

    #[test]
    fn a_missing_weight_or_histogram_is_a_problem_not_a_guess() {
        let metrics = vec![
            on(
                "a",
                Metric::new("lat_avg", 2.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::mean_weighted_by("ops")),
            ),
            on(
                "b",
                Metric::new("lat_avg", 5.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::mean_weighted_by("ops")),
            ),
            on("a", Metric::new("ops", 3.0, "count", Direction::None)),
            on(
                "a",
                Metric::new("p99", 2.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::histogram("lat", 0.99)),
            ),
            on(
                "b",
                Metric::new("p99", 5.0, "ms", Direction::Lower)
                    .aggregate(Aggregate::histogram("lat", 0.99)),
            ),
        ];
        let c = combine(&metrics, &[], HOSTS);
        assert!(find(&c, "lat_avg").is_none());
        assert!(find(&c, "p99").is_none());
        assert_eq!(
            c.problems,
            [
                "lat_avg: no `ops` to weight it by for host b",
                "p99: no histogram `lat` for host a"
            ]
        );
    }

    #[test]
    fn histogram_quantile_in_the_metric_unit() {
        let a: Vec<u64> = (1..=1000).map(|v| v * 1000).collect(); // ns
        let b: Vec<u64> = (1..=1000).map(|v| v * 5000).collect();
        let ha = Histogram::from_values("lat", "ns", a.clone())
            .unwrap()
            .label("host", "a");
        let hb = Histogram::from_values("lat", "ns", b.clone())
            .unwrap()
            .label("host", "b");
        let p99 = |h: &Histogram| h.value_at_quantile(0.99).unwrap() / 1000.0;
        let rule = Aggregate::histogram("lat", 0.99);
        let metrics = vec![
            on(
                "a",
                Metric::new("p99", p99(&ha), "us", Direction::Lower).aggregate(rule.clone()),
            ),
            on(
                "b",
                Metric::new("p99", p99(&hb), "us", Direction::Lower).aggregate(rule),
            ),
        ];
        let c = combine(&metrics, &[ha, hb], HOSTS);
        let all = Histogram::from_values("lat", "ns", a.into_iter().chain(b)).unwrap();
        let m = find(&c, "p99").unwrap();
        assert_eq!(m.value, all.value_at_quantile(0.99).unwrap() / 1000.0);
        assert_eq!(
            m.combination().as_deref(),
            Some("p99 of merged histograms of 2 hosts")
        );
        assert_eq!(c.histograms.len(), 1);
        assert_eq!(c.histograms[0].labels["host"], "all");
        assert_eq!(c.histograms[0].count, 2000);
    }

    #[test]
    fn single_parts_are_copied_only_when_asked() {
        let metrics = vec![
            Metric::new("p99", 2.0, "ms", Direction::Lower).label("job", "a"),
            Metric::new("bw", 1.0, "B/s", Direction::Higher).label("job", "a"),
            Metric::new("bw", 2.0, "B/s", Direction::Higher).label("job", "b"),
        ];
        let jobs = Parts {
            over: "job",
            concurrent: true,
            at_least: 1,
        };
        let c = combine(&metrics, &[], jobs);
        let p99 = find(&c, "p99").unwrap();
        assert_eq!((p99.value, p99.combined.is_none()), (2.0, true));
        assert_eq!(find(&c, "bw").unwrap().value, 3.0);
        let c = combine(
            &metrics,
            &[],
            Parts {
                at_least: 2,
                ..jobs
            },
        );
        assert!(find(&c, "p99").is_none());
    }
}
