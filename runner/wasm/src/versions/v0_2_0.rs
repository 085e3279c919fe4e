//! `pipeline:stage@0.2.0`: a metric is declared once. Its `metric-spec`
//! carries unit, direction, rule across hosts and headline mark; a reported
//! value is a name, a number and labels, made into a metric from its
//! declaration here. A value whose name the plugin did not declare keeps no
//! unit, and the engine fails the stage on it (`metric::check`), naming it.

wasmtime::component::bindgen!({
    path: "../../plugins/wit/pipeline-stage@0.2.0",
    world: "stage",
});

super::shared::interface_common!();

/// The 0.2 interface declares everything: values must match in all.
const METRIC_VALUES: Declared = Declared::Fully;

fn declaration(m: wit::MetricSpec) -> MetricDecl {
    MetricDecl::owned(
        m.name,
        m.unit,
        direction(m.direction),
        aggregate(m.aggregate),
        m.headline,
        m.doc,
    )
}

fn aggregate(a: wit::Aggregate) -> pipeline_model::Aggregate {
    use pipeline_model::Aggregate;
    match a {
        wit::Aggregate::Sum => Aggregate::Sum,
        wit::Aggregate::Max => Aggregate::Max,
        wit::Aggregate::Min => Aggregate::Min,
        wit::Aggregate::Mean(weight) => Aggregate::Mean {
            weight: weight.map(Into::into),
        },
        wit::Aggregate::None => Aggregate::None,
    }
}

/// A reported value, made from its declaration. An undeclared name gets no
/// unit or rule of its own: the engine's check refuses it by name.
fn metric(m: wit::Metric, decls: &[MetricDecl]) -> Metric {
    let labels = m.labels.into_iter().collect();
    match decls.iter().find(|d| d.name == m.name) {
        Some(decl) => {
            let mut metric = decl.value(m.value);
            metric.labels = labels;
            metric
        }
        None => Metric {
            aggregate: pipeline_model::Aggregate::None,
            combined: None,
            name: m.name,
            value: m.value,
            unit: String::new(),
            direction: Direction::None,
            labels,
            headline: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, aggregate: wit::Aggregate) -> wit::MetricSpec {
        wit::MetricSpec {
            name: name.to_string(),
            unit: "ms".to_string(),
            direction: wit::Direction::LowerIsBetter,
            aggregate,
            headline: true,
            doc: "Commit latency.".to_string(),
        }
    }

    #[test]
    fn values_are_made_from_their_declarations() {
        let decls = vec![declaration(spec(
            "commit_latency",
            wit::Aggregate::Mean(Some("ops".to_string())),
        ))];
        let m = metric(
            wit::Metric {
                name: "commit_latency".to_string(),
                value: 2.5,
                labels: vec![("osd".to_string(), "0".to_string())],
            },
            &decls,
        );
        assert_eq!(m.unit, "ms");
        assert_eq!(m.direction, Direction::Lower);
        assert_eq!(
            m.aggregate,
            pipeline_model::Aggregate::mean_weighted_by("ops")
        );
        assert!(m.headline);
        assert_eq!(m.labels["osd"], "0");
        pipeline_stage_api::metric::check("p", &decls, METRIC_VALUES, &[m]).unwrap();
    }

    #[test]
    fn an_undeclared_value_is_refused_by_name() {
        let decls = vec![declaration(spec("commit_latency", wit::Aggregate::None))];
        let stray = metric(
            wit::Metric {
                name: "apply_latency".to_string(),
                value: 1.0,
                labels: Vec::new(),
            },
            &decls,
        );
        let e =
            pipeline_stage_api::metric::check("p", &decls, METRIC_VALUES, &[stray]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stage `p` reported the metric `apply_latency`, which it does not declare (it declares: commit_latency)"
        );
    }
}
