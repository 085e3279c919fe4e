//! The WASM host's value conversions: what a guest returns across the WIT
//! boundary (descriptions, parameter defaults, metrics, series, outputs,
//! environment facts), built from the fuzzer's bytes, NaN and infinities
//! included (see `pipeline_wasm::fuzz_conversions`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pipeline_wasm::fuzz_conversions(data);
});
