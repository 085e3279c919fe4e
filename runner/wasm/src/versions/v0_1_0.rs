//! `pipeline:stage@0.1.0`: the generated bindings, the `host` functions, and
//! conversions between its WIT types and the engine's.

wasmtime::component::bindgen!({
    path: "../../plugins/wit/pipeline-stage@0.1.0",
    world: "stage",
});

super::shared::interface_common!();

/// The 0.1 interface declares name, unit and doc: each value brings its own
/// direction and headline mark.
const METRIC_VALUES: Declared = Declared::WithoutDirection;

/// A 0.1 declaration with the rule 0.1 implied: inferred from the unit
/// (`sum` for rates, else `none`), as the host made its values.
fn declaration(m: wit::MetricSpec) -> MetricDecl {
    let rule = pipeline_model::Aggregate::inferred_from_unit(&m.unit);
    MetricDecl::owned(m.name, m.unit, Direction::None, rule, false, m.doc)
}

/// A reported value: everything comes with it, the rule as 0.1 implied it.
fn metric(m: wit::Metric, _decls: &[MetricDecl]) -> Metric {
    Metric {
        aggregate: pipeline_model::Aggregate::inferred_from_unit(&m.unit),
        combined: None,
        name: m.name,
        value: m.value,
        unit: m.unit,
        direction: direction(m.direction),
        labels: m.labels.into_iter().collect(),
        headline: m.headline,
    }
}

/// The value conversions at the WIT boundary, driven by arbitrary bytes:
/// the fuzz target `wasm_values` (fuzz/). Whatever a guest returns must
/// convert or be refused with a message, never panic, and what converts
/// must leave only finite numbers in what results.json will hold.
#[cfg(feature = "fuzzing")]
pub fn fuzz_conversions(data: &[u8]) {
    let mut r = FuzzBytes(data);
    let description_in = wit::Description {
        name: r.text(),
        version: r.text(),
        summary: r.text(),
        params: r.list(|r| wit::ParamSpec {
            name: r.text(),
            type_: r.param_type(),
            required: r.flag(),
            default: r.flag().then(|| r.value()),
            doc: r.text(),
        }),
        outputs: r.list(|r| wit::OutputSpec {
            name: r.text(),
            doc: r.text(),
        }),
        metrics: r.list(|r| wit::MetricSpec {
            name: r.text(),
            unit: r.text(),
            doc: r.text(),
        }),
        capabilities: r.list(|r| match r.byte() % 3 {
            0 => wit::Capability::Exec,
            1 => wit::Capability::Files,
            _ => wit::Capability::Http,
        }),
    };
    if let Ok(d) = description(description_in) {
        // A default that converted goes back to the guest as its type says.
        for p in &d.params {
            if let Some(default) = &p.default {
                let _ = to_value(&p.ty, default);
            }
        }
    }
    let out = wit::StageOutput {
        metrics: r.list(|r| wit::Metric {
            name: r.text(),
            value: r.number(),
            unit: r.text(),
            direction: r.direction(),
            labels: r.list(|r| (r.text(), r.text())),
            headline: r.flag(),
        }),
        series: r.list(|r| wit::Series {
            name: r.text(),
            unit: r.text(),
            direction: r.direction(),
            labels: r.list(|r| (r.text(), r.text())),
            points: r.list(|r| (r.number(), r.number())),
        }),
        outputs: r.list(|r| wit::Entry {
            name: r.text(),
            value: r.value(),
        }),
        artifacts: r.list(|r| wit::Artifact {
            name: r.text(),
            contents: r.text().into_bytes(),
        }),
        environment: r.list(|r| wit::Entry {
            name: r.text(),
            value: r.value(),
        }),
        skipped: r.flag().then(|| r.text()),
    };
    if let Ok(mut converted) = run_output(out, &[]) {
        converted.output.drop_non_finite();
        let finite = |v: f64| v.is_finite();
        assert!(converted.output.metrics.iter().all(|m| finite(m.value)));
        assert!(
            converted
                .output
                .series
                .iter()
                .all(|s| s.points.iter().all(|[t, v]| finite(*t) && finite(*v)))
        );
        // JSON numbers cannot be NaN: what converted serializes as it is.
        serde_json::to_string(&converted.output.outputs).expect("outputs serialize");
        serde_json::to_string(&converted.output.environment).expect("facts serialize");
    }
}

/// Arbitrary WIT values from bytes; runs out into empty values.
#[cfg(feature = "fuzzing")]
struct FuzzBytes<'a>(&'a [u8]);

#[cfg(feature = "fuzzing")]
impl FuzzBytes<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
    fn flag(&mut self) -> bool {
        self.byte() % 2 == 1
    }
    fn word(&mut self) -> u64 {
        (0..8).fold(0u64, |w, _| (w << 8) | u64::from(self.byte()))
    }
    /// Any f64, NaN and the infinities included.
    fn number(&mut self) -> f64 {
        f64::from_bits(self.word())
    }
    fn text(&mut self) -> String {
        let len = usize::from(self.byte() % 32).min(self.0.len());
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8_lossy(head).into_owned()
    }
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let n = usize::from(self.byte() % 6);
        (0..n).map(|_| item(self)).collect()
    }
    fn scalar(&mut self) -> wit::ScalarType {
        match self.byte() % 6 {
            0 => wit::ScalarType::Text,
            1 => wit::ScalarType::Integer,
            2 => wit::ScalarType::Number,
            3 => wit::ScalarType::Boolean,
            4 => wit::ScalarType::Duration,
            _ => wit::ScalarType::Size,
        }
    }
    fn param_type(&mut self) -> wit::ParamType {
        match self.byte() % 5 {
            0 => wit::ParamType::Scalar(self.scalar()),
            1 => wit::ParamType::Choice(self.list(Self::text)),
            2 => wit::ParamType::List(self.scalar()),
            3 => wit::ParamType::Map,
            _ => wit::ParamType::Any,
        }
    }
    fn direction(&mut self) -> wit::Direction {
        match self.byte() % 3 {
            0 => wit::Direction::HigherIsBetter,
            1 => wit::Direction::LowerIsBetter,
            _ => wit::Direction::Neutral,
        }
    }
    fn value(&mut self) -> wit::Value {
        match self.byte() % 9 {
            0 => wit::Value::Text(self.text()),
            1 => wit::Value::Integer(self.word() as i64),
            2 => wit::Value::Number(self.number()),
            3 => wit::Value::Boolean(self.flag()),
            4 => wit::Value::TextList(self.list(Self::text)),
            5 => wit::Value::IntegerList(self.list(|r| r.word() as i64)),
            6 => wit::Value::NumberList(self.list(Self::number)),
            7 => wit::Value::BooleanList(self.list(Self::flag)),
            _ => wit::Value::Json(self.text()),
        }
    }
}

#[cfg(all(test, feature = "fuzzing"))]
mod fuzzing_tests {
    /// The fuzz entry point itself holds on plain pseudo-random inputs
    /// (a smoke test of the harness; the fuzzer does the real search).
    #[test]
    fn conversions_hold_on_pseudo_random_bytes() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for len in 0..2000 {
            let bytes: Vec<u8> = (0..len % 512)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            super::fuzz_conversions(&bytes);
        }
    }
}
