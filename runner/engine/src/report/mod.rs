//! Turning results into documents a person reads. One trait, [`Exporter`];
//! Markdown is the one the runner writes into every run folder.

pub mod charts;
pub mod client_hosts;
pub mod environment;
pub mod escape;
pub mod latency_table;
mod markdown;
pub mod versions;

use std::path::{Path, PathBuf};

pub use markdown::MarkdownExporter;

use crate::results::RunResults;

pub const REPORT_FILE: &str = "report.md";

/// Why a report was not written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report template failed on these results (a bug, or results the
    /// template does not expect).
    #[error("cannot render the report: {0}")]
    Render(#[from] minijinja::Error),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub trait Exporter {
    fn export(&self, results: &RunResults) -> Result<String, ReportError>;
}

/// Draws the charts and renders `report.md` into the run folder.
pub fn write_report(results: &RunResults, run_dir: &Path) -> Result<(), ReportError> {
    let exporter = MarkdownExporter {
        charts: charts::write_charts(results, run_dir),
        sweeps: charts::sweeps::write_sweeps(results, run_dir),
        environment: Some(environment::prepare(results, run_dir)),
    };
    let text = exporter.export(results)?;
    let path = run_dir.join(REPORT_FILE);
    // Through a temporary file: on a full disk the old report stays whole.
    let tmp = run_dir.join(".report.md.tmp");
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|source| ReportError::Write { path, source })
}

/// Share of this machine's cores its commands must keep busy, over a
/// stage's wall time, for the stage to count as client-bound.
pub const CLIENT_BOUND_SHARE: f64 = 0.9;

/// "client-bound: the benchmark client used 1.9 of this machine's 2 cores"
/// when the commands a stage ran on this machine used at least 90% of its
/// `cpus` cores over the stage's `duration_s`: its figures then say as much
/// about the client as about the cluster.
pub fn client_bound_note(local_cpu_s: f64, duration_s: f64, cpus: usize) -> Option<String> {
    let usable = duration_s.is_finite() && duration_s > 0.0 && local_cpu_s.is_finite();
    if !usable || cpus == 0 {
        return None;
    }
    let cores_used = local_cpu_s / duration_s;
    (cores_used >= CLIENT_BOUND_SHARE * cpus as f64).then(|| {
        format!(
            "client-bound: the benchmark client used {cores_used:.1} of this machine's {cpus} cores"
        )
    })
}

/// `value unit` for a person (the exact figure stays in results.json):
/// bytes scaled to KiB/MiB/GiB, bit rates to kbit/Mbit/Gbit, times to the
/// unit that reads best (`53.6 ms`, `270 µs`), counts without a unit.
pub fn format_value(value: f64, unit: &str) -> String {
    if let Some(seconds) = time_unit(unit) {
        return format_time(value * seconds);
    }
    let scaled = |suffix: &str| {
        let units = ["", "Ki", "Mi", "Gi", "Ti"];
        let mut v = value;
        let mut i = 0;
        while v.abs() >= 1024.0 && i + 1 < units.len() {
            v /= 1024.0;
            i += 1;
        }
        format!("{} {}B{suffix}", format_number(v), units[i])
    };
    match unit {
        "B" => scaled(""),
        "B/s" => scaled("/s"),
        // Network rates use decimal prefixes, as iperf and link speeds do.
        "bit/s" => {
            let (mut v, mut i) = (value, 0);
            let prefixes = ["", "k", "M", "G", "T"];
            while v.abs() >= 1000.0 && i + 1 < prefixes.len() {
                v /= 1000.0;
                i += 1;
            }
            format!("{} {}bit/s", format_number(v), prefixes[i])
        }
        _ if unit.is_empty() || unit == "count" => format_number(value),
        "%" => format!("{}%", format_number(value)),
        _ => format!("{} {unit}", format_number(value)),
    }
}

/// Seconds per `unit`, for the time units stages use.
fn time_unit(unit: &str) -> Option<f64> {
    match unit {
        "s" => Some(1.0),
        "ms" => Some(1e-3),
        "us" | "µs" => Some(1e-6),
        "ns" => Some(1e-9),
        _ => None,
    }
}

/// A time in seconds in the unit that reads best.
fn format_time(seconds: f64) -> String {
    let abs = seconds.abs();
    let (scale, unit) = if abs >= 1.0 || abs == 0.0 || !abs.is_finite() {
        (1.0, "s")
    } else if abs >= 1e-3 {
        (1e3, "ms")
    } else if abs >= 1e-6 {
        (1e6, "µs")
    } else {
        (1e9, "ns")
    };
    format!("{} {unit}", format_number(seconds * scale))
}

/// Figures as a person reads them: 4 significant digits, no float noise.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    if v == v.trunc() && v.abs() < 1e15 {
        // `-0.0` too: shown as 0.
        return format!("{}", v as i64);
    }
    let abs = v.abs();
    // Very large and very small figures: 4 significant digits in
    // scientific notation (1e300 would otherwise print 301 digits, and
    // 1e-300 would round to 0).
    if !(1e-6..1e15).contains(&abs) {
        let s = format!("{v:.3e}");
        return match s.split_once('e') {
            Some((mantissa, exp)) => {
                let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
                format!("{mantissa}e{exp}")
            }
            None => s,
        };
    }
    let decimals = if abs >= 1000.0 {
        1
    } else if abs >= 100.0 {
        2
    } else if abs >= 1.0 {
        3
    } else {
        // Small values (latencies in seconds): keep 3 significant digits.
        let lead = (-abs.log10()).floor() as usize;
        (lead + 3).min(12)
    };
    let s = format!("{v:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::{client_bound_note, format_number};

    #[test]
    fn client_bound_from_90_percent_of_the_cores() {
        assert_eq!(
            client_bound_note(19.0, 10.0, 2).as_deref(),
            Some("client-bound: the benchmark client used 1.9 of this machine's 2 cores")
        );
        assert_eq!(client_bound_note(17.0, 10.0, 2), None);
        assert!(client_bound_note(3.6, 1.0, 4).is_some());
        assert_eq!(client_bound_note(1.0, 0.0, 2), None);
        assert_eq!(client_bound_note(1.0, 1.0, 0), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(format_number(312.933), "312.93");
        assert_eq!(format_number(78.0), "78");
        assert_eq!(format_number(0.0511237), "0.0511");
        assert_eq!(format_number(18812.345), "18812.3");
        assert_eq!(format_number(1.5), "1.5");
        assert_eq!(super::format_value(24017836428.2, "bit/s"), "24.018 Gbit/s");
        assert_eq!(super::format_value(3.0 * 1048576.0, "B/s"), "3 MiB/s");
        // Times in the unit that reads best, whatever unit the stage used.
        assert_eq!(super::format_value(0.0536, "s"), "53.6 ms");
        assert_eq!(super::format_value(115933.2, "us"), "115.93 ms");
        assert_eq!(super::format_value(270.0, "us"), "270 µs");
        assert_eq!(super::format_value(850.0, "ns"), "850 ns");
        assert_eq!(super::format_value(90.5, "s"), "90.5 s");
        assert_eq!(super::format_value(0.0, "s"), "0 s");
        assert_eq!(super::format_value(56.0, "count"), "56");
        assert_eq!(super::format_value(12.5, "%"), "12.5%");
        assert_eq!(super::format_value(1504818010.6, "B/s"), "1.401 GiB/s");
    }

    #[test]
    fn extreme_numbers_are_shown_sensibly() {
        assert_eq!(format_number(1e300), "1e300");
        assert_eq!(format_number(-1.234567e300), "-1.235e300");
        assert_eq!(format_number(1e-300), "1e-300");
        assert_eq!(format_number(2.5e-7), "2.5e-7");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(f64::MAX), "1.798e308");
        assert_eq!(format_number(f64::MIN_POSITIVE), "2.225e-308");
        assert_eq!(format_number(1e15), "1e15");
        assert_eq!(format_number(0.000001), "0.000001");
        assert_eq!(super::format_value(1e300, "B"), "9.095e287 TiB");
    }
}
