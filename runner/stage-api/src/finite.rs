//! Only finite numbers reach the results: JSON has no NaN or infinity
//! (serde writes them as `null`, which results.json's own schema then
//! refuses, and `pipeline report` can no longer read the run). A stage
//! that computes a NaN (a rate over zero seconds, a parser reading `-nan`)
//! loses that figure, with a note saying so, rather than the run its report.

use crate::stage::StageOutput;

impl StageOutput {
    /// Removes metrics whose value is not finite and series points with a
    /// coordinate that is not; returns one note per metric and per series
    /// affected. Called once on every stage's output before it is recorded.
    pub fn drop_non_finite(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        self.metrics.retain(|m| {
            let keep = m.value.is_finite();
            if !keep {
                notes.push(format!(
                    "metric `{}` was dropped: its value {} is not a finite number",
                    m.display_name(),
                    m.value
                ));
            }
            keep
        });
        for s in &mut self.series {
            let before = s.points.len();
            s.points.retain(|[t, v]| t.is_finite() && v.is_finite());
            let dropped = before - s.points.len();
            if dropped > 0 {
                notes.push(format!(
                    "series `{}`: {dropped} point(s) with a value that is not a finite number were dropped",
                    s.name
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use pipeline_model::{Direction, Metric, Series};

    use crate::stage::StageOutput;

    #[test]
    fn non_finite_figures_are_dropped_with_a_note() {
        let mut series = Series::new("lat", "s", Direction::Lower);
        series.points = vec![
            [0.0, 1.0],
            [1.0, f64::NAN],
            [f64::INFINITY, 2.0],
            [2.0, 3.0],
        ];
        let mut out = StageOutput {
            metrics: vec![
                Metric::new("ok", 1.0, "s", Direction::Lower),
                Metric::new("nan", f64::NAN, "s", Direction::Lower),
                Metric::new("inf", f64::NEG_INFINITY, "s", Direction::Lower),
            ],
            series: vec![series],
            ..StageOutput::default()
        };
        let notes = out.drop_non_finite();
        assert_eq!(
            notes,
            [
                "metric `nan` was dropped: its value NaN is not a finite number",
                "metric `inf` was dropped: its value -inf is not a finite number",
                "series `lat`: 2 point(s) with a value that is not a finite number were dropped",
            ]
        );
        assert_eq!(out.metrics.len(), 1);
        assert_eq!(out.series[0].points, [[0.0, 1.0], [2.0, 3.0]]);
        assert!(out.drop_non_finite().is_empty());
    }
}
