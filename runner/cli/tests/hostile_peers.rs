//! Peers that misbehave: an S3 gateway on 127.0.0.1 (a real socket this
//! test serves, `common::hostile_http`) whose listings never end, repeat
//! themselves, name keys that are not the run's, carry a DOCTYPE or are
//! hundreds of megabytes long. Each run must end with an error naming the
//! gateway's fault and the limit, within the stage's timeout, with the
//! runner's peak memory under 200 MB, the bucket it could not remove named
//! in the ledger, and no escape byte of the peer's in the terminal, the
//! results or the report. No tier: nothing but this process and the binary.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pipeline_test_tiers::live;

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

fn run(peer: &HostilePeer, file: &std::path::Path) -> Outcome {
    let run_dir = file.parent().unwrap().join("run");
    let mut cmd = common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    cmd.env("AWS_ENDPOINT_URL", peer.url())
        .env("AWS_ACCESS_KEY_ID", "hostile")
        .env("AWS_SECRET_ACCESS_KEY", "hostile-secret")
        .env_remove("CEPH_CONF");
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
            "a_huge_listing_page_is_refused_at_its_bound",
            &[],
            a_huge_listing_page_is_refused_at_its_bound,
        ),
    ])
}
