//! The cluster watch's OSD series as charts beside a stage's own: each of
//! the busiest OSDs' ops per second and the mean latency of those ops, on
//! the stage's time axis, so one OSD that lagged (or a cache that flooded
//! them all) shows against the figure it shaped.

use crate::cluster_watch::ClusterWatch;
use crate::cluster_watch::osds::OsdSample;

use super::svg::Line;

/// At most this many OSDs per chart (the busiest by ops over the stage).
const MAX_OSDS: usize = 6;

fn ops(o: &OsdSample) -> f64 {
    o.reads_per_s + o.writes_per_s + o.rmw_per_s
}

/// The mean latency of the reads and writes one OSD completed in a second,
/// each weighed by its count (a mean of their totals, not of their means).
fn latency(o: &OsdSample) -> f64 {
    let mut parts = Vec::new();
    if let Some(ms) = o.read_latency_ms {
        parts.push((ms, o.reads_per_s));
    }
    if let Some(ms) = o.write_latency_ms {
        parts.push((ms, o.writes_per_s));
    }
    let n: f64 = parts.iter().map(|(_, n)| n).sum();
    if n > 0.0 {
        parts.iter().map(|(ms, n)| ms * n).sum::<f64>() / n
    } else {
        f64::NAN
    }
}

/// `(file stem, title, SVG)` of the OSD charts of one stage; none when the
/// OSDs were not read in at least two seconds or did nothing.
pub fn charts(watch: &ClusterWatch) -> Vec<(String, String, String)> {
    let timed: Vec<_> = watch
        .samples
        .iter()
        .filter(|s| !s.osd_ops.is_empty())
        .collect();
    if timed.len() < 2 {
        return Vec::new();
    }
    let mut busiest: Vec<(u32, f64)> = Vec::new();
    for s in &timed {
        for (&osd, o) in &s.osd_ops {
            match busiest.iter_mut().find(|(id, _)| *id == osd) {
                Some((_, total)) => *total += ops(o),
                None => busiest.push((osd, ops(o))),
            }
        }
    }
    busiest.retain(|(_, total)| *total > 0.0);
    if busiest.is_empty() {
        return Vec::new();
    }
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    busiest.truncate(MAX_OSDS);
    let series = |f: &dyn Fn(&OsdSample) -> f64| -> Vec<Line> {
        busiest
            .iter()
            .map(|(osd, _)| Line {
                label: format!("osd.{osd}"),
                points: timed
                    .iter()
                    .map(|s| [s.t_s, s.osd_ops.get(osd).map_or(f64::NAN, f)])
                    .collect(),
            })
            .collect()
    };
    let mut out = Vec::new();
    for (stem, title, lines, unit) in [
        (
            "cluster-osd-ops",
            "ops of each OSD",
            series(&ops),
            pipeline_model::unit::OPS_PER_S,
        ),
        (
            "cluster-osd-latency",
            "mean op latency of each OSD",
            series(&latency),
            pipeline_model::unit::MILLISECONDS,
        ),
    ] {
        let top = lines
            .iter()
            .flat_map(|l| &l.points)
            .map(|p| p[1])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        if top > 0.0 {
            out.push((
                stem.to_string(),
                format!("{title} per second, {unit}"),
                super::host_charts::draw(title, &lines, 0.0, top, unit),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_watch::ClusterSample;

    fn second(t_s: f64, osds: &[(u32, f64, f64)]) -> ClusterSample {
        ClusterSample {
            t_s,
            osd_ops: osds
                .iter()
                .map(|&(osd, writes, ms)| {
                    (
                        osd,
                        OsdSample {
                            writes_per_s: writes,
                            write_latency_ms: (writes > 0.0).then_some(ms),
                            ..OsdSample::default()
                        },
                    )
                })
                .collect(),
            ..ClusterSample::default()
        }
    }

    #[test]
    fn each_busy_osd_a_line_of_ops_and_of_latency() {
        let watch = ClusterWatch {
            samples: vec![
                second(1.0, &[]),
                second(2.0, &[(0, 100.0, 2.0), (1, 0.0, 0.0), (2, 50.0, 9.0)]),
                second(3.0, &[(0, 120.0, 3.0), (1, 0.0, 0.0), (2, 40.0, 11.0)]),
            ],
            ..ClusterWatch::default()
        };
        let charts = charts(&watch);
        let stems: Vec<&str> = charts.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(stems, ["cluster-osd-ops", "cluster-osd-latency"]);
        let svg = &charts[0].2;
        assert!(svg.contains("osd.0") && svg.contains("osd.2"), "{svg}");
        assert!(!svg.contains("osd.1"), "an idle OSD is not drawn: {svg}");
        // Too few seconds with OSD readings draw nothing.
        let short = ClusterWatch {
            samples: vec![second(1.0, &[(0, 100.0, 2.0)])],
            ..ClusterWatch::default()
        };
        assert!(super::charts(&short).is_empty());
    }
}
