//! results.json as `pipeline report` and `pipeline compare` load it: parse,
//! render the report, compare the run with itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_engine::compare::{CompareOptions, Side, compare};
use pipeline_engine::report::{Exporter, MarkdownExporter};
use pipeline_engine::results::RunResults;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(results) = RunResults::parse(text, std::path::Path::new("results.json")) else {
        return;
    };
    let exporter = MarkdownExporter {
        charts: Vec::new(),
        sweeps: Vec::new(),
        environment: None,
    };
    let _ = exporter.export(&results);
    let side = Side {
        source: "run".into(),
        results: &results,
    };
    let _ = compare(
        &side,
        std::slice::from_ref(&side),
        &CompareOptions::default(),
    );
});
