//! The sandbox's object gateway as the tests see it with tools that are not
//! ours: `curl --aws-sigv4` for buckets and keys, the gateway's own perf
//! counters from its admin socket, and the figures of a stage in results.json.

use std::process::Command;

use serde_json::Value;

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests need the sandbox gateway; \
             `eval \"$(pipeline sandbox env)\"` first"
        )
    })
}

/// A request signed by curl (an independent SigV4 implementation): (HTTP status, body).
pub fn curl(method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let user = format!(
        "{}:{}",
        env("AWS_ACCESS_KEY_ID"),
        env("AWS_SECRET_ACCESS_KEY")
    );
    let sigv4 = format!("aws:amz:{}:s3", env("AWS_DEFAULT_REGION"));
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "-m",
        "30",
        "-X",
        method,
        "--aws-sigv4",
        &sigv4,
        "--user",
        &user,
    ])
    .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"])
    .args(["-w", "\n%{http_code}"]);
    if let Some(b) = body {
        // curl's --data-binary sends `Content-Type:
        // application/x-www-form-urlencoded` without signing it; radosgw 20.2
        // refuses that ("'content-type' supplied but not in
        // CanonicalHeaders", 403), 16.2 and 18.2 accept it. A Content-Type
        // given explicitly is signed.
        cmd.args(["-H", "Content-Type: application/octet-stream"])
            .args(["--data-binary", b]);
    }
    let out = cmd
        .arg(format!("{}{path}", env("AWS_ENDPOINT_URL")))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

pub fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    xml.split(&format!("<{tag}>"))
        .skip(1)
        .filter_map(|s| {
            s.split_once(&format!("</{tag}>"))
                .map(|(v, _)| v.to_string())
        })
        .collect()
}

pub fn bucket_names() -> Vec<String> {
    let (status, body) = curl("GET", "/", None);
    assert_eq!(status, 200, "{body}");
    xml_values(&body, "Name")
}

pub fn keys(bucket: &str) -> Vec<String> {
    let (status, body) = curl("GET", &format!("/{bucket}?list-type=2"), None);
    assert_eq!(status, 200, "{body}");
    xml_values(&body, "Key")
}

/// The gateway's own counters: (put ops, put bytes, get ops, get bytes),
/// read by `pipeline parse rgw-perf`'s parser, which knows where each
/// release keeps them (`rgw.put`/`put_b`/`get`/`get_b` in 16.2 and 18.2,
/// `rgw_op.put_obj_ops`/`…_bytes`/`get_obj_ops`/`…_bytes` in 20.2). On all
/// three a HEAD is a get, and a GET adds the object's size minus one.
pub fn gateway_counters() -> [u64; 4] {
    // The sandbox the tests run against (scripts/test.sh sets PIPELINE_SANDBOX_DIR).
    let sandbox = std::env::var("PIPELINE_SANDBOX_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp/pipeline-sandbox".into());
    let asok = std::fs::read_dir(std::path::Path::new(&sandbox).join("run"))
        .expect("the sandbox run folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().contains("rgw") && p.extension().is_some_and(|e| e == "asok"))
        .expect("the radosgw admin socket");
    let out = Command::new("ceph")
        .arg("--admin-daemon")
        .arg(&asok)
        .args(["perf", "dump"])
        .output()
        .expect("run ceph --admin-daemon");
    let dump = String::from_utf8_lossy(&out.stdout);
    let c = pipeline_parsers::rgw_perf::counters(&dump)
        .unwrap_or_else(|e| panic!("the gateway's perf dump: {e}"));
    [c.put_ops, c.put_bytes, c.get_ops, c.get_bytes]
}

/// The sum of metric `name` over the rows whose `op` label is `op` (all phases).
pub fn total(stage: &Value, name: &str, op: &str) -> u64 {
    stage["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == name && m["labels"]["op"] == op)
        .map(|m| m["value"].as_f64().unwrap() as u64)
        .sum()
}

pub fn metric(stage: &Value, name: &str, op: &str, phase: &str) -> f64 {
    stage["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name && m["labels"]["op"] == op && m["labels"]["phase"] == phase)
        .and_then(|m| m["value"].as_f64())
        .unwrap_or_else(|| panic!("no metric {name}{{op={op},phase={phase}}} in {stage:#}"))
}
