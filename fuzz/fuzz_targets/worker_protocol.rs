//! What a remote worker sends, as the runner reads it: each line of the
//! input is one protocol line (decoded with the object-gateway stages'
//! window), and a `done` goes through the checks a worker's figures pass
//! before they reach results.json. Whatever passes has names of
//! `[a-z0-9_-]`, finite plausible values, a window whose end follows its
//! start, and no terminal escapes; every refusal is free of control
//! characters (it reaches the terminal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_native::objgw::load::{self, Window};
use pipeline_stage_api::remote_worker::done_check;
use pipeline_stage_api::remote_worker::protocol::{self, FromWorker};

fuzz_target!(|data: &[u8]| {
    let declared = load::metrics();
    for line in data.split(|b| *b == b'\n') {
        let message = match protocol::decode::<Window>(line) {
            Ok(m) => m,
            Err(e) => {
                assert!(!e.chars().any(char::is_control), "{e:?}");
                continue;
            }
        };
        let FromWorker::Done {
            output,
            window,
            max_rss_kib,
        } = message
        else {
            continue;
        };
        assert!(window.issuing_end_unix_ns >= window.measure_start_unix_ns);
        assert!(window.cpu_seconds.is_finite() && window.cpu_seconds >= 0.0);
        assert!(
            window
                .tenths
                .keys()
                .all(|op| op.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
        match done_check::problem("s3-bench", &declared, &output, max_rss_kib) {
            Some(problem) => assert!(!problem.chars().any(char::is_control), "{problem:?}"),
            None => {
                let names = output
                    .metrics
                    .iter()
                    .map(|m| &m.name)
                    .chain(output.histograms.iter().map(|h| &h.name))
                    .chain(output.series.iter().map(|s| &s.name));
                for name in names {
                    assert!(
                        name.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'),
                        "{name:?}"
                    );
                }
                for m in &output.metrics {
                    assert!(m.value.is_finite() && m.value >= 0.0 && m.value <= done_check::PLAUSIBLE);
                }
                for note in &output.notes {
                    assert!(!note.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
                }
                // What passed serializes into results.json.
                serde_json::to_string(&output).expect("a checked output serializes");
            }
        }
    }
});
