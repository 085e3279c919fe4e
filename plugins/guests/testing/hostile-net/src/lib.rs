//! `hostile-net`: a plugin that attacks the host's HTTP client, blocks in
//! host calls, and fails in ways whose raw wasmtime messages mean nothing to
//! a user (issue #14, classes 3, 4 and 8). One attack per `mode`; the
//! runner's `tests/hostile_net.rs` grants it local test servers.

use pipeline_plugin_sdk::v0_1::*;

struct HostileNet;

const MODES: &[&str] = &[
    "get",
    "crlf",
    "dots",
    "pct-dots",
    "header",
    "sleep",
    "sleep-check",
    "sleep-plan",
    "stdin",
    "recurse",
    "big-return",
];

impl Plugin for HostileNet {
    fn describe() -> Description {
        Description::new(
            "hostile-net",
            "0.1.0",
            "Hostile test plugin: HTTP injection, blocking calls, confusing failures",
        )
        .param(ParamSpec::required(
            "mode",
            ParamType::choice(MODES),
            "the attack",
        ))
        .param(ParamSpec::with_default(
            "url",
            ParamType::text(),
            Value::Text("http://127.0.0.1:9/".into()),
            "a granted URL (the attacks build on it)",
        ))
        .param(ParamSpec::with_default(
            "header",
            ParamType::text(),
            Value::Text("X-Test".into()),
            "header name for mode=header",
        ))
        .param(ParamSpec::with_default(
            "value",
            ParamType::text(),
            Value::Text("1".into()),
            "header value for mode=header",
        ))
        .param(ParamSpec::with_default(
            "seconds",
            ParamType::number(),
            Value::Number(60.0),
            "how long to sleep",
        ))
        .output("body", "the response body (mode=get)")
        .metric("status", "count", "HTTP status")
        .capability(Capability::Http)
    }

    fn check(params: &Params) -> Vec<ParamProblem> {
        if params.str("mode") == Some("sleep-check") {
            sleep(params);
        }
        Vec::new()
    }

    fn plan(params: &Params, _cluster: &Cluster) -> Vec<Action> {
        if params.str("mode") == Some("sleep-plan") {
            sleep(params);
        }
        vec![Action {
            summary: format!("hostile-net mode={}", params.str("mode").unwrap_or("?")),
            command: None,
            destructive: false,
        }]
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        let mode = params.require_str("mode")?;
        let url = params.str("url").unwrap_or_default().to_string();
        let out = Output::new();
        match mode {
            // Plain GET: against a trickling server, or a URL the test crafted
            // (e.g. another port than the grant's, whose text it prefixes).
            "get" => get(host, &url, Vec::new()),
            // Header and request injection through the URL.
            "crlf" => get(
                host,
                &format!("{url}x HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET /secret"),
                Vec::new(),
            ),
            "dots" => get(host, &format!("{url}../secret"), Vec::new()),
            "pct-dots" => get(host, &format!("{url}%2e%2E/secret"), Vec::new()),
            "header" => get(
                host,
                &url,
                vec![(
                    params.str("header").unwrap_or_default().to_string(),
                    params.str("value").unwrap_or_default().to_string(),
                )],
            ),
            "sleep" => {
                sleep(params);
                Ok(out)
            }
            "stdin" => {
                use std::io::Read;
                let mut buf = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut buf);
                Ok(out.metric(Metric::new(
                    "stdin",
                    buf.len() as f64,
                    "B",
                    Direction::Neutral,
                )))
            }
            "recurse" => {
                let depth = recurse(std::hint::black_box(1 << 30));
                Ok(out.metric(Metric::new(
                    "depth",
                    depth as f64,
                    "count",
                    Direction::Neutral,
                )))
            }
            // More than the host copies out of a guest in one call (128 MiB).
            "big-return" => Ok(out.output("body", Value::Text("x".repeat(130 << 20)))),
            _ => Err(Error::failed(format!("unknown mode {mode}"))),
        }
    }
}

fn get(host: &Host, url: &str, headers: Vec<(String, String)>) -> Result<Output, Error> {
    let r = host.http(&HttpRequest {
        method: "GET".into(),
        url: url.into(),
        headers,
        body: Vec::new(),
        timeout: Some(3600.0),
    })?;
    Ok(Output::new()
        .metric(Metric::new(
            "status",
            r.status as f64,
            "count",
            Direction::Neutral,
        ))
        .output(
            "body",
            Value::Text(String::from_utf8_lossy(&r.body).into_owned()),
        ))
}

/// `std::thread::sleep`: wasi:clocks subscribe + wasi:io poll in the host.
fn sleep(params: &Params) {
    let seconds = params.f64("seconds").unwrap_or(60.0);
    std::thread::sleep(std::time::Duration::from_secs_f64(seconds.max(0.0)));
}

/// Recursion with a frame the optimiser cannot remove: exhausts the guest's
/// shadow stack in linear memory long before wasmtime's own stack limit.
#[inline(never)]
fn recurse(n: u64) -> u64 {
    let mut frame = [0u8; 256];
    frame[(n % 256) as usize] = n as u8;
    if n == 0 {
        return 0;
    }
    std::hint::black_box(&mut frame);
    1 + recurse(n - 1) + frame[(n % 7) as usize] as u64
}

export_plugin!(HostileNet);
