//! `hostile-data`: hands the host too much, or values meant to break what
//! the host makes of them (results.json, report.md, the terminal). One
//! attack per `mode`; `count` scales the floods. The runner's tests
//! (runner/wasm/tests/hostile_data.rs) show that each is bounded or refused.

use pipeline_plugin_sdk::v0_1::*;

struct HostileData;

/// Text that forges Markdown structure and HTML wherever it lands raw.
const MARKDOWN: &str = "x | forged cell |\n\n## Forged heading\n\n| a | b |\n|---|---|\n</summary></details><script>alert(1)</script>[click](javascript:alert(1))`` ` ```";

/// Text that forges or erases terminal lines: ANSI clear-line, carriage
/// return, an OSC 8 hyperlink, C1 CSI, and a bidi override.
const TERMINAL: &str = "\x1b[2K\r!! DESTRUCTIVE forged\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07\r\u{9b}31m\u{202e}txet";

const MODES: &[&str] = &[
    "emit-flood",
    "log-flood",
    "progress-flood",
    "metric-flood",
    "series-flood",
    "labels-flood",
    "artifact-flood",
    "non-finite",
    "non-finite-series",
    "markdown",
    "markdown-error",
    "terminal",
    "env-collision",
    "exec-flood",
];

impl Plugin for HostileData {
    fn describe() -> Description {
        Description::new("hostile-data", "0.1.0", "Floods and poisoned values")
            .param(ParamSpec::required(
                "mode",
                ParamType::choice(MODES),
                "which attack",
            ))
            .param(ParamSpec::with_default(
                "count",
                ParamType::integer(),
                Value::Integer(1000),
                "how many times (calls, metrics, points, MiB)",
            ))
            .param(ParamSpec::with_default(
                "argv",
                ParamType::list_of(ScalarType::Text),
                Value::TextList(vec!["echo".into(), "hello".into()]),
                "the command for mode=exec-flood",
            ))
            .capability(Capability::Exec)
    }

    fn check(_params: &Params) -> Vec<ParamProblem> {
        Vec::new()
    }

    fn plan(params: &Params, _cluster: &Cluster) -> Vec<Action> {
        let summary = match params.str("mode") {
            Some("terminal") => format!("harmless step{TERMINAL}"),
            Some("markdown") => format!("harmless step{MARKDOWN}"),
            other => format!("hostile-data mode={}", other.unwrap_or("?")),
        };
        vec![Action {
            summary,
            command: None,
            destructive: false,
        }]
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        let mode = params.require_str("mode")?;
        let count = params.i64("count").unwrap_or(1000).max(0) as usize;
        // One 1 MiB buffer reused for every call: costs the guest 1 MiB,
        // costs a naive host 1 MiB per call.
        let mib = "m".repeat(1 << 20);
        let mut out = Output::new();
        match mode {
            "emit-flood" => {
                let metric = Metric::new(&mib, 1.0, "count", Direction::Neutral);
                for _ in 0..count {
                    host.emit(&metric);
                }
            }
            "log-flood" => {
                for _ in 0..count {
                    host.info(&mib);
                }
            }
            "progress-flood" => {
                for _ in 0..count {
                    host.progress(&mib);
                }
                for i in 0..count * 100 {
                    host.progress(&format!("step {i}"));
                }
            }
            "metric-flood" => {
                for i in 0..count {
                    out.push_metric(Metric::new(
                        &format!("m{i}"),
                        i as f64,
                        "",
                        Direction::Neutral,
                    ));
                }
            }
            "series-flood" => {
                let points = (0..count).map(|i| (i as f64, 1.0)).collect();
                out = out.series("flood", "count", Direction::Neutral, points);
            }
            "labels-flood" => {
                let mut m = Metric::new("labelled", 1.0, "", Direction::Neutral);
                for i in 0..count {
                    m = m.label(&format!("k{i}"), "v");
                }
                out = out.metric(m).output(&"o".repeat(count), Value::Integer(1));
            }
            "artifact-flood" => {
                // `count` MiB in one artifact.
                out = out.artifact("big.bin", vec![b'a'; count << 20]);
            }
            "non-finite" => {
                out = out
                    .metric(Metric::new("nan", f64::NAN, "s", Direction::LowerIsBetter))
                    .metric(Metric::new("inf", f64::INFINITY, "B", Direction::Neutral))
                    .metric(Metric::new(
                        "ninf",
                        f64::NEG_INFINITY,
                        "",
                        Direction::Neutral,
                    ))
                    .metric(Metric::new("fine", 1.0, "", Direction::Neutral));
            }
            "non-finite-series" => {
                out = out.series(
                    "poisoned",
                    "s",
                    Direction::Neutral,
                    vec![(0.0, 1.0), (1.0, f64::NAN), (f64::INFINITY, 2.0)],
                );
            }
            "markdown" => {
                out = out
                    .metric(
                        Metric::new(MARKDOWN, 1.0, MARKDOWN, Direction::Neutral)
                            .label(MARKDOWN, MARKDOWN)
                            .headline(),
                    )
                    .output(MARKDOWN, Value::Text(MARKDOWN.into()))
                    .environment(MARKDOWN, "{\"x\": \"</summary>```\"}")
                    .artifact(MARKDOWN, "forged")
                    .artifact("javascript:alert(1)", "forged")
                    .series(MARKDOWN, MARKDOWN, Direction::Neutral, vec![(0.0, 1.0)])
                    .skipped(MARKDOWN);
            }
            "markdown-error" => return Err(Error::failed(MARKDOWN)),
            "terminal" => {
                host.progress(TERMINAL);
                return Err(Error::failed(TERMINAL));
            }
            "env-collision" => {
                out = out.environment("ceph versions", "{\"overall\": {\"forged 99.0.0\": 1}}");
            }
            "exec-flood" => {
                let argv = params.strings("argv");
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let r = host.exec(&argv)?;
                out = out
                    .metric(Metric::new(
                        "stdout",
                        r.stdout.len() as f64,
                        "B",
                        Direction::Neutral,
                    ))
                    .metric(Metric::new(
                        "stderr",
                        r.stderr.len() as f64,
                        "B",
                        Direction::Neutral,
                    ));
            }
            _ => return Err(Error::failed("unknown mode")),
        }
        Ok(out)
    }
}

export_plugin!(HostileData);
