//! Axes for the charts: units brought to one base (so `bandwidth` in MiB/s
//! and in B/s share a scale), "nice" ticks, and tick labels in the unit an
//! operator reads (MiB/s, ms, Gbit/s), the same conventions as
//! [`format_value`](crate::report::format_value).

use crate::report::format_number;

/// Values beyond this are not drawn: the span of an axis must stay finite.
pub const LARGEST: f64 = 1e300;

/// The base unit `unit` converts to and the factor to get there
/// (`MiB/s` is `B/s` times 2^20, `us` is `s` times 1e-6); an unknown unit is
/// its own base.
pub fn to_base(unit: &str) -> (String, f64) {
    const KI: f64 = 1024.0;
    let binary = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let decimal = ["", "k", "M", "G", "T", "P"];
    for (base, rest) in [("B/s", "B/s"), ("B", "B")] {
        for (i, p) in binary.iter().enumerate() {
            if unit == format!("{p}{rest}") {
                return (base.into(), KI.powi(i as i32));
            }
        }
        for (i, p) in decimal.iter().enumerate().skip(1) {
            if unit == format!("{p}{rest}") {
                return (base.into(), 1000f64.powi(i as i32));
            }
        }
    }
    for (i, p) in decimal.iter().enumerate() {
        if unit == format!("{p}bit/s") || unit == format!("{p}bps") {
            return ("bit/s".into(), 1000f64.powi(i as i32));
        }
    }
    match unit {
        "s" => ("s".into(), 1.0),
        "ms" => ("s".into(), 1e-3),
        "us" | "µs" | "μs" => ("s".into(), 1e-6),
        "ns" => ("s".into(), 1e-9),
        other => (other.into(), 1.0),
    }
}

/// The divisor and unit shown for values of a base unit whose largest
/// magnitude is `largest`: `B/s` in KiB/MiB/GiB steps, `bit/s` in
/// k/M/G steps, seconds as s/ms/µs/ns.
fn display_unit(unit: &str, largest: f64) -> (f64, String) {
    let stepped = |step: f64, prefixes: &[&str], rest: &str| {
        let (mut div, mut i) = (1.0, 0);
        while largest / div >= step && i + 1 < prefixes.len() {
            div *= step;
            i += 1;
        }
        (div, format!("{}{rest}", prefixes[i]))
    };
    match unit {
        "B/s" => stepped(1024.0, &["", "Ki", "Mi", "Gi", "Ti", "Pi"], "B/s"),
        "B" => stepped(1024.0, &["", "Ki", "Mi", "Gi", "Ti", "Pi"], "B"),
        "bit/s" => stepped(1000.0, &["", "k", "M", "G", "T", "P"], "bit/s"),
        "s" => match largest {
            l if l >= 1.0 || l == 0.0 => (1.0, "s".into()),
            l if l >= 1e-3 => (1e-3, "ms".into()),
            l if l >= 1e-6 => (1e-6, "µs".into()),
            _ => (1e-9, "ns".into()),
        },
        other => (1.0, other.to_string()),
    }
}

/// One axis: its span (in base units) and its ticks with their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    /// `(value in base units, label)`, ascending.
    pub ticks: Vec<(f64, String)>,
    /// The unit the tick labels are in (e.g. `MiB/s`), empty for none.
    pub unit: String,
}

/// An axis covering `lo..=hi` (finite, in base units of `unit`), widened
/// to round ticks.
pub fn axis(lo: f64, hi: f64, unit: &str) -> Axis {
    let (lo, hi) = (lo.clamp(-LARGEST, LARGEST), hi.clamp(-LARGEST, LARGEST));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    let (div, shown) = display_unit(unit, lo.abs().max(hi.abs()));
    let (mut l, mut h) = (lo / div, hi / div);
    if h - l <= f64::EPSILON * h.abs().max(l.abs()) {
        // One value: give it room around it (or a unit span at zero).
        let pad = if h == 0.0 { 1.0 } else { h.abs() * 0.1 };
        l -= pad;
        h += pad;
        if lo >= 0.0 && l < 0.0 {
            l = 0.0;
        }
    }
    let step = nice_step((h - l) / 5.0);
    let first = (l / step).floor();
    let last = (h / step).ceil();
    // Bounded: the span is at most ~6 steps of a rounded step.
    let count = ((last - first) as usize).min(20);
    let values: Vec<f64> = (0..=count).map(|i| (first + i as f64) * step).collect();
    let labels = tick_labels(&values);
    Axis {
        min: values[0] * div,
        max: values[values.len() - 1] * div,
        ticks: values.iter().map(|v| v * div).zip(labels).collect(),
        unit: shown,
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Tick labels: plain figures, or scientific notation when the figures
/// would be too long or all round to zero.
fn tick_labels(values: &[f64]) -> Vec<String> {
    let largest = values.iter().fold(0f64, |m, v| m.max(v.abs()));
    let scientific = largest >= 1e7 || (largest > 0.0 && largest < 1e-3);
    values
        .iter()
        .map(|&v| {
            if v == 0.0 {
                "0".to_string()
            } else if scientific {
                let s = format!("{v:.2e}");
                // 2.50e7 -> 2.5e7
                match s.split_once('e') {
                    Some((m, e)) if m.contains('.') => {
                        format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
                    }
                    _ => s,
                }
            } else {
                format_number(v)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_share_a_base() {
        assert_eq!(to_base("MiB/s"), ("B/s".to_string(), 1048576.0));
        assert_eq!(to_base("B/s"), ("B/s".to_string(), 1.0));
        assert_eq!(to_base("us"), ("s".to_string(), 1e-6));
        assert_eq!(to_base("Gbit/s"), ("bit/s".to_string(), 1e9));
        assert_eq!(to_base("IOPS"), ("IOPS".to_string(), 1.0));
    }

    fn labels(a: &Axis) -> Vec<&str> {
        a.ticks.iter().map(|(_, l)| l.as_str()).collect()
    }

    #[test]
    fn bandwidth_in_mib_per_second() {
        let a = axis(0.0, 1604.0 * 1048576.0, "B/s");
        assert_eq!(a.unit, "GiB/s");
        assert_eq!(labels(&a), ["0", "0.5", "1", "1.5", "2"]);
        let a = axis(0.0, 18.0 * 1048576.0, "B/s");
        assert_eq!(a.unit, "MiB/s");
        assert_eq!(labels(&a), ["0", "5", "10", "15", "20"]);
        assert_eq!(a.max, 20.0 * 1048576.0);
    }

    #[test]
    fn latency_in_the_unit_that_reads_best() {
        let a = axis(0.0, 0.0401, "s");
        assert_eq!(a.unit, "ms");
        assert_eq!(labels(&a), ["0", "10", "20", "30", "40", "50"]);
        assert_eq!(axis(0.0, 310e-6, "s").unit, "µs");
    }

    #[test]
    fn degenerate_and_extreme_spans_stay_finite_and_few() {
        for (lo, hi) in [
            (0.0, 0.0),
            (5.0, 5.0),
            (-3.0, -3.0),
            (0.0, 1e300),
            (-1e300, 1e300),
            (1e-300, 2e-300),
            (0.0, f64::MAX),
        ] {
            let a = axis(lo, hi, "IOPS");
            assert!(
                a.min.is_finite() && a.max.is_finite() && a.min < a.max,
                "{lo} {hi}: {a:?}"
            );
            assert!((2..=21).contains(&a.ticks.len()), "{lo} {hi}: {a:?}");
            assert!(
                a.min <= lo.max(-LARGEST) && a.max >= hi.min(LARGEST),
                "{a:?}"
            );
        }
        assert_eq!(labels(&axis(0.0, 3e9, "IOPS")), ["0", "1e9", "2e9", "3e9"]);
    }
}
