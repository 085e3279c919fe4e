//! Peers that misbehave: an S3 gateway on 127.0.0.1 (a real socket this
//! test serves, `common::hostile_http`) whose listings never end, repeat
//! themselves, name keys that are not the run's, carry a DOCTYPE or are
//! hundreds of megabytes long. Each run must end with an error naming the
//! gateway's fault and the limit, within the stage's timeout, with the
//! runner's peak memory under 200 MB, the bucket it could not remove named
//! in the ledger, and no escape byte of the peer's in the terminal, the
//! results or the report. No tier: nothing but this process and the binary.
//!
//! A registry that sends too much (a manifest, a token answer, an error
//! body, a blob beyond what the manifest declared), and a `ceph` whose JSON
//! answer is 300 MB: each refused at its bound, naming it, under 200 MB.
//!
//! And workers that misbehave (tier hosts: the sshd harness on loopback,
//! whose inventory's `pipeline:` names a fake worker that speaks protocol 1
//! just well enough to be started): one that floods lines, one that sends
//! a 300 MB line, one whose `done` holds absurd figures. Each fails its
//! host within the stage's timeout, the runner under 200 MB, and none of
//! the worker's bytes reach results.json unchecked.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pipeline_test_tiers::{Tier, live};

use common::hostile_http::{Body, HostilePeer, Request, Response, run_measured};
use serde_json::Value;

/// The runner's peak memory must stay under this whatever a peer sends.
const MEMORY_LIMIT_KIB: u64 = 200 * 1024;

/// How the hostile gateway answers a bucket listing.
#[derive(Clone, Copy)]
enum Listing {
    /// Truncated, "continue with token t", every time.
    RepeatsItsToken,
    /// Truncated, with a new token every time: a listing without an end.
    NeverEnds,
    /// A key outside the prefix asked for, its name full of escapes.
    ForeignKey,
    /// An XML document that declares entities.
    Doctype,
    /// A 300 MB page.
    Huge,
    /// A page behind a header section of 1 MiB.
    HugeHeader,
}

/// A gateway that takes every PUT and DELETE and lists as `listing` says;
/// it counts the DELETEs of the key that is not the run's (there must be none).
fn gateway(listing: Listing) -> (HostilePeer, Arc<AtomicU64>) {
    let foreign_deletes = Arc::new(AtomicU64::new(0));
    let counter = foreign_deletes.clone();
    let page = AtomicU64::new(0);
    let peer = HostilePeer::start(move |r: &Request| {
        let key = r
            .path()
            .trim_start_matches('/')
            .split_once('/')
            .map(|(_, k)| k);
        match (r.method.as_str(), key) {
            ("GET", None) if r.query("list-type").is_some() => {
                let prefix = r.query("prefix").unwrap_or_default();
                let n = page.fetch_add(1, Ordering::Relaxed);
                list(listing, &prefix, n)
            }
            ("DELETE", Some(k)) => {
                if k.starts_with("someone-elses") {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                Response::status(204)
            }
            ("DELETE", None) => Response::status(204),
            _ => Response::ok(Vec::new()).header("ETag", "\"e\""),
        }
    });
    (peer, foreign_deletes)
}

fn list(listing: Listing, prefix: &str, page: u64) -> Response {
    let keys: String = (0..100)
        .map(|i| format!("<Contents><Key>{prefix}{page:06}-{i:03}</Key></Contents>"))
        .collect();
    let truncated = |token: String| {
        Response::ok(format!(
            "<ListBucketResult><IsTruncated>true</IsTruncated>{keys}<NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>"
        ))
    };
    match listing {
        Listing::RepeatsItsToken => truncated("t".into()),
        Listing::NeverEnds => truncated(format!("t{page}")),
        Listing::ForeignKey => Response::ok(format!(
            "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>{prefix}1</Key></Contents><Contents><Key>someone-elses/\x1b[2J\x1b]0;owned\x07</Key></Contents></ListBucketResult>"
        )),
        Listing::Doctype => Response::ok(format!(
            "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"{}\">]><ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>{prefix}&a;</Key></Contents></ListBucketResult>",
            "a".repeat(100)
        )),
        Listing::HugeHeader => Response::ok(format!(
            "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>{prefix}1</Key></Contents></ListBucketResult>"
        ))
        .header("X-Hostile", "h".repeat(1 << 20)),
        Listing::Huge => Response {
            status: 200,
            headers: Vec::new(),
            body: Body::Repeat {
                chunk: format!("<Contents><Key>{prefix}x</Key></Contents>").into_bytes(),
                total: 300 << 20,
            },
        },
    }
}

/// A suite of one s3-bench stage against `peer`, `timeout` in all.
fn suite(name: &str, timeout: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(&format!("hostile-{name}"));
    let file = dir.join("suite.yaml");
    std::fs::write(
        &file,
        format!(
            "name: hostile-{name}\ncluster: {{watch: false}}\ninventory: {{watch: false}}\nstages:\n  - id: s3\n    uses: s3-bench\n    timeout: {timeout}\n    with:\n      workload: put\n      object_size: 4K\n      concurrency: 2\n      duration: 1s\n      objects_per_bucket: 10\n"
        ),
    )
    .unwrap();
    file
}

struct Outcome {
    code: Option<i32>,
    elapsed: Duration,
    peak_kib: u64,
    output: String,
    results: Value,
    run_dir: std::path::PathBuf,
}

/// `pipeline run FILE` against the S3 gateway `peer`.
fn run(peer: &HostilePeer, file: &std::path::Path) -> Outcome {
    run_with(file, |cmd| {
        cmd.env("AWS_ENDPOINT_URL", peer.url())
            .env("AWS_ACCESS_KEY_ID", "hostile")
            .env("AWS_SECRET_ACCESS_KEY", "hostile-secret");
    })
}

/// `pipeline run FILE` (into `run/` beside it), its environment set by `env`.
fn run_with(file: &std::path::Path, env: impl FnOnce(&mut std::process::Command)) -> Outcome {
    let run_dir = file.parent().unwrap().join("run");
    let mut cmd = common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    cmd.env_remove("CEPH_CONF");
    env(&mut cmd);
    let (code, elapsed, peak_kib, output) = run_measured(cmd);
    let results = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json"))
            .unwrap_or_else(|e| panic!("no results.json ({e})\n{output}")),
    )
    .unwrap();
    Outcome {
        code,
        elapsed,
        peak_kib,
        output,
        results,
        run_dir,
    }
}

/// What every hostile case must hold: the stage failed with `error`,
/// within `bound`, under the memory limit, the run's bucket in the ledger
/// as not removed, no control character of the peer's anywhere a person reads.
fn assert_bounded(case: &str, o: &Outcome, error: &str, bound: Duration) {
    assert_eq!(o.code, Some(1), "{case}: {}", o.output);
    let stage = common::stage(&o.results, "s3");
    assert_eq!(stage["status"], "failed", "{case}: {stage:#}");
    let message = stage["error"].as_str().unwrap_or_default();
    assert!(message.contains(error), "{case}: {message}");
    assert!(
        o.elapsed < bound,
        "{case}: took {:?}, beyond {bound:?}",
        o.elapsed
    );
    assert!(
        o.peak_kib < MEMORY_LIMIT_KIB,
        "{case}: peak memory {} KiB",
        o.peak_kib
    );
    let left: Vec<&Value> = o.results["created"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "s3-bucket" && c["removed"] != true)
        .collect();
    assert_eq!(
        left.len(),
        1,
        "{case}: the ledger: {:#}",
        o.results["created"]
    );
    let bucket = left[0]["name"].as_str().unwrap();
    assert!(message.contains(bucket), "{case}: {message}");
    eprintln!(
        "{case}: {:.1} s, peak {} MiB: {message}",
        o.elapsed.as_secs_f64(),
        o.peak_kib / 1024
    );
    // `pipeline cleanup` names what the run left, as after a killed run.
    let cleanup = common::pipeline(&["cleanup", o.run_dir.to_str().unwrap()]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&cleanup.stdout),
        String::from_utf8_lossy(&cleanup.stderr)
    );
    eprintln!("{case}: pipeline cleanup: {said}");
    assert!(
        said.contains(bucket),
        "{case}: pipeline cleanup said: {said}"
    );
    let report = std::fs::read_to_string(o.run_dir.join("report.md")).unwrap();
    let results = std::fs::read_to_string(o.run_dir.join("results.json")).unwrap();
    for (what, text) in [
        ("terminal", &o.output),
        ("report", &report),
        ("results", &results),
    ] {
        assert!(
            !text.contains('\x1b') && !text.contains("\\u001b") && !text.contains('\x07'),
            "{case}: an escape reached the {what}"
        );
    }
}

fn a_listing_that_repeats_its_token_ends_with_the_bucket_named() {
    let (peer, foreign) = gateway(Listing::RepeatsItsToken);
    let o = run(&peer, &suite("repeats", "60s"));
    assert_bounded(
        "repeats",
        &o,
        "did not end after 2 pages (token repeated)",
        Duration::from_secs(30),
    );
    assert_eq!(foreign.load(Ordering::Relaxed), 0);
}

fn a_listing_that_never_ends_is_cut_by_the_stage_timeout() {
    let (peer, _) = gateway(Listing::NeverEnds);
    let o = run(&peer, &suite("never-ends", "35s"));
    let message = o.results["stages"][0]["error"].to_string();
    assert_bounded(
        "never-ends",
        &o,
        "its cleanup ran out of time",
        // The timeout, and the moments a run takes to start and to write its report.
        Duration::from_secs(35 + 10),
    );
    assert!(
        message.contains("`pipeline cleanup` removes them"),
        "{message}"
    );
}

fn keys_outside_the_prefix_are_refused_and_none_deleted() {
    let (peer, foreign) = gateway(Listing::ForeignKey);
    let o = run(&peer, &suite("foreign", "60s"));
    assert_bounded("foreign", &o, "outside the prefix", Duration::from_secs(30));
    assert_eq!(
        foreign.load(Ordering::Relaxed),
        0,
        "a key that is not the run's was deleted"
    );
}

fn a_doctype_is_refused_never_expanded() {
    let (peer, _) = gateway(Listing::Doctype);
    let o = run(&peer, &suite("doctype", "60s"));
    assert_bounded(
        "doctype",
        &o,
        "holds a DOCTYPE or ENTITY declaration: refused",
        Duration::from_secs(30),
    );
}

fn a_header_section_of_1_mib_is_refused() {
    let (peer, _) = gateway(Listing::HugeHeader);
    let o = run(&peer, &suite("huge-header", "60s"));
    assert_bounded(
        "huge-header",
        &o,
        "its header section was longer than the 417792 bytes the runner reads of one",
        Duration::from_secs(30),
    );
}

fn a_huge_listing_page_is_refused_at_its_bound() {
    let (peer, _) = gateway(Listing::Huge);
    let o = run(&peer, &suite("huge", "60s"));
    assert_bounded(
        "huge",
        &o,
        "was longer than 16 MiB",
        Duration::from_secs(30),
    );
}

/// A Swift auth server whose storage URL names another host: the token
/// must not go there unless the suite allows that host.
fn a_storage_url_on_another_host_is_refused_and_gets_no_token() {
    let elsewhere = HostilePeer::start(|_| Response::status(204));
    let storage = format!("{}/swift/v1", elsewhere.url());
    let auth = HostilePeer::start(move |_| {
        Response::status(204)
            .header("X-Storage-Url", storage.clone())
            .header("X-Auth-Token", "AUTH_tk-never-leaves")
    });
    let dir = common::temp_dir("hostile-swift-auth");
    let file = dir.join("suite.yaml");
    std::fs::write(
        &file,
        "name: hostile-swift-auth\ncluster: {watch: false}\ninventory: {watch: false}\nstages:\n  - id: s3\n    uses: swift-bench\n    timeout: 30s\n    with:\n      workload: put\n      object_size: 4K\n      duration: 1s\n",
    )
    .unwrap();
    let Outcome {
        code,
        elapsed,
        peak_kib,
        output,
        results,
        ..
    } = run_with(&file, |cmd| {
        cmd.env("ST_AUTH", format!("{}/auth/1.0", auth.url()))
            .env("ST_USER", "test:tester")
            .env("ST_KEY", "hostile-key");
    });
    assert_eq!(code, Some(1), "{output}");
    let error = common::stage(&results, "s3")["error"]
        .as_str()
        .unwrap()
        .to_string();
    eprintln!(
        "swift-auth: {:.1} s, peak {} MiB: {error}",
        elapsed.as_secs_f64(),
        peak_kib / 1024
    );
    assert!(
        error.contains("answered a storage URL on another host")
            && error.contains(&format!(
                "allow it with `storage_hosts: [\"127.0.0.1:{}\"]`",
                elsewhere.port
            )),
        "{error}"
    );
    assert_eq!(
        elsewhere.requests.load(Ordering::Relaxed),
        0,
        "a request (with the token) went to the storage URL's host"
    );
    assert!(peak_kib < MEMORY_LIMIT_KIB);
}

/// A fake `pipeline worker`: says `hello` as this runner's version, then
/// does what `mode` says.
const FAKE_WORKER: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
MODE = "@MODE@"
def send(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()
job = json.loads(sys.stdin.readline())
send({"type": "hello", "protocol": 1, "version": "@VERSION@", "pid": os.getpid()})
if MODE == "flood":
    lines = b'{"type":"alive"}\n' * 4096
    while True:
        os.write(1, lines)
if MODE == "long-line":
    sys.stdout.write('{"type":"progress","message":"')
    chunk = "a" * (1 << 20)
    for _ in range(300):
        sys.stdout.write(chunk)
    sys.stdout.write('"}\n')
    sys.stdout.flush()
    time.sleep(120)
    sys.exit(0)
ABSURD = {
    "output": {
        "metrics": [
            {"name": "ops_per_s", "value": 1e308, "unit": "ops/s", "direction": "higher",
             "labels": {"op": "put", "phase": "measure"}, "aggregate": "sum"},
            {"name": "ops_per_s\u001b]0;pwned\u0007", "value": 1.0, "unit": "ops/s",
             "direction": "higher", "aggregate": "sum"},
        ],
        "histograms": [], "series": [], "notes": ["n" * 400000],
    },
    "window": {"measure_start_unix_ns": 2000000000000000000, "issuing_end_unix_ns": 1000000000000000000,
               "tenths": {}, "cpu_seconds": -5.0, "cores": 2.0},
    "max_rss_kib": 2 ** 63,
}
if MODE == "absurd-window":
    ABSURD["output"]["metrics"] = ABSURD["output"]["metrics"][:0]
    ABSURD["output"]["notes"] = []
    ABSURD["max_rss_kib"] = 1000
else:
    ABSURD["window"]["issuing_end_unix_ns"] = 3000000000000000000
    ABSURD["window"]["cpu_seconds"] = 1.0
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "ping":
        send({"type": "pong", "id": m["id"], "clock_unix_ns": time.time_ns()})
        if m["id"] == 7:
            send({"type": "ready"})
    elif m["type"] == "start":
        send({"type": "started", "at_unix_ns": m["at_unix_ns"]})
        send(dict(type="done", **ABSURD))
        time.sleep(120)
"#;

/// Runs one s3-bench stage on node1, whose worker is the fake in `mode`.
fn run_fake_worker(mode: &str) -> Outcome {
    let sshd = common::sshd::Sshd::start();
    let (peer, _) = gateway(Listing::RepeatsItsToken);
    let dir = common::temp_dir(&format!("hostile-worker-{mode}"));
    let fake = dir.join("fake-worker");
    std::fs::write(
        &fake,
        FAKE_WORKER
            .replace("@MODE@", mode)
            .replace("@VERSION@", env!("CARGO_PKG_VERSION")),
    )
    .unwrap();
    std::fs::set_permissions(
        &fake,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let node1 = format!(
        "node1: {{address: {}, port: {}}}",
        common::sshd::ADDRESSES[0],
        sshd.port
    );
    let inventory = sshd.inventory_yaml();
    assert!(inventory.contains(&node1), "{inventory}");
    let inventory = inventory
        .replace(
            &node1,
            &format!(
                "node1: {{address: {}, port: {}, pipeline: {}}}",
                common::sshd::ADDRESSES[0],
                sshd.port,
                fake.display()
            ),
        )
        .replace("inventory:\n", "inventory:\n  watch: false\n");
    let file = dir.join("suite.yaml");
    std::fs::write(
        &file,
        format!(
            "name: hostile-worker-{mode}\ncluster: {{watch: false}}\nstages:\n  - id: s3\n    uses: s3-bench\n    on: [node1]\n    timeout: 60s\n    with:\n      workload: put\n      object_size: 4K\n      concurrency: 2\n      duration: 2s\n      objects_per_bucket: 10\n{inventory}"
        ),
    )
    .unwrap();
    run(&peer, &file)
}

/// What every hostile worker case must hold: node1 failed with `error`
/// within the stage's timeout, the runner under the memory limit, nothing
/// of the worker's in results.json but what was checked.
fn assert_worker_refused(case: &str, o: &Outcome, error: &str) {
    assert_eq!(o.code, Some(1), "{case}: {}", o.output);
    let stage = common::stage(&o.results, "s3");
    let message = stage["error"].as_str().unwrap_or_default();
    eprintln!(
        "{case}: {:.1} s, peak {} MiB: {message}",
        o.elapsed.as_secs_f64(),
        o.peak_kib / 1024
    );
    assert!(message.starts_with("node1: "), "{case}: {message}");
    assert!(message.contains(error), "{case}: {message}");
    assert!(
        o.elapsed < Duration::from_secs(60),
        "{case}: took {:?}, beyond the stage's timeout",
        o.elapsed
    );
    assert!(
        o.peak_kib < MEMORY_LIMIT_KIB,
        "{case}: peak memory {} KiB",
        o.peak_kib
    );
    let results = std::fs::read_to_string(o.run_dir.join("results.json")).unwrap();
    for garbage in [
        "pwned", "1e308", "nnnnnnnn", "aaaaaaaa", "\\u001b", "\\u0007",
    ] {
        assert!(
            !results.contains(garbage),
            "{case}: `{garbage}` in results.json"
        );
    }
    assert!(
        !o.output.contains('\x1b'),
        "{case}: an escape reached the terminal"
    );
    // A worker that broke the protocol is killed, not trusted to exit.
    let fake = o.run_dir.parent().unwrap().join("fake-worker");
    let left = std::process::Command::new("pgrep")
        .args(["-af", &fake.to_string_lossy()])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "{case}: the fake worker is left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

fn a_worker_that_floods_lines_loses_its_host_within_the_timeout() {
    let o = run_fake_worker("flood");
    assert_worker_refused("flood", &o, "its worker flooded its session");
}

fn a_worker_line_of_300_mb_is_refused_at_the_line_limit() {
    let o = run_fake_worker("long-line");
    assert_worker_refused("long-line", &o, "a line longer than 64 MiB");
}

fn a_done_with_absurd_figures_fails_the_host_naming_the_field() {
    let o = run_fake_worker("absurd");
    assert_worker_refused(
        "absurd",
        &o,
        "its worker's `done` was refused: max_rss_kib is 9223372036854775808",
    );
}

fn a_done_whose_window_ends_before_it_starts_is_refused() {
    let o = run_fake_worker("absurd-window");
    assert_worker_refused("absurd-window", &o, "precedes window.measure_start_unix_ns");
}

/// How the hostile registry answers a pull of `evil/plugin:1.0`.
#[derive(Clone, Copy, Debug)]
enum Registry {
    /// A 300 MB manifest, sent chunked (nothing announces its size).
    ChunkedManifest,
    /// A manifest whose Content-Length says 3 GiB.
    AnnouncedManifest,
    /// A Bearer challenge whose token realm answers with 300 MB.
    TokenFlood,
    /// An HTTP 500 whose body is 300 MB of escapes.
    ErrorFlood,
    /// A plugin manifest whose 1000-byte layer's blob goes on for 300 MB.
    LongerBlob,
    /// A header section of 1 MiB.
    HugeHeader,
    /// Not hostile: a Bearer challenge, a token, and no such tag (the
    /// token flow works, and the token goes where the challenge said).
    BearerNoSuchTag,
}

/// 300 MB in chunks of `chunk`.
fn flood(chunk: &str, chunked: bool) -> Body {
    let (chunk, total) = (chunk.as_bytes().repeat(4096), 300 << 20);
    if chunked {
        Body::Chunked { chunk, total }
    } else {
        Body::Repeat { chunk, total }
    }
}

fn registry(how: Registry) -> HostilePeer {
    let digest = format!("sha256:{}", "a".repeat(64));
    HostilePeer::start(move |r: &Request| {
        let host = r
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let authorized = r
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        let response = |status: u16, body: Body| Response {
            status,
            headers: vec![(
                "Content-Type".into(),
                "application/vnd.oci.image.manifest.v1+json".into(),
            )],
            body,
        };
        match (how, r.path()) {
            (_, "/v2/") => Response::ok("{}"),
            (Registry::ChunkedManifest, _) => response(200, flood("{\"a\":1}", true)),
            (Registry::AnnouncedManifest, _) => Response {
                body: Body::Repeat {
                    chunk: b" ".repeat(4096),
                    total: 3 << 30,
                },
                ..response(200, Body::Bytes(Vec::new()))
            },
            (Registry::TokenFlood, "/token") => response(200, flood("{\"token\":\"", true)),
            (Registry::TokenFlood, _) if !authorized => Response::status(401).header(
                "WWW-Authenticate",
                format!("Bearer realm=\"http://{host}/token\",service=\"hostile\""),
            ),
            (Registry::TokenFlood, _) => Response::ok("{}"),
            (Registry::HugeHeader, _) => {
                Response::ok("{}").header("X-Hostile", "h".repeat(1 << 20))
            }
            (Registry::BearerNoSuchTag, "/token")
                if r.query("scope").as_deref() == Some("repository:evil/plugin:pull") =>
            {
                Response::ok(r#"{"token":"tk-1"}"#)
            }
            (Registry::BearerNoSuchTag, _) if has_token(r, "Bearer tk-1") => Response::status(404),
            (Registry::BearerNoSuchTag, _) => Response::status(401).header(
                "WWW-Authenticate",
                format!("Bearer realm=\"http://{host}/token\",service=\"hostile\""),
            ),
            (Registry::ErrorFlood, _) => response(500, flood("\x1b[2J\x1b]0;owned\x07boom ", true)),
            (Registry::LongerBlob, p) if p.contains("/blobs/") => {
                response(200, flood("\0asm", true))
            }
            (Registry::LongerBlob, _) => Response::ok(format!(
                r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"{digest}","size":2}},"layers":[{{"mediaType":"application/wasm","digest":"{digest}","size":1000}}]}}"#
            )),
        }
    })
}

fn has_token(r: &Request, value: &str) -> bool {
    r.headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("authorization") && v == value)
}

fn pull(peer: &HostilePeer, dir: &std::path::Path) -> (Option<i32>, Duration, u64, String) {
    let mut cmd = common::pipeline_command(&[
        "plugins",
        "pull",
        &format!("oci://127.0.0.1:{}/evil/plugin:1.0", peer.port),
    ]);
    cmd.env("PIPELINE_CACHE_DIR", dir.join("cache"))
        .env("DOCKER_CONFIG", dir.join("docker"))
        .env_remove("PIPELINE_REGISTRY_USER")
        .env_remove("PIPELINE_REGISTRY_PASSWORD");
    run_measured(cmd)
}

fn a_registry_that_sends_too_much_is_cut_at_each_bound() {
    // The token flow itself, against the same peer.
    let peer = registry(Registry::BearerNoSuchTag);
    let dir = common::temp_dir("hostile-registry-bearer");
    let (code, _, _, output) = pull(&peer, &dir);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains(&format!(
            "oci://127.0.0.1:{}/evil/plugin:1.0: the tag `1.0` is not in the registry",
            peer.port
        )),
        "{output}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    for (how, error) in [
        (
            Registry::ChunkedManifest,
            "the manifest is longer than the 4194304 bytes the runner reads of one (more was sent)",
        ),
        (
            Registry::AnnouncedManifest,
            "the manifest is longer than the 4194304 bytes the runner reads of one (its Content-Length says 3221225472)",
        ),
        (
            Registry::TokenFlood,
            "the token answer is longer than the 65536 bytes the runner reads of one",
        ),
        (
            Registry::ErrorFlood,
            "the request was answered with HTTP 500: [2J]0;ownedboom [2J]0;ownedboom",
        ),
        (
            Registry::HugeHeader,
            "the header section is longer than the 417792 bytes the runner reads of one",
        ),
        (
            Registry::LongerBlob,
            "the plugin blob is longer than the 1000 bytes the runner reads of one",
        ),
    ] {
        let case = format!("{how:?}");
        let peer = registry(how);
        let dir = common::temp_dir(&format!("hostile-registry-{case}"));
        assert_refused(
            &format!("pull {case}"),
            pull(&peer, &dir),
            &format!("registry 127.0.0.1:{}: {error}", peer.port),
        );
        assert!(
            !dir.join("cache/oci/blobs/sha256").exists()
                || std::fs::read_dir(dir.join("cache/oci/blobs/sha256"))
                    .unwrap()
                    .next()
                    .is_none(),
            "{case}: nothing is cached"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A push to a registry that wants a Bearer token (as Harbor or GHCR do):
/// the token is asked for `pull,push` and every request of the push carries
/// it; the upload's relative Location is followed on the registry.
fn a_push_with_a_bearer_token_carries_it_on_every_request() {
    let wasm = common::root().join("runner/wasm/tests/fixtures/testkit-0.1.0.wasm");
    let unauthorized = Arc::new(AtomicU64::new(0));
    let seen = unauthorized.clone();
    let peer = HostilePeer::start(move |r: &Request| {
        let host = r
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if r.path() == "/token" {
            return if r.query("scope").as_deref() == Some("repository:team/plugin:pull,push") {
                Response::ok(r#"{"access_token":"tk-push"}"#)
            } else {
                Response::status(403)
            };
        }
        if !has_token(r, "Bearer tk-push") {
            if r.path() != "/v2/" {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            return Response::status(401).header(
                "WWW-Authenticate",
                format!("Bearer realm=\"http://{host}/token\",service=\"hostile\""),
            );
        }
        match (r.method.as_str(), r.path()) {
            ("HEAD", _) => Response::status(404),
            ("POST", _) => Response::status(202)
                .header("Location", "/v2/team/plugin/blobs/uploads/u1?_state=s"),
            ("PUT", p)
                if p.ends_with("/uploads/u1")
                    && r.query("digest").is_some()
                    && r.query("_state").is_some() =>
            {
                Response::status(201)
            }
            ("PUT", "/v2/team/plugin/manifests/1.0") => Response::status(201),
            _ => Response::status(400),
        }
    });
    let dir = common::temp_dir("hostile-push-bearer");
    let out = common::pipeline_command(&[
        "plugins",
        "push",
        wasm.to_str().unwrap(),
        &format!("oci://127.0.0.1:{}/team/plugin:1.0", peer.port),
    ])
    .env("PIPELINE_CACHE_DIR", dir.join("cache"))
    .env("DOCKER_CONFIG", dir.join("docker"))
    .output()
    .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("manifest"), "{said}");
    assert_eq!(
        unauthorized.load(Ordering::Relaxed),
        0,
        "a request of the push went without the token"
    );
    // blob, config: HEAD, POST, PUT each; /v2/; /token; the manifest.
    assert_eq!(peer.requests.load(Ordering::Relaxed), 9, "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A push to a registry that sends the upload elsewhere, or floods its
/// error: the plugin's bytes go nowhere but the registry, the error is
/// bounded and clean.
fn a_registry_that_misbehaves_on_a_push_gets_nothing_it_should_not() {
    let wasm = common::root().join("runner/wasm/tests/fixtures/testkit-0.1.0.wasm");
    let elsewhere = HostilePeer::start(|_| Response::status(201));
    for (case, error) in [
        ("upload-elsewhere", "its upload Location"),
        (
            "upload-flood",
            "the blob upload was answered with HTTP 500: [2J]0;ownedboom",
        ),
    ] {
        let redirect = format!(
            "http://127.0.0.2:{}/v2/evil/plugin/blobs/uploads/u1",
            elsewhere.port
        );
        let peer = HostilePeer::start(move |r: &Request| match (r.method.as_str(), r.path()) {
            ("GET", "/v2/") => Response::ok("{}"),
            ("HEAD", _) => Response::status(404),
            ("POST", _) if case == "upload-elsewhere" => {
                Response::status(202).header("Location", redirect.clone())
            }
            ("POST", _) => response_500_flood(),
            _ => Response::status(201),
        });
        let dir = common::temp_dir(&format!("hostile-push-{case}"));
        let mut cmd = common::pipeline_command(&[
            "plugins",
            "push",
            wasm.to_str().unwrap(),
            &format!("oci://127.0.0.1:{}/evil/plugin:1.0", peer.port),
        ]);
        cmd.env("PIPELINE_CACHE_DIR", dir.join("cache"))
            .env("DOCKER_CONFIG", dir.join("docker"));
        assert_refused(&format!("push {case}"), run_measured(cmd), error);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(
        elsewhere.requests.load(Ordering::Relaxed),
        0,
        "the plugin went to another host than the registry"
    );
}

/// A registry command that must fail with `error`, within 30 s, under the
/// memory limit, with none of the registry's bytes or escapes in its output.
fn assert_refused(case: &str, measured: (Option<i32>, Duration, u64, String), error: &str) {
    let (code, elapsed, peak_kib, output) = measured;
    assert_eq!(code, Some(1), "{case}: {output}");
    assert!(output.contains(error), "{case}: {output}");
    assert!(
        elapsed < Duration::from_secs(30),
        "{case}: took {elapsed:?}"
    );
    assert!(
        peak_kib < MEMORY_LIMIT_KIB,
        "{case}: peak memory {peak_kib} KiB"
    );
    assert!(
        !output.contains('\x1b') && !output.contains('\x07') && output.len() < 4096,
        "{case}: the registry's bytes reached the terminal: {output:?}"
    );
    eprintln!(
        "{case}: {:.1} s, peak {} MiB: {}",
        elapsed.as_secs_f64(),
        peak_kib / 1024,
        output.trim()
    );
}

fn response_500_flood() -> Response {
    Response {
        status: 500,
        headers: Vec::new(),
        body: flood("\x1b[2J\x1b]0;owned\x07boom ", true),
    }
}

/// A `ceph` first in PATH that answers `health detail` with 300 MB of
/// blanks before its `{}`: the stage refuses it at the read-back bound,
/// naming the command, instead of holding 300 MB to parse it.
fn a_ceph_answer_of_300_mb_is_refused_at_the_read_back_bound() {
    let dir = common::temp_dir("hostile-ceph");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("ceph");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$*\" in\n  *health*) head -c 314572800 /dev/zero | tr '\\0' ' '; printf '\\033[2J{}\\n' ;;\n  *version*) echo 'ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)' ;;\n  *) echo '{}' ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.join("suite.yaml");
    std::fs::write(
        &file,
        "name: hostile-ceph\ncluster: {watch: false}\ninventory: {watch: false}\nstages:\n  - id: health\n    uses: ceph-health\n    timeout: 60s\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = run_with(&file, |cmd| {
        cmd.env("PATH", path);
    });
    let (code, elapsed, peak_kib, output, run_dir) =
        (o.code, o.elapsed, o.peak_kib, &o.output, &o.run_dir);
    assert_eq!(code, Some(1), "{output}");
    let stage = common::stage(&o.results, "health");
    assert_eq!(stage["status"], "failed", "{stage:#}");
    let message = stage["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("printed 314572807 bytes, more than the 32 MiB the runner reads back of a command: refused unparsed"),
        "{message}"
    );
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
    assert!(peak_kib < MEMORY_LIMIT_KIB, "peak memory {peak_kib} KiB");
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    let results = std::fs::read_to_string(run_dir.join("results.json")).unwrap();
    for (what, text) in [
        ("terminal", output),
        ("report", &report),
        ("results", &results),
    ] {
        assert!(
            !text.contains('\x1b') && !text.contains("\\u001b"),
            "an escape reached the {what}"
        );
    }
    eprintln!(
        "ceph: {:.1} s, peak {} MiB: {message}",
        elapsed.as_secs_f64(),
        peak_kib / 1024
    );
    // The 300 MB stay in the run folder, as the message says; the test frees the disk.
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "a_listing_that_repeats_its_token_ends_with_the_bucket_named",
            &[],
            a_listing_that_repeats_its_token_ends_with_the_bucket_named,
        ),
        live(
            "a_listing_that_never_ends_is_cut_by_the_stage_timeout",
            &[],
            a_listing_that_never_ends_is_cut_by_the_stage_timeout,
        ),
        live(
            "keys_outside_the_prefix_are_refused_and_none_deleted",
            &[],
            keys_outside_the_prefix_are_refused_and_none_deleted,
        ),
        live(
            "a_doctype_is_refused_never_expanded",
            &[],
            a_doctype_is_refused_never_expanded,
        ),
        live(
            "a_header_section_of_1_mib_is_refused",
            &[],
            a_header_section_of_1_mib_is_refused,
        ),
        live(
            "a_huge_listing_page_is_refused_at_its_bound",
            &[],
            a_huge_listing_page_is_refused_at_its_bound,
        ),
        live(
            "a_storage_url_on_another_host_is_refused_and_gets_no_token",
            &[],
            a_storage_url_on_another_host_is_refused_and_gets_no_token,
        ),
        live(
            "a_registry_that_sends_too_much_is_cut_at_each_bound",
            &[],
            a_registry_that_sends_too_much_is_cut_at_each_bound,
        ),
        live(
            "a_push_with_a_bearer_token_carries_it_on_every_request",
            &[],
            a_push_with_a_bearer_token_carries_it_on_every_request,
        ),
        live(
            "a_registry_that_misbehaves_on_a_push_gets_nothing_it_should_not",
            &[],
            a_registry_that_misbehaves_on_a_push_gets_nothing_it_should_not,
        ),
        live(
            "a_ceph_answer_of_300_mb_is_refused_at_the_read_back_bound",
            &[],
            a_ceph_answer_of_300_mb_is_refused_at_the_read_back_bound,
        ),
        live(
            "a_worker_that_floods_lines_loses_its_host_within_the_timeout",
            &[Tier::Hosts],
            a_worker_that_floods_lines_loses_its_host_within_the_timeout,
        ),
        live(
            "a_worker_line_of_300_mb_is_refused_at_the_line_limit",
            &[Tier::Hosts],
            a_worker_line_of_300_mb_is_refused_at_the_line_limit,
        ),
        live(
            "a_done_with_absurd_figures_fails_the_host_naming_the_field",
            &[Tier::Hosts],
            a_done_with_absurd_figures_fails_the_host_naming_the_field,
        ),
        live(
            "a_done_whose_window_ends_before_it_starts_is_refused",
            &[Tier::Hosts],
            a_done_whose_window_ends_before_it_starts_is_refused,
        ),
    ])
}
