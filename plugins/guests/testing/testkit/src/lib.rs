//! `testkit`: does one thing per `mode`, good or bad, so the host's tests can
//! show what the sandbox allows and what it stops. Built against
//! `pipeline:stage@0.1.0` and committed as
//! `runner/wasm/tests/fixtures/testkit-0.1.0.wasm`: it also proves that the
//! runner keeps running plugins built for that interface version.

use pipeline_plugin_sdk::v0_1::*;

struct Testkit;

impl Plugin for Testkit {
    fn describe() -> Description {
        Description::new(
            "testkit",
            "0.1.0",
            "Sandbox test plugin: one behaviour per mode",
        )
        .param(ParamSpec::required(
            "mode",
            ParamType::choice(&[
                "ok", "exec", "loop", "memory", "panic", "write", "read", "http", "fail",
            ]),
            "what to do",
        ))
        .param(ParamSpec::with_default(
            "argv",
            ParamType::list_of(ScalarType::Text),
            Value::TextList(vec!["echo".into(), "hello".into()]),
            "the command for mode=exec",
        ))
        .param(ParamSpec::with_default(
            "path",
            ParamType::text(),
            Value::Text("note.txt".into()),
            "file for read/write",
        ))
        .param(ParamSpec::with_default(
            "url",
            ParamType::text(),
            Value::Text("http://127.0.0.1:9/".into()),
            "URL for mode=http",
        ))
        .param(ParamSpec::with_default(
            "size",
            ParamType::size(),
            Value::Integer(4096),
            "bytes for mode=ok (echoed as a metric)",
        ))
        .param(ParamSpec::with_default(
            "wait",
            ParamType::duration(),
            Value::Number(0.5),
            "seconds (echoed as a metric)",
        ))
        .output("mode", "the mode that ran")
        .metric("size", "B", "the size parameter, echoed")
        .capability(Capability::Exec)
        .capability(Capability::Files)
        .capability(Capability::Http)
    }

    fn check(params: &Params) -> Vec<ParamProblem> {
        if params.str("mode") == Some("exec") && params.strings("argv").is_empty() {
            return vec![ParamProblem {
                name: "argv".into(),
                message: "mode=exec needs a command".into(),
            }];
        }
        Vec::new()
    }

    fn plan(params: &Params, _cluster: &Cluster) -> Vec<Action> {
        vec![Action {
            summary: format!("testkit mode={}", params.str("mode").unwrap_or("?")),
            command: (params.str("mode") == Some("exec")).then(|| params.strings("argv")),
            destructive: false,
        }]
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        let mode = params.require_str("mode")?;
        host.info(&format!("mode {mode}"));
        let mut out = Output::new().output("mode", Value::Text(mode.into()));
        match mode {
            "ok" => {
                let info = host.stage_info();
                host.emit(&Metric::new("emitted", 1.0, "count", Direction::Neutral));
                out = out
                    .metric(
                        Metric::new(
                            "size",
                            params.f64("size").unwrap_or(0.0),
                            "B",
                            Direction::Neutral,
                        )
                        .headline(),
                    )
                    .metric(Metric::new(
                        "wait",
                        params.f64("wait").unwrap_or(0.0),
                        "s",
                        Direction::LowerIsBetter,
                    ))
                    .output("instance", Value::Text(info.instance_id))
                    .output("host", Value::Text(info.host))
                    .output("cli_args", Value::TextList(info.cluster.cli_args))
                    .artifact("testkit.txt", "made by testkit\n")
                    .series(
                        "ramp",
                        "count",
                        Direction::HigherIsBetter,
                        vec![(0.0, 1.0), (1.0, 2.0)],
                    );
            }
            "exec" => {
                let argv = params.strings("argv");
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let r = host.exec(&argv)?;
                out = out
                    .metric(Metric::new(
                        "exit",
                        match r.status {
                            ExitStatus::Code(c) => c as f64,
                            ExitStatus::Signal(s) => -(s as f64),
                        },
                        "count",
                        Direction::Neutral,
                    ))
                    .output("stdout", Value::Text(r.stdout));
            }
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 16 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("testkit was asked to panic"),
            "write" => {
                let path = params.str("path").unwrap_or("note.txt");
                host.write_file(path, b"written by testkit\n")?;
                let back = host.read_file(path)?;
                out = out.metric(Metric::new(
                    "bytes",
                    back.len() as f64,
                    "B",
                    Direction::Neutral,
                ));
            }
            "read" => {
                let data = host.read_file(params.str("path").unwrap_or("note.txt"))?;
                out = out.metric(Metric::new(
                    "bytes",
                    data.len() as f64,
                    "B",
                    Direction::Neutral,
                ));
            }
            "http" => {
                let r = host.http_get(params.str("url").unwrap_or_default())?;
                out = out.metric(Metric::new(
                    "status",
                    r.status as f64,
                    "count",
                    Direction::Neutral,
                ));
            }
            _ => return Err(Error::failed("testkit was asked to fail")),
        }
        Ok(out)
    }
}

export_plugin!(Testkit);
