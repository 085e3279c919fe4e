//! Every tool-output parser behind `pipeline parse`: the first byte picks
//! the format, the rest is the tool's output.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let formats = pipeline_parsers::FORMATS;
    let (format, _) = formats[usize::from(which) % formats.len()];
    let text = String::from_utf8_lossy(rest);
    if let Ok(measurement) = pipeline_parsers::parse(format, &text) {
        // What a parser returns goes into results.json: it must serialize.
        serde_json::to_string(&measurement).expect("a measurement serializes");
    }
});
