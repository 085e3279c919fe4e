//! What a knee search (a stage's `search:`) needs of the load: its target
//! rate is `rate`, and a step's figures are its measured phase's.

use pipeline_model::unit;
use pipeline_stage_api::params::Params;
use pipeline_stage_api::rate_search::{RateSearch, RateSearchSpec, always_searchable};

pub const SPEC: RateSearchSpec = RateSearchSpec {
    rate_unit: unit::OPS_PER_S,
    achieved: &["ops_per_s"],
    completed: &["ops"],
    errors: &["errors"],
    median: &["latency_p50"],
    latency_from: "each request's intended start in the fixed schedule (`rate`), so time spent waiting for a free slot counts (coordinated omission corrected)",
};

pub fn rate_search() -> RateSearch {
    RateSearch {
        spec: SPEC,
        set_rate,
        check: always_searchable,
    }
}

fn set_rate(params: &mut Params, rate: f64) -> f64 {
    params.insert("rate".into(), serde_json::json!(rate));
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_loads_rate() {
        let mut p = Params::new();
        p.insert("rate".into(), serde_json::json!(10.0));
        assert_eq!(set_rate(&mut p, 250.0), 250.0);
        let c: super::super::LoadConfig =
            serde_json::from_value(serde_json::Value::Object(p)).unwrap();
        assert_eq!(c.rate, Some(250.0));
        assert_eq!(c.per_host(2).rate, Some(125.0));
    }
}
