//! A worker's `done` is checked like a plugin's figures before anything of
//! it reaches the stage's output: only metrics its stage declares, as it
//! declares them; names of `[a-z0-9_]` (no terminal escapes into the
//! report); finite, non-negative values no load reaches beyond; bounded
//! notes, labels, series and histograms; a peak memory a machine can have.
//! Anything else fails that host with a message naming the field.

use pipeline_model::{Labels, Metric};

use super::protocol::WorkerOutput;
use super::shown;
use crate::metric::{self, Declared, MetricDecl};

/// Beyond any figure a load reports (a PB/s, 31 million years in seconds):
/// a value above it is a worker's garbage, not a measurement.
pub const PLAUSIBLE: f64 = 1e15;
/// A worker's peak memory above 4 TiB is no worker's.
pub const MAX_RSS_KIB: u64 = 1 << 32;
pub const MAX_NOTES: usize = 64;
pub const NOTE_BYTES: usize = 4096;
pub const NAME_BYTES: usize = 128;
pub const LABEL_BYTES: usize = 256;
pub const MAX_LABELS: usize = 16;
pub const MAX_METRICS: usize = 10_000;
pub const MAX_HISTOGRAMS: usize = 1_000;
pub const MAX_SERIES: usize = 1_000;
/// A day's seconds of a series, ten times over.
pub const MAX_POINTS: usize = 864_000;
/// One serialized HDR histogram (a few KiB in practice).
pub const HDR_BYTES: usize = 1 << 20;

/// The first thing wrong with a `done` of `stage`'s worker, naming the field.
pub fn problem(
    stage: &str,
    declared: &[MetricDecl],
    output: &WorkerOutput,
    max_rss_kib: u64,
) -> Option<String> {
    check(stage, declared, output, max_rss_kib).err()
}

fn check(
    stage: &str,
    declared: &[MetricDecl],
    output: &WorkerOutput,
    max_rss_kib: u64,
) -> Result<(), String> {
    if max_rss_kib > MAX_RSS_KIB {
        return Err(format!(
            "max_rss_kib is {max_rss_kib}, more than any machine has (at most {MAX_RSS_KIB})"
        ));
    }
    at_most("metrics", output.metrics.len(), MAX_METRICS)?;
    for (i, m) in output.metrics.iter().enumerate() {
        metric_problem(i, m)?;
    }
    if let Some(e) = metric::problems(stage, declared, Declared::Fully, &output.metrics)
        .into_iter()
        .next()
    {
        return Err(e.to_string());
    }
    at_most("histograms", output.histograms.len(), MAX_HISTOGRAMS)?;
    for (i, h) in output.histograms.iter().enumerate() {
        let at = format!("histograms[{i}]");
        name(&format!("{at}.name"), &h.name)?;
        text(&format!("{at}.unit"), &h.unit, NAME_BYTES)?;
        labels(&at, &h.labels)?;
        if h.hdr.len() > HDR_BYTES {
            return Err(format!(
                "{at}.hdr is {} bytes long (at most {HDR_BYTES})",
                h.hdr.len()
            ));
        }
        if h.count as f64 > PLAUSIBLE {
            return Err(format!("{at}.count is {}, beyond any load", h.count));
        }
    }
    at_most("series", output.series.len(), MAX_SERIES)?;
    for (i, s) in output.series.iter().enumerate() {
        let at = format!("series[{i}]");
        name(&format!("{at}.name"), &s.name)?;
        text(&format!("{at}.unit"), &s.unit, NAME_BYTES)?;
        labels(&at, &s.labels)?;
        at_most(&format!("{at}.points"), s.points.len(), MAX_POINTS)?;
        if let Some((j, [t, v])) = s
            .points
            .iter()
            .enumerate()
            .find(|(_, [t, v])| !plausible(*t) || !plausible(*v))
        {
            return Err(format!(
                "{at}.points[{j}] is [{t}, {v}]: not a finite, non-negative figure of at most {PLAUSIBLE:e}"
            ));
        }
    }
    at_most("notes", output.notes.len(), MAX_NOTES)?;
    for (i, n) in output.notes.iter().enumerate() {
        if n.len() > NOTE_BYTES {
            return Err(format!(
                "notes[{i}] is {} bytes long (at most {NOTE_BYTES})",
                n.len()
            ));
        }
        // A note is prose for the report: lines and tabs, no escapes.
        if n.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            let cut: String = n.chars().take(40).collect();
            return Err(format!(
                "notes[{i}] `{}` holds control characters",
                shown(&cut)
            ));
        }
    }
    Ok(())
}

fn metric_problem(i: usize, m: &Metric) -> Result<(), String> {
    let at = format!("metrics[{i}]");
    name(&format!("{at}.name"), &m.name)?;
    text(&format!("{at}.unit"), &m.unit, NAME_BYTES)?;
    labels(&at, &m.labels)?;
    if !plausible(m.value) {
        return Err(format!(
            "{at}.value of `{}` is {:e}: not a finite, non-negative figure of at most {PLAUSIBLE:e}",
            m.name, m.value
        ));
    }
    Ok(())
}

fn plausible(v: f64) -> bool {
    v.is_finite() && (0.0..=PLAUSIBLE).contains(&v)
}

fn at_most(what: &str, n: usize, limit: usize) -> Result<(), String> {
    if n > limit {
        return Err(format!("{what} has {n} entries (at most {limit})"));
    }
    Ok(())
}

/// A name as the report and results.json show it: `[a-z0-9_]`, bounded.
fn name(what: &str, value: &str) -> Result<(), String> {
    let fine = !value.is_empty()
        && value.len() <= NAME_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if fine {
        return Ok(());
    }
    let cut: String = value.chars().take(40).collect();
    Err(format!(
        "{what} `{}` is not a name ([a-z0-9_-], at most {NAME_BYTES} bytes)",
        shown(&cut)
    ))
}

fn text(what: &str, value: &str, limit: usize) -> Result<(), String> {
    if value.len() > limit {
        return Err(format!(
            "{what} is {} bytes long (at most {limit})",
            value.len()
        ));
    }
    if value.chars().any(char::is_control) {
        let cut: String = value.chars().take(40).collect();
        return Err(format!("{what} `{}` holds control characters", shown(&cut)));
    }
    Ok(())
}

fn labels(at: &str, labels: &Labels) -> Result<(), String> {
    at_most(&format!("{at}.labels"), labels.len(), MAX_LABELS)?;
    for (k, v) in labels {
        name(&format!("{at}.labels key"), k)?;
        text(&format!("{at}.labels.{k}"), v, LABEL_BYTES)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::{Aggregate, Direction, unit};

    const OPS: MetricDecl = MetricDecl::declare(
        "ops_per_s",
        unit::OPS_PER_S,
        Direction::Higher,
        Aggregate::Sum,
        "Operations per second.",
    );

    fn output(value: f64) -> WorkerOutput {
        WorkerOutput {
            metrics: vec![OPS.value(value)],
            ..WorkerOutput::default()
        }
    }

    #[test]
    fn a_plausible_done_passes() {
        assert_eq!(problem("s3-bench", &[OPS], &output(1234.5), 80_000), None);
    }

    #[test]
    fn each_absurd_field_is_named() {
        let e = problem("s3-bench", &[OPS], &output(1e308), 1).unwrap();
        assert!(
            e.starts_with("metrics[0].value of `ops_per_s` is 1e308"),
            "{e}"
        );
        let e = problem("s3-bench", &[OPS], &output(-1.0), 1).unwrap();
        assert!(e.contains("is -1e0"), "{e}");
        let e = problem("s3-bench", &[OPS], &output(1.0), 1 << 63).unwrap();
        assert!(e.starts_with("max_rss_kib is 9223372036854775808"), "{e}");
        let mut escaped = output(1.0);
        escaped.metrics[0].name = "ops\x1b]0;pwned\x07".into();
        let e = problem("s3-bench", &[OPS], &escaped, 1).unwrap();
        assert!(
            e.starts_with("metrics[0].name `ops ]0;pwned ` is not a name"),
            "{e}"
        );
        assert!(!e.chars().any(char::is_control), "{e}");
        let mut stray = output(1.0);
        stray.metrics[0].name = "iops".into();
        let e = problem("s3-bench", &[OPS], &stray, 1).unwrap();
        assert!(e.contains("`iops`, which it does not declare"), "{e}");
        let mut noted = output(1.0);
        noted.notes.push("x".repeat(400_000));
        let e = problem("s3-bench", &[OPS], &noted, 1).unwrap();
        assert_eq!(e, "notes[0] is 400000 bytes long (at most 4096)");
        let mut escaped = output(1.0);
        escaped
            .notes
            .push("two\nlines\tand \x1b]0;title\x07".into());
        let e = problem("s3-bench", &[OPS], &escaped, 1).unwrap();
        assert!(e.starts_with("notes[0] `two"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e}");
        escaped.notes[0] = "two\nlines\tand no escape".into();
        assert_eq!(problem("s3-bench", &[OPS], &escaped, 1), None);
        let mut labelled = output(1.0);
        labelled.metrics[0]
            .labels
            .insert("op".into(), "get\x1b[2J".into());
        let e = problem("s3-bench", &[OPS], &labelled, 1).unwrap();
        assert!(e.contains("metrics[0].labels.op"), "{e}");
    }
}
