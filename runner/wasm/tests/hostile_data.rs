//! A hostile plugin (`plugins/guests/testing/hostile-data`) that floods the
//! host or returns values meant to break the results, the report and the
//! terminal. Each attack must end in a bounded, readable run: the stage
//! fails with an error naming the limit (or the excess is dropped with a
//! marker), the run goes on, cleanup runs, results.json and report.md stay
//! small and well-formed. Sizes are asserted, never times.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::results::{RunResults, StageStatus};

const MIB: u64 = 1 << 20;

/// One hostile-data stage (`with:` lines indented by 6) and a cleanup
/// stage that must still run. Returns the results and the run folder.
fn attack(with: &str, grants: &str) -> (RunResults, PathBuf) {
    let yaml = format!(
        "name: hostile-data\nstages:\n  - id: plugin\n    uses: ./hostile_data.wasm\n{grants}    with:\n{with}\ncleanup:\n  - id: after\n    uses: exec\n    with:\n      command: [echo, cleanup ran]\n"
    );
    let (results, dir) =
        run_plugin_yaml(&guest("hostile-data"), &yaml, limits(), Signals::default());
    assert_cleanup_ran(&results);
    (results, dir.join("run"))
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len()
}

/// The run's files are bounded, results.json reads back, and the report
/// re-renders from it (`pipeline report`).
fn assert_bounded(run: &Path, limit: u64) {
    for file in ["results.json", "report.md"] {
        let n = size(&run.join(file));
        assert!(n < limit, "{file} is {n} bytes, over {limit}");
    }
    let results = RunResults::load(run).expect("results.json reads back");
    pipeline_engine::report::write_report(&results, run).expect("the report renders again");
}

fn failed_with<'a>(r: &'a RunResults, needle: &str) -> &'a str {
    let s = stage(r, "plugin");
    assert_eq!(s.status, StageStatus::Failed, "{:?}", s.error);
    let error = s.error.as_deref().unwrap_or_default();
    assert!(error.contains(needle), "expected `{needle}` in: {error}");
    error
}

#[test]
fn metrics_emitted_from_one_reused_mib_buffer_are_refused_at_the_first_call() {
    // 2000 calls of 1 MiB each: 2 GiB on a host that keeps what it is handed.
    let (r, run) = attack("      mode: emit-flood\n      count: 2000", "");
    let error = failed_with(&r, "over the limit of 256 bytes (`name_bytes`)");
    assert!(
        error.contains("plugin `hostile-data` emitted a metric"),
        "{error}"
    );
    assert!(error.contains("1999 more refused request(s)"), "{error}");
    assert!(
        error.len() < 2000,
        "the error quotes a preview: {} bytes",
        error.len()
    );
    assert!(stage(&r, "plugin").metrics.is_empty());
    assert_bounded(&run, MIB);
    // The refusals went to plugin.log, which has its own cap.
    assert!(size(&run.join("stages/plugin/plugin.log")) <= 16 * MIB + 1024);
}

#[test]
fn a_log_flood_is_cut_at_the_log_limit_with_a_marker() {
    // 300 lines of 1 MiB: each over the per-message limit (cut to 64 KiB),
    // together over the log's limit.
    let (r, run) = attack("      mode: log-flood\n      count: 300", "");
    assert_eq!(stage(&r, "plugin").status, StageStatus::Succeeded);
    let log = run.join("stages/plugin/plugin.log");
    let n = size(&log);
    assert!(n <= 16 * MIB + 1024, "plugin.log is {n} bytes");
    assert!(n >= 15 * MIB, "plugin.log keeps what fits: {n} bytes");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.ends_with("[plugin.log truncated: it reached its limit of 16777216 bytes (`log_bytes`); later messages are dropped]\n"),
        "{}",
        &text[text.len() - 300..]
    );
    assert!(
        text.contains("(`message_bytes`)]"),
        "long lines are cut with a marker"
    );
    assert_bounded(&run, MIB);
}

#[test]
fn a_progress_flood_does_not_stop_the_run() {
    let (r, run) = attack("      mode: progress-flood\n      count: 50", "");
    assert_eq!(stage(&r, "plugin").status, StageStatus::Succeeded);
    assert_bounded(&run, MIB);
}

#[test]
fn too_many_metrics_fail_the_stage_naming_the_limit() {
    let (r, run) = attack("      mode: metric-flood\n      count: 10001", "");
    let error = failed_with(
        &r,
        "the number of metrics (10001) is over the limit of 10000 (`metrics`)",
    );
    assert!(error.starts_with("plugin `hostile-data` returned more than the runner accepts"));
    assert!(stage(&r, "plugin").metrics.is_empty());
    assert_bounded(&run, MIB);
    // Within the limit, every metric is kept.
    let (r, run) = attack("      mode: metric-flood\n      count: 10000", "");
    assert_eq!(stage(&r, "plugin").metrics.len(), 10000);
    assert_bounded(&run, 8 * MIB);
    eprintln!(
        "10000 metrics: results.json {} bytes, report.md {} bytes",
        size(&run.join("results.json")),
        size(&run.join("report.md"))
    );
}

#[test]
fn a_series_point_flood_fails_the_stage_and_writes_no_series() {
    let (r, run) = attack("      mode: series-flood\n      count: 250001", "");
    failed_with(
        &r,
        "the number of series points (250001) is over the limit of 250000 (`series_points`)",
    );
    assert!(!run.join("stages/plugin/series-flood.json").exists());
    assert_bounded(&run, MIB);
    // At the limit, the series is saved, and its file is bounded.
    let (r, run) = attack("      mode: series-flood\n      count: 250000", "");
    assert_eq!(stage(&r, "plugin").status, StageStatus::Succeeded);
    let file = size(&run.join("stages/plugin/series-flood.json"));
    eprintln!("250000 points: series-flood.json {file} bytes");
    assert!(file < 16 * MIB, "series-flood.json is {file} bytes");
    assert_bounded(&run, MIB);
}

#[test]
fn too_many_labels_fail_the_stage() {
    let (r, _) = attack("      mode: labels-flood\n      count: 33", "");
    failed_with(
        &r,
        "the number of labels of metric `labelled` (33) is over the limit of 32 (`labels`)",
    );
    let (r, _) = attack("      mode: labels-flood\n      count: 300", "");
    failed_with(&r, "(`labels`)");
}

#[test]
fn non_finite_metrics_fail_the_stage_and_the_results_stay_valid() {
    let (r, run) = attack("      mode: non-finite", "");
    failed_with(
        &r,
        "metric `nan` has the value NaN, which is not a finite number",
    );
    let text = std::fs::read_to_string(run.join("results.json")).unwrap();
    assert!(!text.contains("null"), "no null in results.json");
    assert_bounded(&run, MIB);

    let (r, run) = attack("      mode: non-finite-series", "");
    failed_with(&r, "point 1 of series `poisoned` is (1, NaN)");
    assert_bounded(&run, MIB);
}

/// Every Markdown structure report.md has, counted: the attack must not add any.
fn structure(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| l.starts_with('#') || l.starts_with("```") || l.starts_with("<details"))
        .map(str::to_string)
        .collect()
}

/// report.md without its code: fenced blocks and code spans (whatever is
/// inside them is shown as text, not rendered).
fn outside_code(report: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in report.lines() {
        let ticks: String = line.chars().take_while(|c| *c == '`').collect();
        match &fence {
            Some(f) if ticks.len() >= f.len() && line.trim_start_matches('`').is_empty() => {
                fence = None;
                continue;
            }
            Some(_) => continue,
            None if ticks.len() >= 3 => {
                fence = Some(ticks);
                continue;
            }
            None => {}
        }
        // Code spans: a run of N backticks up to the next run of exactly N.
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            out.push_str(&rest[..start]);
            let run = rest[start..].chars().take_while(|c| *c == '`').count();
            let after = &rest[start + run..];
            let closer = "`".repeat(run);
            let mut search = 0;
            let mut end = None;
            while let Some(i) = after[search..].find(&closer) {
                let at = search + i;
                let longer = after[at + run..].starts_with('`');
                if !longer && (at == 0 || !after[..at].ends_with('`')) {
                    end = Some(at);
                    break;
                }
                search = at + after[at..].chars().take_while(|c| *c == '`').count();
            }
            match end {
                Some(at) => rest = &after[at + run..],
                None => {
                    out.push_str(&rest[start..start + run]);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

fn assert_no_injection(report: &str) {
    for raw in ["\u{1b}", "\r"] {
        assert!(
            !report.contains(raw),
            "`{raw:?}` reached report.md:\n{report}"
        );
    }
    let rendered = outside_code(report);
    for raw in ["<script>", "</summary></details>"] {
        assert!(
            !rendered.contains(raw),
            "`{raw}` reached report.md raw:\n{report}"
        );
    }
    // A link needs an unescaped `]` before its `(`.
    for (i, _) in rendered.match_indices("](javascript:") {
        assert!(
            rendered[..i].ends_with('\\'),
            "a javascript: link:\n{report}"
        );
    }
    for line in rendered.lines() {
        assert!(
            !line.starts_with("## Forged"),
            "a forged heading:\n{report}"
        );
        assert!(!line.starts_with("| a | b |"), "a forged table:\n{report}");
    }
    // Each table row has as many cells as its header: no cell split by `|`.
    let mut columns = None;
    for line in report.lines() {
        if line.starts_with('|') {
            let cells = line.replace("\\|", "").matches('|').count();
            match columns {
                None => columns = Some(cells),
                Some(c) => assert_eq!(c, cells, "a row with other cells: {line}"),
            }
        } else {
            columns = None;
        }
    }
}

#[test]
fn markdown_and_html_in_names_and_the_skip_reason_are_escaped() {
    let (r, run) = attack("      mode: markdown", "");
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Skipped, "{:?}", s.error);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert_no_injection(&report);
    let headings: Vec<String> = structure(&report)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .collect();
    assert_eq!(
        headings,
        [
            "# hostile-data: succeeded",
            "## Summary",
            "## Stages",
            "### 1. plugin",
            "## Environment",
            "## Cleanup"
        ],
        "{report}"
    );
    // The environment key is shown, escaped, under the plugin's name, and
    // linked to its file in the run folder.
    assert!(
        report.contains(
            "Every fact as recorded: [hostile-data: x \\| forged cell \\|  ## Forged heading"
        ),
        "{report}"
    );
}

#[test]
fn markdown_in_an_error_cannot_close_its_block() {
    let (r, run) = attack("      mode: markdown-error", "");
    failed_with(&r, "## Forged heading");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert_no_injection(&report);
    // The error is shown whole in a fenced block the text cannot close.
    let fence = report
        .lines()
        .find(|l| l.starts_with("```") && l.ends_with("text"))
        .expect("the error block");
    assert_eq!(fence, "````text", "{report}");
}

#[test]
fn a_plugin_fact_cannot_pose_as_a_native_one() {
    let (r, _) = attack("      mode: env-collision", "");
    assert_eq!(stage(&r, "plugin").status, StageStatus::Succeeded);
    assert!(
        !r.environment.contains_key("ceph versions"),
        "{:?}",
        r.environment
    );
    assert!(r.environment.contains_key("hostile-data: ceph versions"));
}

#[test]
fn escapes_in_a_plan_cannot_forge_or_erase_a_line() {
    let dir = temp_dir("plan");
    std::fs::copy(guest("hostile-data"), dir.join("hostile_data.wasm")).unwrap();
    let file = dir.join("pipeline.yaml");
    std::fs::write(
        &file,
        "name: plan\nstages:\n  - id: plugin\n    uses: ./hostile_data.wasm\n    with:\n      mode: terminal\n",
    )
    .unwrap();
    let plan = compile_file(&file, &registry(limits()), &CompileOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let text = plan.render_text();
    for c in ['\u{1b}', '\r', '\u{9b}', '\u{202e}', '\u{7}'] {
        assert!(!text.contains(c), "{c:?} in the plan:\n{text}");
    }
    for line in text.lines().filter(|l| l.contains("DESTRUCTIVE")) {
        assert!(
            line.starts_with("     -> harmless step"),
            "a forged mark: {line}"
        );
    }
    assert!(text.contains("0 destructive action(s)"));
}

#[test]
fn escapes_in_an_error_stay_in_the_results_but_not_in_the_report() {
    let (r, run) = attack("      mode: terminal", "");
    // results.json keeps what the plugin said (JSON escapes it) ...
    failed_with(&r, "\u{1b}[2K");
    // ... and the report strips what a terminal would act on.
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert_no_injection(&report);
    assert!(report.contains("!! DESTRUCTIVE forgedlink"), "{report}");
}

#[test]
fn a_command_printing_more_than_the_limit_gives_the_guest_the_start_and_keeps_all_in_its_file() {
    // 20 MB of output; the guest gets 16 MiB and a line saying where the rest is.
    let (r, run) = attack(
        "      mode: exec-flood\n      argv: [sh, -c, \"yes 0123456789 | head -c 20000000\"]",
        "    grants: {exec: [sh]}\n",
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    let stdout = s.metrics.iter().find(|m| m.name == "stdout").unwrap().value as u64;
    assert!(
        (16 * MIB..16 * MIB + 1024).contains(&stdout),
        "the guest got {stdout} bytes"
    );
    assert_eq!(size(&run.join("stages/plugin/01-sh.stdout")), 20_000_000);
    assert_bounded(&run, MIB);
}

#[test]
fn a_native_stage_that_computes_nan_loses_that_figure_with_a_note() {
    // `exec` parses "nan" and "inf" as numbers: a NaN from a native stage.
    let yaml = "name: native-nan\nstages:\n  - id: native\n    uses: exec\n    with:\n      command: [echo, nan inf 2]\n      metrics:\n        - {name: nan, regex: '^(\\S+)', unit: s}\n        - {name: inf, regex: '^\\S+ (\\S+)', unit: s}\n        - {name: two, regex: ' (\\d+)', unit: s}\n";
    let (r, dir) = run_plugin_yaml(&guest("hostile-data"), yaml, limits(), Signals::default());
    let s = stage(&r, "native");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    let names: Vec<&str> = s.metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["two"]);
    assert_eq!(
        s.notes,
        [
            "metric `nan` was dropped: its value NaN is not a finite number",
            "metric `inf` was dropped: its value inf is not a finite number",
        ]
    );
    let run = dir.join("run");
    let text = std::fs::read_to_string(run.join("results.json")).unwrap();
    assert!(!text.contains("null"), "no null in results.json");
    assert_bounded(&run, MIB);
}
