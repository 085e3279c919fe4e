//! Issue #14, classes 3, 4 and 8: the `hostile-net` guest attacks the HTTP
//! host call (request injection, dot-segments, port-prefix grants, framing
//! headers), blocks in host calls (a trickling server, WASI sleeps in every
//! export), and fails in ways wasmtime words badly. Real wasmtime, real
//! local TCP servers on 127.0.0.1 port 0; time assertions only of the form
//! "stopped well before the attack would have ended".

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pipeline_engine::cancel::Signals;
use pipeline_engine::results::{RunResults, StageStatus};
use pipeline_wasm::Limits;
use pipeline_wasm::cache::{CacheOutcome, ComponentCache};

mod common;
use common::*;

// ---- local servers ---------------------------------------------------------

/// Reads one request head (up to the blank line), as text.
fn read_head(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A server that answers every request with `204`, and reports every
/// request head it receives (a second request in one connection included).
struct Recorder {
    port: u16,
    heads: mpsc::Receiver<String>,
}

impl Recorder {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, heads) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { return };
                let tx = tx.clone();
                std::thread::spawn(move || {
                    loop {
                        let head = read_head(&mut s);
                        if head.is_empty() {
                            return;
                        }
                        let _ = tx.send(head);
                        let _ =
                            s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
                    }
                });
            }
        });
        Recorder { port, heads }
    }

    /// Every head received so far (after the stage has finished).
    fn received(&self) -> Vec<String> {
        let mut all = Vec::new();
        while let Ok(h) = self.heads.recv_timeout(Duration::from_millis(200)) {
            all.push(h);
        }
        all
    }
}

/// A server that sends a valid response head, then one body byte a second
/// for `seconds` (a body announced as 1 MB).
fn trickle_server(seconds: u64) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        read_head(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
        for _ in 0..seconds {
            if s.write_all(b"x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    port
}

// ---- running the guest -----------------------------------------------------

fn pipeline(body: &str) -> String {
    format!(
        "name: hostile-net\nstages:\n  - id: plugin\n    uses: ./hostile_net.wasm\n{body}\ncleanup:\n  - id: after\n    uses: exec\n    with:\n      command: [echo, cleanup ran]\n"
    )
}

fn run(body: &str) -> RunResults {
    run_with(body, limits(), Signals::default())
}

fn run_with(body: &str, limits: Limits, signals: Signals) -> RunResults {
    run_plugin_yaml(&guest("hostile-net"), &pipeline(body), limits, signals).0
}

fn error(r: &RunResults) -> String {
    stage(r, "plugin").error.clone().unwrap_or_default()
}

fn http_stage(grant: &str, mode: &str, url: &str) -> String {
    format!(
        "    grants: {{http: [\"{grant}\"]}}\n    with:\n      mode: {mode}\n      url: \"{url}\""
    )
}

// ---- class 4: HTTP requests from hostile text --------------------------------

#[test]
fn crlf_in_a_url_cannot_inject_headers_or_a_second_request() {
    let server = Recorder::start();
    let grant = format!("http://127.0.0.1:{}/ok/", server.port);
    let r = run(&http_stage(&grant, "crlf", &grant));
    let e = error(&r);
    assert_eq!(stage(&r, "plugin").status, StageStatus::Failed);
    assert!(e.contains("control character"), "{e}");
    assert!(e.contains("\\r\\n"), "the CR/LF is shown escaped: {e}");
    assert!(!e.contains('\r'), "{e}");
    let heads = server.received();
    assert!(
        heads
            .iter()
            .all(|h| !h.contains("/secret") && !h.contains("X-Injected")),
        "{heads:?}"
    );
    assert!(heads.is_empty(), "nothing is sent: {heads:?}");
    assert_cleanup_ran(&r);
}

#[test]
fn dot_segments_cannot_leave_a_path_prefix_grant() {
    for mode in ["dots", "pct-dots"] {
        let server = Recorder::start();
        let grant = format!("http://127.0.0.1:{}/ok/", server.port);
        let r = run(&http_stage(&grant, mode, &grant));
        let e = error(&r);
        assert_eq!(stage(&r, "plugin").status, StageStatus::Failed, "{mode}");
        assert!(
            e.contains("which the pipeline does not grant"),
            "{mode}: {e}"
        );
        assert!(
            e.contains("/secret"),
            "{mode}: the parsed URL is named: {e}"
        );
        assert_eq!(server.received(), Vec::<String>::new(), "{mode}");
    }
}

#[test]
fn a_grant_without_a_trailing_slash_does_not_match_a_longer_port() {
    let server = Recorder::start();
    // `http://127.0.0.1:1234` is a text prefix of `http://127.0.0.1:12345`.
    let grant = format!("http://127.0.0.1:{}", server.port / 10);
    let url = format!("http://127.0.0.1:{}/x", server.port);
    let r = run(&http_stage(&grant, "get", &url));
    let e = error(&r);
    assert!(e.contains("which the pipeline does not grant"), "{e}");
    assert!(server.received().is_empty());

    // The same grant with the right port, no slash: any path on that port.
    let grant = format!("http://127.0.0.1:{}", server.port);
    let r = run(&http_stage(&grant, "get", &url));
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    let heads = server.received();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /x HTTP/1.1\r\n"), "{heads:?}");
}

#[test]
fn framing_and_hop_by_hop_headers_are_refused() {
    for header in [
        "Transfer-Encoding",
        "content-length",
        "Host",
        "Connection",
        "Upgrade",
    ] {
        let server = Recorder::start();
        let grant = format!("http://127.0.0.1:{}/", server.port);
        let body = format!(
            "{}\n      header: {header}\n      value: chunked",
            http_stage(&grant, "header", &grant)
        );
        let r = run(&body);
        let e = error(&r);
        assert_eq!(stage(&r, "plugin").status, StageStatus::Failed, "{header}");
        assert!(e.contains("which only the host sets"), "{header}: {e}");
        assert!(server.received().is_empty(), "{header}");
    }
    // An ordinary header goes through, once.
    let server = Recorder::start();
    let grant = format!("http://127.0.0.1:{}/", server.port);
    let body = format!(
        "{}\n      header: X-Trace\n      value: abc",
        http_stage(&grant, "header", &grant)
    );
    let r = run(&body);
    assert_eq!(
        stage(&r, "plugin").status,
        StageStatus::Succeeded,
        "{}",
        error(&r)
    );
    let heads = server.received();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].to_ascii_lowercase().contains("x-trace: abc\r\n"),
        "{heads:?}"
    );
    assert!(
        !heads[0].to_ascii_lowercase().contains("transfer-encoding"),
        "{heads:?}"
    );
}

#[test]
fn a_malformed_http_grant_fails_validation() {
    for grant in [
        "https://127.0.0.1:7480/",
        "http://127.0.0.1:7480/?a=1",
        "http://h/a b",
    ] {
        let errors = compile_errors(
            &format!(
                "name: t\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    grants: {{http: [\"{grant}\"]}}\n    with: {{mode: ok}}\n"
            ),
            None,
        );
        assert!(errors.contains("grants.http"), "{grant}: {errors}");
    }
    let fine = compile_errors(
        "name: t\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    grants: {http: [\"http://127.0.0.1:7480\"]}\n    with: {mode: ok}\n",
        None,
    );
    assert_eq!(fine, "");
}

// ---- class 3: blocking host calls under the deadline and Ctrl-C --------------

/// Limits whose compute budget is far away: only the stage's deadline or
/// Ctrl-C can end these stages.
fn generous() -> Limits {
    Limits {
        run_time: Duration::from_secs(300),
        ..limits()
    }
}

#[test]
fn a_trickling_server_is_cut_off_at_the_stage_timeout() {
    let port = trickle_server(60);
    let url = format!("http://127.0.0.1:{port}/slow");
    let started = Instant::now();
    let r = run_with(
        &format!("    timeout: 3s\n{}", http_stage(&url, "get", &url)),
        generous(),
        Signals::default(),
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(30),
        "took {elapsed:?} against a 60 s trickle"
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    let e = error(&r);
    assert!(
        e.contains("deadline") || e.contains("no complete answer"),
        "{e}"
    );
    assert_cleanup_ran(&r);
}

#[test]
fn a_long_sleep_is_stopped_at_the_stage_timeout() {
    let started = Instant::now();
    let r = run_with(
        "    timeout: 3s\n    with:\n      mode: sleep\n      seconds: 60",
        generous(),
        Signals::default(),
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(30),
        "took {elapsed:?} against a 60 s sleep"
    );
    assert_eq!(stage(&r, "plugin").status, StageStatus::Failed);
    let e = error(&r);
    assert!(
        e.contains("was still running at the stage's deadline"),
        "{e}"
    );
    assert_cleanup_ran(&r);
}

#[test]
fn a_short_sleep_is_not_computing_time() {
    // 2 s of sleep against a 1 s compute budget and no deadline: waiting is
    // not a runaway loop.
    let tight = Limits {
        run_time: Duration::from_secs(1),
        ..limits()
    };
    let r = run_with(
        "    with:\n      mode: sleep\n      seconds: 2",
        tight,
        Signals::default(),
    );
    assert_eq!(
        stage(&r, "plugin").status,
        StageStatus::Succeeded,
        "{}",
        error(&r)
    );
}

/// Runs `body` and raises Ctrl-C 0.8 s in: the plugin, waiting in a host
/// call for a minute, must end Cancelled well before that, and cleanup run.
fn assert_ctrl_c_stops(body: &str) {
    let signals = Signals::default();
    let raiser = signals.clone();
    let started = Instant::now();
    let interrupt = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        raiser.raise();
    });
    let r = run_with(body, generous(), signals);
    interrupt.join().unwrap();
    assert_eq!(
        stage(&r, "plugin").status,
        StageStatus::Cancelled,
        "{}",
        error(&r)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_cleanup_ran(&r);
}

#[test]
fn ctrl_c_stops_a_sleeping_plugin_and_cleanup_still_runs() {
    assert_ctrl_c_stops("    with:\n      mode: sleep\n      seconds: 60");
}

#[test]
fn ctrl_c_stops_a_plugin_waiting_on_a_trickling_server() {
    let port = trickle_server(60);
    let url = format!("http://127.0.0.1:{port}/slow");
    assert_ctrl_c_stops(&http_stage(&url, "get", &url));
}

/// `check` runs while the pipeline compiles and `plan` for `pipeline plan`:
/// a sleep there must end within the call budget (`call_time`), not hang
/// the runner (neither has a stage deadline).
#[test]
fn sleeping_in_check_or_plan_is_stopped_by_the_call_budget() {
    use pipeline_stage_api::ceph::CephConnection;
    use pipeline_stage_api::params::Params;
    use pipeline_stage_api::stage::PlanContext;
    let quick = Limits {
        call_time: Duration::from_secs(2),
        ..limits()
    };
    let plugin = loader(&temp_dir("sleepy-cache"), quick)
        .load_file(&guest("hostile-net"), None)
        .unwrap();
    let params = |mode: &str| {
        let mut p = Params::new();
        p.insert("mode".into(), mode.into());
        p.insert("seconds".into(), 60.0.into());
        p
    };
    let started = Instant::now();
    let problems = plugin.stage.check(&params("sleep-check"));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "check took {:?}",
        started.elapsed()
    );
    assert!(
        problems
            .iter()
            .any(|(_, m)| m.contains("without finishing") && m.contains("`check`")),
        "{problems:?}"
    );
    let started = Instant::now();
    let ceph = CephConnection::default();
    let ctx = PlanContext {
        instance_id: "plugin",
        ceph: &ceph,
        targets: &[],
    };
    let actions = plugin.stage.plan(&params("sleep-plan"), &ctx);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "plan took {:?}",
        started.elapsed()
    );
    assert!(
        actions
            .iter()
            .any(|a| a.summary.contains("without finishing") && a.summary.contains("`plan`")),
        "{actions:?}"
    );
}

/// `describe` runs while the plugin loads (`validate`, `plugins list`).
#[test]
fn sleeping_in_describe_is_stopped_by_the_call_budget() {
    let quick = Limits {
        call_time: Duration::from_secs(2),
        ..limits()
    };
    let started = Instant::now();
    let loaded = loader(&temp_dir("sleepy-describe-cache"), quick)
        .load_file(&guest("hostile-net-describe"), None);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "describe took {:?}",
        started.elapsed()
    );
    let e = loaded.err().expect("the load fails").to_string();
    assert!(
        e.contains("without finishing") && e.contains("`describe`"),
        "{e}"
    );
}

#[test]
fn reading_stdin_does_not_block() {
    let r = run("    timeout: 20s\n    with:\n      mode: stdin");
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    assert_eq!(s.metrics[0].value, 0.0);
}

// ---- class 8: errors in the user's terms ----------------------------------------

#[test]
fn deep_recursion_is_explained() {
    let r = run("    with:\n      mode: recurse");
    let e = error(&r);
    assert!(e.contains("plugin `hostile-net`"), "{e}");
    assert!(e.contains("recursion"), "{e}");
}

#[test]
fn an_oversized_return_is_explained() {
    let roomy = Limits {
        memory: 400 << 20,
        ..generous()
    };
    let r = run_with(
        "    with:\n      mode: big-return",
        roomy,
        Signals::default(),
    );
    let e = error(&r);
    assert!(e.contains("more than 128 MiB in one call"), "{e}");
}

#[test]
fn a_text_file_named_wasm_is_not_reported_as_a_wat_syntax_error() {
    let errors = compile_errors(
        "name: t\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    with: {mode: ok}\n",
        Some(b"#!/bin/sh\necho not a plugin\n"),
    );
    assert!(
        errors.contains("does not start with the `\\0asm` magic bytes"),
        "{errors}"
    );
    assert!(!errors.contains("expected `(`"), "{errors}");
}

// ---- class 8: the compile cache -----------------------------------------------

fn cache_dir(tag: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir(tag).join("wasm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

fn load(cache: &ComponentCache, bytes: &[u8]) -> CacheOutcome {
    let engine = pipeline_wasm::engine::engine().unwrap();
    let sha = pipeline_wasm::cache::sha256_hex(bytes);
    cache.load(engine, bytes, &sha).unwrap().1
}

#[test]
fn a_cache_folder_open_to_others_is_not_used() {
    let bytes = std::fs::read(fixture("testkit-0.1.0.wasm")).unwrap();
    let dir = cache_dir("cache-open", 0o777);
    let cache = ComponentCache::new(Some(dir.clone()));
    assert!(
        cache
            .refused()
            .unwrap_or_default()
            .contains("open to other users")
    );
    assert_eq!(load(&cache, &bytes), CacheOutcome::Compiled);
    assert_eq!(load(&cache, &bytes), CacheOutcome::Compiled, "never a hit");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(files.is_empty(), "nothing written to it: {files:?}");
}

#[test]
fn a_cached_artifact_is_bound_to_the_wasm_it_came_from() {
    let engine = pipeline_wasm::engine::engine().unwrap();
    let testkit = std::fs::read(fixture("testkit-0.1.0.wasm")).unwrap();
    let other = std::fs::read(guest("hostile-net")).unwrap();
    let dir = cache_dir("cache-bound", 0o700);
    let cache = ComponentCache::new(Some(dir.clone()));
    assert_eq!(load(&cache, &testkit), CacheOutcome::Compiled);
    assert_eq!(load(&cache, &testkit), CacheOutcome::Hit);
    assert_eq!(load(&cache, &other), CacheOutcome::Compiled);
    assert_eq!(load(&cache, &other), CacheOutcome::Hit);

    // Another plugin's artifact (and its tag) put in place of testkit's.
    let entry = |b: &[u8]| {
        cache
            .entry(engine, &pipeline_wasm::cache::sha256_hex(b))
            .unwrap()
    };
    let tag = |p: &PathBuf| {
        let name = p.file_name().unwrap().to_str().unwrap();
        dir.with_file_name("wasm.trust").join(format!("{name}.tag"))
    };
    std::fs::copy(entry(&other), entry(&testkit)).unwrap();
    std::fs::copy(tag(&entry(&other)), tag(&entry(&testkit))).unwrap();
    assert_eq!(
        load(&cache, &testkit),
        CacheOutcome::Compiled,
        "swapped artifact refused"
    );
    assert_eq!(load(&cache, &testkit), CacheOutcome::Hit, "and rewritten");

    // An artifact written by anyone but the cache (no valid tag).
    let artifact = std::fs::read(entry(&testkit)).unwrap();
    std::fs::write(entry(&testkit), &artifact).unwrap();
    assert_eq!(
        load(&cache, &testkit),
        CacheOutcome::Compiled,
        "rewritten file refused"
    );
}
