//! The host watch's series as charts beside a stage's own: per host, its
//! CPU (busiest core, mean of the cores, iowait), its busiest block devices'
//! utilisation and its busiest interfaces' receive and send rates, second
//! by second on the stage's time axis, so a dip in a figure can be read
//! against what the hosts were doing.

use crate::host_watch::HostWatch;

use super::axis;
use super::svg::{self, Line};

/// At most this many interfaces per host chart (the busiest by bytes moved).
const MAX_NICS: usize = 3;
/// At most this many block devices per host chart (the busiest by time busy).
const MAX_DISKS: usize = 3;

/// `(file stem, title, SVG)` of each chart for one host's watch; none for a
/// watch of fewer than two samples.
pub fn charts(watch: &HostWatch) -> Vec<(String, String, String)> {
    if watch.samples.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let at = |f: &dyn Fn(&crate::host_watch::HostSample) -> f64| -> Vec<[f64; 2]> {
        watch.samples.iter().map(|s| [s.t_s, f(s)]).collect()
    };
    let cpu = [
        Line {
            label: "busiest core".into(),
            points: at(&|s| s.cpu_busy_pct.iter().copied().fold(0.0, f64::max)),
        },
        Line {
            label: "mean of the cores".into(),
            points: at(&|s| {
                if s.cpu_busy_pct.is_empty() {
                    f64::NAN
                } else {
                    s.cpu_busy_pct.iter().sum::<f64>() / s.cpu_busy_pct.len() as f64
                }
            }),
        },
        Line {
            label: "iowait".into(),
            points: at(&|s| s.cpu_iowait_pct),
        },
    ];
    let title = format!("CPU busy on {}", watch.host);
    out.push((
        format!("host-{}-cpu", watch.host),
        format!("{title} per second, %"),
        draw(&title, &cpu, 0.0, 100.0, pipeline_model::unit::PERCENT),
    ));

    // A host of the same machine as another reads the same diskstats: its
    // disks are charted once, with that host's.
    if watch.same_machine_as.is_none() {
        out.extend(disk_chart(watch));
    }

    let mut nics: Vec<(&String, f64)> = Vec::new();
    for s in &watch.samples {
        for (name, n) in &s.nics {
            match nics.iter_mut().find(|(k, _)| *k == name) {
                Some((_, total)) => *total += n.rx_bytes_per_s + n.tx_bytes_per_s,
                None => nics.push((name, n.rx_bytes_per_s + n.tx_bytes_per_s)),
            }
        }
    }
    nics.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let mut lines = Vec::new();
    for (name, _) in nics.iter().take(MAX_NICS) {
        for (verb, rx) in [("received", true), ("sent", false)] {
            lines.push(Line {
                label: format!("{name} {verb}"),
                points: at(&|s| {
                    s.nics.get(*name).map_or(0.0, |n| {
                        8.0 * if rx {
                            n.rx_bytes_per_s
                        } else {
                            n.tx_bytes_per_s
                        }
                    })
                }),
            });
        }
    }
    let top = lines
        .iter()
        .flat_map(|l| &l.points)
        .map(|p| p[1])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if top > 0.0 {
        let title = format!("network on {}", watch.host);
        out.push((
            format!("host-{}-network", watch.host),
            format!("{title} per second, bit/s"),
            draw(&title, &lines, 0.0, top, pipeline_model::unit::BITS_PER_S),
        ));
    }
    out
}

/// The utilisation of the host's busiest block devices (none when no
/// device was busy).
fn disk_chart(watch: &HostWatch) -> Option<(String, String, String)> {
    let mut disks: Vec<(&String, f64)> = Vec::new();
    for s in &watch.samples {
        for (name, d) in &s.disks {
            match disks.iter_mut().find(|(k, _)| *k == name) {
                Some((_, total)) => *total += d.util_pct,
                None => disks.push((name, d.util_pct)),
            }
        }
    }
    disks.retain(|(_, total)| *total > 0.0);
    disks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let lines: Vec<Line> = disks
        .iter()
        .take(MAX_DISKS)
        .map(|(name, _)| Line {
            label: format!("{name} utilised"),
            points: watch
                .samples
                .iter()
                .map(|s| [s.t_s, s.disks.get(*name).map_or(0.0, |d| d.util_pct)])
                .collect(),
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let title = format!("disks of {}", watch.host);
    Some((
        format!("host-{}-disk", watch.host),
        format!("{title} per second, % of the time busy"),
        draw(&title, &lines, 0.0, 100.0, pipeline_model::unit::PERCENT),
    ))
}

/// A chart of per-second `lines` on the stage's time axis (from 0 s), its
/// y axis from `lo` to `hi` in `unit`: the host and OSD charts' shape.
pub(super) fn draw(title: &str, lines: &[Line], lo: f64, hi: f64, unit: &str) -> String {
    let t1 = lines
        .iter()
        .flat_map(|l| &l.points)
        .map(|p| p[0])
        .fold(0.0, f64::max);
    let x = axis::axis(0.0, t1, "s");
    let y = axis::axis(lo, hi, unit);
    svg::render(&svg::Chart {
        title,
        x: &x,
        y: &y,
        x_name: "time",
        lines,
        rings: &[],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_watch::{DiskSample, HostSample, NicSample};

    fn sample(t_s: f64, busy: &[f64], rx: f64) -> HostSample {
        let mut s = HostSample {
            t_s,
            cpu_busy_pct: busy.to_vec(),
            ..HostSample::default()
        };
        s.nics.insert(
            "eth0".into(),
            NicSample {
                rx_bytes_per_s: rx,
                tx_bytes_per_s: 0.0,
                ..NicSample::default()
            },
        );
        s
    }

    #[test]
    fn a_hosts_cpu_and_network_each_a_chart_with_the_name_escaped() {
        let watch = HostWatch {
            host: "<client&1>".into(),
            samples: vec![
                sample(1.0, &[90.0, 10.0], 1e6),
                sample(2.0, &[95.0, 5.0], 2e6),
            ],
            ..HostWatch::default()
        };
        let charts = charts(&watch);
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].1, "CPU busy on <client&1> per second, %");
        for (_, _, svg) in &charts {
            assert!(
                svg.contains("&lt;client&amp;1&gt;") && !svg.contains("<client"),
                "{svg}"
            );
        }
        assert!(charts[1].2.contains("eth0 received"));

        // Busy disks get a chart of their own, the busiest first; a host of
        // the same machine as another leaves its disks to that host's.
        let mut busy = watch.clone();
        for (i, s) in busy.samples.iter_mut().enumerate() {
            for (disk, util) in [("loop3", 99.0), ("vda", 20.0 * i as f64), ("idle", 0.0)] {
                s.disks.insert(
                    disk.into(),
                    DiskSample {
                        util_pct: util,
                        ..DiskSample::default()
                    },
                );
            }
        }
        let with_disks = super::charts(&busy);
        assert_eq!(with_disks.len(), 3);
        assert_eq!(with_disks[1].0, "host-<client&1>-disk");
        let svg = &with_disks[1].2;
        assert!(
            svg.contains("loop3 utilised") && svg.contains("vda utilised"),
            "{svg}"
        );
        assert!(!svg.contains("idle"), "{svg}");
        busy.same_machine_as = Some("local".into());
        assert_eq!(super::charts(&busy).len(), 2);
        // One sample: nothing to draw.
        let short = HostWatch {
            samples: vec![sample(1.0, &[1.0], 0.0)],
            ..HostWatch::default()
        };
        assert!(super::charts(&short).is_empty());
    }
}
