//! The README's "Using it" block, run as it stands (issue #21):
//! `scripts/readme-using-it.sh` takes the ```sh block under "## Using it"
//! from README.md and runs it command by command with `bash -euo pipefail`
//! from the repo root, in network, mount and PID namespaces of its own
//! (its sandbox's fixed ports meet no other cluster; it runs offline), then
//! checks that `pipeline run` printed a report whose run succeeded and that
//! `pipeline sandbox down` left no daemon behind. The block builds the
//! release binaries itself (`cargo build --release`): `scripts/test.sh`
//! builds them beforehand, in the background, so that step is a no-op.
//!
//! Tier `readme`: `PIPELINE_TEST_TIERS=readme cargo test -p pipeline --test readme_using_it`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use pipeline_test_tiers::{Tier, live};

const PASSED: &str = "== README.md \"Using it\" passed";

fn readme_using_it_block_passes_verbatim() {
    let script = common::root().join("scripts/readme-using-it.sh");
    // Its progress is passed through line by line (the block takes minutes);
    // failures (the command, its status and output) come on stderr.
    let mut child = Command::new(&script)
        .current_dir(common::root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let mut out = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
        let line = line.expect("the script's output");
        println!("{line}");
        out.push(line);
    }
    let status = child.wait().expect("wait for the script");
    assert!(
        status.success(),
        "scripts/readme-using-it.sh failed ({status}); what failed is above"
    );
    assert!(
        out.iter().any(|l| l.starts_with(PASSED)),
        "scripts/readme-using-it.sh exited 0 without its closing line {PASSED:?}"
    );
    let report = out
        .iter()
        .find(|l| l.starts_with("report: ") && l.contains("status: succeeded"))
        .unwrap_or_else(|| panic!("no 'report: ... (results.json status: succeeded' line"));
    assert!(report.contains("report.md"), "{report}");
}

fn main() {
    pipeline_test_tiers::run(vec![live(
        "readme_using_it_block_passes_verbatim",
        &[Tier::Readme],
        readme_using_it_block_passes_verbatim,
    )]);
}
