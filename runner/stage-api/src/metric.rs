//! A metric is declared once: its [`MetricDecl`] says its name, unit,
//! direction, how it combines across hosts (its [`Aggregate`] rule), whether
//! it is a headline figure, and what it means. `pipeline plugins describe`
//! shows the declarations, and a stage makes its values from them
//! (`BANDWIDTH.value(312.9)`), so results.json cannot say anything else.
//! The engine checks every metric a stage returns against the stage's
//! declarations ([`check`]) and fails the stage on one it does not declare
//! or declares otherwise: native stages and WASM plugins alike.
//!
//! Across repetitions (`repeat:`) every metric is treated alike (median,
//! min, max and spread; `pipeline compare` tests the repetitions as
//! samples), so there is no per-metric rule to declare for them.
//!
//! ```
//! use pipeline_stage_api::metric::MetricDecl;
//! use pipeline_stage_api::model::unit;
//!
//! const IOPS: MetricDecl = MetricDecl::rate("iops", unit::IOPS, "Operations per second.").headline();
//! let m = IOPS.value(1234.0).label("op", "write");
//! assert_eq!((m.name.as_str(), m.unit.as_str(), m.headline), ("iops", "IOPS", true));
//! ```

use std::borrow::Cow;

use pipeline_model::{Aggregate, Direction, Metric};
use serde::Serialize;

/// One metric a stage may report, declared once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDecl {
    /// Stable, machine-friendly name, e.g. `bandwidth`, `read_clat_p99`.
    pub name: Cow<'static, str>,
    /// Unit of every value (see [`pipeline_model::unit`]).
    pub unit: Cow<'static, str>,
    pub direction: Direction,
    /// How the metric combines across hosts (the `host=all` figure) and the
    /// other parts of a measurement (fio's jobs and clients).
    pub aggregate: Aggregate,
    /// A headline figure: shown in the report's summary. The stage's figure
    /// for all its parts is the headline; a part's own (one host of
    /// several, one fio job) is reported without the mark.
    pub headline: bool,
    /// One line: what the metric means, its labels.
    pub doc: Cow<'static, str>,
}

impl MetricDecl {
    /// A metric with every property given.
    pub const fn declare(
        name: &'static str,
        unit: &'static str,
        direction: Direction,
        aggregate: Aggregate,
        doc: &'static str,
    ) -> Self {
        MetricDecl {
            name: Cow::Borrowed(name),
            unit: Cow::Borrowed(unit),
            direction,
            aggregate,
            headline: false,
            doc: Cow::Borrowed(doc),
        }
    }

    /// A rate (bandwidth, IOPS, ops/s): more is better, and the rates of
    /// parts that ran at the same time add up.
    pub const fn rate(name: &'static str, unit: &'static str, doc: &'static str) -> Self {
        Self::declare(name, unit, Direction::Higher, Aggregate::Sum, doc)
    }

    /// An informational figure (a size, a capacity, a duration of one
    /// host's own): neither better nor worse, and it does not combine.
    pub const fn info(name: &'static str, unit: &'static str, doc: &'static str) -> Self {
        Self::declare(name, unit, Direction::None, Aggregate::None, doc)
    }

    /// Marks the metric as a headline figure.
    pub const fn headline(mut self) -> Self {
        self.headline = true;
        self
    }

    /// A declaration made at run time (a WASM plugin's, the `exec` stage's
    /// `metrics:` entries).
    pub fn owned(
        name: String,
        unit: String,
        direction: Direction,
        aggregate: Aggregate,
        headline: bool,
        doc: String,
    ) -> Self {
        MetricDecl {
            name: Cow::Owned(name),
            unit: Cow::Owned(unit),
            direction,
            aggregate,
            headline,
            doc: Cow::Owned(doc),
        }
    }

    /// The declaration in one line, as `pipeline plugins describe` shows it:
    /// `bandwidth [MiB/s] higher is better; host=all: sum; headline`.
    /// `declared` says whether direction and headline are part of it.
    pub fn summary(&self, declared: Declared) -> String {
        let direction = match (declared, self.direction) {
            (Declared::WithoutDirection, _) => "direction with each value",
            (_, Direction::Higher) => "higher is better",
            (_, Direction::Lower) => "lower is better",
            (_, Direction::None) => "neither better nor worse",
        };
        let headline = if self.headline && declared == Declared::Fully {
            "; headline"
        } else {
            ""
        };
        format!(
            "{} [{}] {direction}; host=all: {}{headline}",
            self.name,
            self.unit,
            self.aggregate.summary()
        )
    }

    /// A value of this metric: its name, unit, direction, rule and headline
    /// mark as declared.
    pub fn value(&self, value: f64) -> Metric {
        let mut m = Metric::new(self.name.to_string(), value, &self.unit, self.direction)
            .aggregate(self.aggregate.clone());
        m.headline = self.headline;
        m
    }

    /// A metric measured by a parser (`pipeline_parsers`), made again from
    /// this declaration: value, labels and combination as measured, all the
    /// rest as declared. Refused when the parser's figure is not the one
    /// declared (another unit, direction or rule).
    pub fn adopt(&self, stage: &str, measured: Metric) -> Result<Metric, MetricError> {
        self.agrees(stage, &measured, Strictness::Full)?;
        let mut m = self.value(measured.value);
        m.labels = measured.labels;
        m.combined = measured.combined;
        // A rule the figure could not follow (no histogram) stays `none`.
        m.aggregate = measured.aggregate;
        m.headline = measured.headline;
        Ok(m)
    }

    /// Whether `m` (a metric of this name) is what this declares.
    fn agrees(&self, stage: &str, m: &Metric, strictness: Strictness) -> Result<(), MetricError> {
        let differs = |what: &'static str, emitted: String, declared: String| {
            Err(MetricError::Disagrees {
                stage: stage.to_string(),
                metric: m.name.clone(),
                what,
                emitted,
                declared,
            })
        };
        if m.unit != self.unit {
            return differs("unit", quoted(&m.unit), quoted(&self.unit));
        }
        if !rule_fits(&self.aggregate, &m.aggregate) {
            return differs("rule", m.aggregate.summary(), self.aggregate.summary());
        }
        if strictness == Strictness::RuleAndUnit {
            return Ok(());
        }
        if m.direction != self.direction {
            return differs(
                "direction",
                direction_name(m.direction).into(),
                direction_name(self.direction).into(),
            );
        }
        if m.headline && !self.headline {
            return differs("headline mark", "headline".into(), "no headline".into());
        }
        Ok(())
    }
}

/// How much of a declaration its values must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strictness {
    /// Everything: unit, rule, direction, headline mark.
    Full,
    /// Unit and rule: the values carry their own direction and headline
    /// mark (WASM plugins of interface 0.1.0, whose declarations have neither).
    RuleAndUnit,
}

/// A declared `histogram` rule also admits a value without one (`none`):
/// a percentile measured without the histogram (fio's plain JSON) does not
/// combine, whatever it would have done with one.
fn rule_fits(declared: &Aggregate, emitted: &Aggregate) -> bool {
    declared == emitted
        || (matches!(declared, Aggregate::Histogram { .. }) && *emitted == Aggregate::None)
}

fn quoted(unit: &str) -> String {
    if unit.is_empty() {
        "no unit".to_string()
    } else {
        format!("`{unit}`")
    }
}

/// `higher`, `lower`, `none`: as results.json spells a direction.
pub fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Higher => "higher",
        Direction::Lower => "lower",
        Direction::None => "none",
    }
}

/// A metric a stage returned that its declarations do not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    #[error(
        "stage `{stage}` reported the metric `{metric}`, which it does not declare ({declared})"
    )]
    Undeclared {
        stage: String,
        metric: String,
        /// `it declares: a, b` or `it declares no metrics`.
        declared: String,
    },
    #[error(
        "stage `{stage}` reported the metric `{metric}` with {what} {emitted}, but declares it with {declared}"
    )]
    Disagrees {
        stage: String,
        metric: String,
        what: &'static str,
        emitted: String,
        declared: String,
    },
}

/// How the values of a stage's metrics relate to its declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Declared {
    /// Values are made from the declarations: they must match them in all.
    #[default]
    Fully,
    /// The declarations give name, unit and rule; each value brings its
    /// own direction and headline mark (WASM interface 0.1.0).
    WithoutDirection,
}

/// Checks the metrics a run of `stage` returned against its declarations:
/// each must be declared, with the declared unit, rule, direction and (at
/// most) headline mark.
pub fn check(
    stage: &str,
    decls: &[MetricDecl],
    declared: Declared,
    metrics: &[Metric],
) -> Result<(), MetricError> {
    match problems(stage, decls, declared, metrics).into_iter().next() {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// Every metric of a run of `stage` that its declarations do not allow,
/// each metric name once (the first of its values that does not fit).
/// [`check`] refuses the first; for a WASM plugin of interface 0.1.0, which
/// did not require its metrics to be declared, the engine keeps them and
/// notes each one instead.
pub fn problems(
    stage: &str,
    decls: &[MetricDecl],
    declared: Declared,
    metrics: &[Metric],
) -> Vec<MetricError> {
    let strictness = match declared {
        Declared::Fully => Strictness::Full,
        Declared::WithoutDirection => Strictness::RuleAndUnit,
    };
    let mut found: Vec<MetricError> = Vec::new();
    let mut named = std::collections::BTreeSet::new();
    for m in metrics {
        if named.contains(&m.name) {
            continue;
        }
        if let Err(e) = find(stage, decls, &m.name).and_then(|d| d.agrees(stage, m, strictness)) {
            named.insert(m.name.clone());
            found.push(e);
        }
    }
    found
}

/// The declaration of the metric `name`.
pub fn find<'a>(
    stage: &str,
    decls: &'a [MetricDecl],
    name: &str,
) -> Result<&'a MetricDecl, MetricError> {
    decls
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| MetricError::Undeclared {
            stage: stage.to_string(),
            metric: name.to_string(),
            declared: if decls.is_empty() {
                "it declares no metrics".to_string()
            } else {
                let names: Vec<&str> = decls.iter().map(|d| &*d.name).collect();
                format!("it declares: {}", names.join(", "))
            },
        })
}

/// The metrics a parser measured, each made again from its declaration
/// ([`MetricDecl::adopt`]).
pub fn adopt_all(
    stage: &str,
    decls: &[MetricDecl],
    measured: Vec<Metric>,
) -> Result<Vec<Metric>, MetricError> {
    measured
        .into_iter()
        .map(|m| find(stage, decls, &m.name)?.adopt(stage, m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::unit;

    const BW: MetricDecl =
        MetricDecl::rate("bandwidth", unit::MIB_PER_S, "Average bandwidth.").headline();
    const LAT: MetricDecl = MetricDecl::declare(
        "latency_avg",
        unit::SECONDS,
        Direction::Lower,
        Aggregate::const_mean_weighted_by("ops"),
        "Average latency.",
    );
    const P99: MetricDecl = MetricDecl::declare(
        "clat_p99",
        unit::MICROSECONDS,
        Direction::Lower,
        Aggregate::const_histogram("clat", 0.99),
        "p99 completion latency.",
    );

    #[test]
    fn a_value_is_what_its_declaration_says() {
        let m = BW.value(312.5).label("mode", "write");
        assert_eq!(m.name, "bandwidth");
        assert_eq!(m.unit, "MiB/s");
        assert_eq!(m.direction, Direction::Higher);
        assert_eq!(m.aggregate, Aggregate::Sum);
        assert!(m.headline);
        assert_eq!(m.labels["mode"], "write");
        let lat = LAT.value(0.1);
        assert_eq!(lat.aggregate, Aggregate::mean_weighted_by("ops"));
        assert!(!lat.headline);
        let decls = [BW, LAT, P99];
        check("rados-bench", &decls, Declared::Fully, &[m, lat]).unwrap();
    }

    #[test]
    fn undeclared_and_disagreeing_metrics_are_named() {
        let decls = [BW, LAT];
        let stray = Metric::new("iops", 1.0, unit::IOPS, Direction::Higher);
        let e = check("rados-bench", &decls, Declared::Fully, &[stray]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stage `rados-bench` reported the metric `iops`, which it does not declare \
             (it declares: bandwidth, latency_avg)"
        );
        let e = check("x", &[], Declared::Fully, &[BW.value(1.0)]).unwrap_err();
        assert!(e.to_string().ends_with("(it declares no metrics)"), "{e}");

        let mut other_unit = BW.value(1.0);
        other_unit.unit = "B/s".into();
        let e = check("s", &decls, Declared::Fully, &[other_unit]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stage `s` reported the metric `bandwidth` with unit `B/s`, but declares it with `MiB/s`"
        );
        let other_rule = LAT.value(1.0).aggregate(Aggregate::Max);
        let e = check("s", &decls, Declared::Fully, &[other_rule]).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("with rule max, but declares it with mean weighted by ops"),
            "{e}"
        );
        let mut headline = LAT.value(1.0);
        headline.headline = true;
        assert!(check("s", &decls, Declared::Fully, &[headline.clone()]).is_err());
        // A part's figure without the mark its declaration has is fine.
        let mut part = BW.value(1.0);
        part.headline = false;
        check("s", &decls, Declared::Fully, &[part]).unwrap();
        // Interface 0.1.0: values bring their own direction and mark.
        let mut lower = BW.value(1.0);
        lower.direction = Direction::Lower;
        check("s", &decls, Declared::WithoutDirection, &[headline, lower]).unwrap();
    }

    #[test]
    fn summaries_say_everything_declared() {
        assert_eq!(
            BW.summary(Declared::Fully),
            "bandwidth [MiB/s] higher is better; host=all: sum; headline"
        );
        assert_eq!(
            P99.summary(Declared::Fully),
            "clat_p99 [us] lower is better; host=all: p99 of the merged histogram clat"
        );
        assert_eq!(
            BW.summary(Declared::WithoutDirection),
            "bandwidth [MiB/s] direction with each value; host=all: sum"
        );
        let info = MetricDecl::info("op_size", unit::BYTES, "");
        assert_eq!(
            info.summary(Declared::Fully),
            "op_size [B] neither better nor worse; host=all: none"
        );
    }

    #[test]
    fn parsed_figures_are_adopted_or_refused() {
        let decls = [BW, P99];
        let parsed = Metric::new("clat_p99", 7.0, unit::MICROSECONDS, Direction::Lower)
            .aggregate(Aggregate::histogram("clat", 0.99))
            .label("job", "all")
            .headline();
        let e = adopt_all("fio", &decls, vec![parsed.clone()]).unwrap_err();
        assert!(e.to_string().contains("headline mark"), "{e}");
        let mut parsed = parsed;
        parsed.headline = false;
        let adopted = adopt_all("fio", &decls, vec![parsed.clone()]).unwrap();
        assert_eq!(adopted, vec![parsed.clone()]);
        // Without a histogram the percentile does not combine: still declared.
        let plain = parsed.aggregate(Aggregate::None);
        let adopted = adopt_all("fio", &decls, vec![plain]).unwrap();
        assert_eq!(adopted[0].aggregate, Aggregate::None);
        let stray = Metric::new("clat_p50", 7.0, unit::MICROSECONDS, Direction::Lower);
        assert!(matches!(
            adopt_all("fio", &decls, vec![stray]),
            Err(MetricError::Undeclared { .. })
        ));
    }
}
