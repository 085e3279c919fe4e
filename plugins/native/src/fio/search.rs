//! What a knee search (a stage's `search:`) needs of fio: the target rate
//! becomes each job's `rate_iops` (the total shared over clients × numjobs,
//! and over reads and writes by `rwmixread` in a mixed job), and a step's
//! figures are the whole stage's (`client=all`, `job=all`).

use pipeline_model::unit;
use pipeline_stage_api::params::Params;
use pipeline_stage_api::rate_search::{RateSearch, RateSearchSpec};
use serde_json::{Map, Value};

pub const SPEC: RateSearchSpec = RateSearchSpec {
    rate_unit: unit::IOPS,
    achieved: &["read_iops", "write_iops"],
    completed: &["read_ios", "write_ios"],
    errors: &[],
    median: &["read_clat_p50", "write_clat_p50"],
    // fio's own schedule: an I/O's latency runs from its submission to the
    // engine, and when fio falls behind its `rate_iops` schedule it issues
    // at once to catch up; the time an I/O waited for a free iodepth slot
    // is not counted. A step that falls behind therefore fails (the
    // engine's schedule check) instead of showing flattering latencies.
    latency_from: "the I/O's submission to fio's engine (fio's completion latency); fio does not count time spent waiting for a free iodepth slot, so a step that fell behind its schedule fails rather than being trusted",
};

pub fn rate_search() -> RateSearch {
    RateSearch {
        spec: SPEC,
        set_rate,
        check,
    }
}

/// The share of I/Os that are reads, from `rw` and `rwmixread` /
/// `rwmixwrite` (fio's defaults: `rw=read`, a 50/50 mix). `None` for a
/// pattern whose rate the engine does not set (trims).
fn read_share(options: &Map<String, Value>) -> Option<f64> {
    let text = |k: &str| {
        options
            .get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
    };
    let rw = text("rw")
        .or_else(|| text("readwrite"))
        .unwrap_or_else(|| "read".into());
    // `randread:8` (an offset modifier) reads as randread.
    let pattern = rw.split(':').next().unwrap_or_default().trim().to_string();
    let mix = || {
        let read = text("rwmixread").and_then(|v| v.trim().parse::<f64>().ok());
        let write = text("rwmixwrite").and_then(|v| v.trim().parse::<f64>().ok());
        read.or(write.map(|w| 100.0 - w))
            .unwrap_or(50.0)
            .clamp(0.0, 100.0)
            / 100.0
    };
    match pattern.as_str() {
        "read" | "randread" => Some(1.0),
        "write" | "randwrite" => Some(0.0),
        "rw" | "readwrite" | "randrw" => Some(mix()),
        _ => None,
    }
}

fn whole(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Each job's `rate_iops`; returns the total the jobs are held to (fio
/// takes whole IOPS per job, at least one).
fn set_rate(params: &mut Params, rate: f64) -> f64 {
    let clients = whole(params.get("clients")).unwrap_or(1).max(1);
    let options = params
        .entry("options")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(options) = options else {
        return rate; // refused by `check` before the run
    };
    let jobs = (clients * whole(options.get("numjobs")).unwrap_or(1).max(1)) as f64;
    let reads = read_share(options).unwrap_or(1.0);
    let per_job = |share: f64| {
        if share <= 0.0 {
            0.0
        } else {
            (rate * share / jobs).round().max(1.0)
        }
    };
    let (read, write) = (per_job(reads), per_job(1.0 - reads));
    // One value limits reads and writes alike; a mix needs both.
    let value = match (read > 0.0, write > 0.0) {
        (true, true) => format!("{read},{write}"),
        (true, false) => format!("{read}"),
        _ => format!("{write}"),
    };
    options.insert("rate_iops".into(), Value::String(value));
    (read + write) * jobs
}

/// A job file or a trim pattern: nothing the engine can set a rate in.
fn check(params: &Params) -> Vec<(String, String)> {
    let mut p = Vec::new();
    if params.get("job_file").is_some_and(|v| !v.is_null()) {
        p.push((
            "job_file".into(),
            "is a file the rate cannot be written into; give the job as inline `options`".into(),
        ));
    }
    if let Some(Value::Object(options)) = params.get("options") {
        if read_share(options).is_none() {
            p.push((
                "options.rw".into(),
                "must be read, randread, write, randwrite, rw, readwrite or randrw".into(),
            ));
        }
        if options.get("numjobs").is_some() && whole(options.get("numjobs")).is_none() {
            p.push(("options.numjobs".into(), "must be a whole number".into()));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Params {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_total_is_shared_over_clients_and_jobs() {
        let mut p = params(json!({"clients": 2, "options": {"rw": "randread", "numjobs": "2"}}));
        assert_eq!(set_rate(&mut p, 1000.0), 1000.0);
        assert_eq!(p["options"]["rate_iops"], json!("250"));
        // Whole IOPS per job: 1001 / 4 rounds to 250 each, 1000 in all.
        assert_eq!(set_rate(&mut p, 1001.0), 1000.0);
        assert_eq!(set_rate(&mut p, 1.0), 4.0, "at least one per job");
    }

    #[test]
    fn a_mix_is_rated_per_direction() {
        let mut p = params(json!({"options": {"rw": "randrw", "rwmixread": 70}}));
        assert_eq!(set_rate(&mut p, 1000.0), 1000.0);
        assert_eq!(p["options"]["rate_iops"], json!("700,300"));
        let mut w = params(json!({"options": {"rw": "randwrite"}}));
        set_rate(&mut w, 300.0);
        assert_eq!(w["options"]["rate_iops"], json!("300"));
    }

    #[test]
    fn job_files_and_trims_cannot_be_searched() {
        let p = params(json!({"job_file": "x.fio", "options": {"rw": "randtrim"}}));
        let problems: Vec<String> = check(&p).into_iter().map(|(k, _)| k).collect();
        assert_eq!(problems, ["job_file", "options.rw"]);
        assert!(check(&params(json!({"options": {"rw": "randread"}}))).is_empty());
    }
}
