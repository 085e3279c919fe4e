//! The sandbox cluster the Ceph tests run against (CEPH_CONF from
//! `pipeline sandbox env`, which scripts/test.sh sets).

use std::process::Command;

pub fn conf() -> String {
    std::env::var("CEPH_CONF").expect(
        "CEPH_CONF is not set: these tests need a cluster; run them through scripts/test.sh, \
         which starts the sandbox (or `eval \"$(pipeline sandbox env)\"` first)",
    )
}

/// `ceph ARGS` against the test cluster: (success, stdout) when it worked,
/// (failure, stdout+stderr) when not. A working command's stderr stays out of
/// its answer: the client library logs transient warnings there (a monitor's
/// `handle_auth_reply_more no authorizer?` during a retried handshake) that
/// would read as an image name or break a JSON parse.
pub fn ceph(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(program)
        .args(["--conf", &conf()])
        .args(args)
        .output()
        .expect("run ceph");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        return (true, stdout.into_owned());
    }
    (
        false,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

pub fn pools() -> Vec<String> {
    let (ok, text) = ceph("ceph", &["osd", "pool", "ls", "--format", "json"]);
    assert!(ok, "{text}");
    // Every pool counts: the sandbox makes the gateway's bucket pools at `up`,
    // so a run's first bucket changes nothing here.
    serde_json::from_str(text.trim()).unwrap()
}

/// Every PG active+clean (after a fault), within two minutes, so later
/// tests find the cluster as they expect.
pub fn wait_until_clean() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (ok, text) = ceph("ceph", &["pg", "stat", "--format", "json"]);
        let clean = ok
            && serde_json::from_str::<serde_json::Value>(text.trim()).is_ok_and(|stat| {
                let states = stat["pg_summary"]["num_pg_by_state"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                !states.is_empty() && states.iter().all(|s| s["name"] == "active+clean")
            });
        if clean {
            assert_no_full_osd();
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "PGs not active+clean after 120 s: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// A full OSD blocks every later write of the test binary, and each of
/// those tests would fail at its own timeout far from the cause; say the
/// cause where it is first seen. (A memstore OSD whose used-bytes count
/// wrapped to 16 EiB after PGs were backfilled away from it and back did
/// exactly that once.)
fn assert_no_full_osd() {
    let (ok, health) = ceph("ceph", &["health", "detail", "--format", "json"]);
    assert!(ok, "ceph health detail: {health}");
    let health: serde_json::Value = serde_json::from_str(health.trim()).unwrap_or_default();
    let full: Vec<&String> = health["checks"]
        .as_object()
        .map(|checks| {
            checks
                .keys()
                .filter(|k| k.ends_with("_FULL") || k.ends_with("_BACKFILLFULL"))
                .collect()
        })
        .unwrap_or_default();
    if !full.is_empty() {
        let (_, df) = ceph("ceph", &["osd", "df"]);
        panic!("the sandbox cluster has {full:?}; every later write would block:\n{df}");
    }
}
