//! `pipeline run --metrics-listen` and `--metrics-push` against the real
//! servers: Debian's `prometheus` scrapes a run of s3-bench against the
//! sandbox gateway every second, Debian's `prometheus-pushgateway` takes its
//! figures at the end, and what both give back through their HTTP APIs must
//! be what the run folder holds: the finished stage's figures equal to
//! results.json's, the per-second series scraped while the stage ran equal
//! to points of its series file, the host telemetry equal to its samples.
//!
//! Tiers `cluster` (the sandbox's radosgw) and `integrations` (the two
//! servers, installed by scripts/install-deps.sh; each test starts its own
//! on loopback ports, with their data in a temporary folder).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pipeline_test_tiers::{Tier, live};
use serde_json::Value;

/// A port nothing listens on now (the kernel's pick).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// GET `url` with curl: (status, body).
fn get(url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "10", "-w", "\n%{http_code}", url])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A server process of the test's, killed and its folder removed on drop.
struct Server {
    name: &'static str,
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Server {
    /// Starts `cmd` (its log in `dir/log`) and waits until `GET /-/ready` answers 200.
    fn start(name: &'static str, dir: PathBuf, port: u16, cmd: &mut Command) -> Server {
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {name} (scripts/install-deps.sh installs it): {e}")
            });
        let mut server = Server {
            name,
            child,
            dir,
            port,
        };
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if get(&format!("{}/-/ready", server.url())).0 == 200 {
                return server;
            }
            let exited = server.child.try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < until,
                "{name} did not become ready ({exited:?}):\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- {} log:\n{}", self.name, self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pushgateway(dir: &Path) -> Server {
    let dir = dir.join("pushgateway");
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    Server::start(
        "prometheus-pushgateway",
        dir,
        port,
        Command::new("prometheus-pushgateway")
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
    )
}

/// A Prometheus scraping `target` every second.
fn prometheus(dir: &Path, target: u16) -> Server {
    let dir = dir.join("prometheus");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\n\
             scrape_configs:\n  - job_name: pipeline\n    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let server = Server::start(
        "prometheus",
        dir.clone(),
        port,
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
    );
    // Ready is not scraping yet: the target appears a few seconds later
    // (Prometheus throttles its discovery updates), and is scraped from
    // then on. Wait for its first scrape (an error: nothing listens yet).
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, targets) = get(&format!("{}/api/v1/targets", server.url()));
        if targets.contains("\"lastError\":\"Get") {
            return server;
        }
        assert!(
            Instant::now() < until,
            "prometheus never scraped its target: {targets}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A PromQL query through Prometheus's HTTP API: its `data.result`.
fn query(prometheus: &Server, promql: &str) -> Vec<Value> {
    let out = Command::new("curl")
        .args(["-s", "-m", "10", "-G"])
        .arg(format!("{}/api/v1/query", prometheus.url()))
        .arg("--data-urlencode")
        .arg(format!("query={promql}"))
        .output()
        .expect("curl");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{promql}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(answer["status"], "success", "{promql}: {answer}");
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The same f64, but for serde_json's parsing here, which is not exactly
/// round-trip (it can be one unit in the last place off what was written).
fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
}

fn number(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a sample value: {v}"))
}

/// The labels of a metric of results.json as the exporter names them:
/// its own labels, with `stage`, `metric` and `unit`.
fn expected_labels(stage: &str, m: &Value) -> Vec<(String, String)> {
    let mut labels = vec![
        ("stage".to_string(), stage.to_string()),
        (
            "metric".to_string(),
            m["name"].as_str().unwrap().to_string(),
        ),
        ("unit".to_string(), m["unit"].as_str().unwrap().to_string()),
    ];
    for (k, v) in m["labels"].as_object().into_iter().flatten() {
        labels.push((k.clone(), v.as_str().unwrap().to_string()));
    }
    labels.sort();
    labels
}

/// A Prometheus result's labels but the run's own and the scrape's.
fn sample_labels(metric: &Value) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = metric
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !["__name__", "suite", "run_id", "job", "instance"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    labels.sort();
    labels
}

/// The point values of the run's series file of `series` (stage `put`).
fn series_values(run_dir: &Path, series: &str) -> Vec<f64> {
    let dir = run_dir.join("stages/put");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("series-") && name.contains(series) && name.ends_with(".json")
        })
        .unwrap_or_else(|| panic!("no series file of {series} in {}", dir.display()));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    s["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_f64().unwrap())
        .collect()
}

fn a_scraped_and_pushed_run_gives_back_its_results() {
    let dir = common::temp_dir("prometheus-live");
    let listen = free_port();
    let gateway = pushgateway(&dir);
    let prom = prometheus(&dir, listen);
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        "tests/prometheus/s3-live.yaml",
        "--out",
        run_dir.to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{listen}"),
        "--metrics-linger",
        "20",
        "--metrics-push",
        &gateway.url(),
    ]);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the run failed:\n{output}");
    assert!(
        output.contains(&format!("metrics: http://127.0.0.1:{listen}/metrics")),
        "{output}"
    );
    assert!(!output.contains("warning: no scrape"), "{output}");
    assert!(output.contains("metrics pushed to"), "{output}");
    let results = common::results(&run_dir).unwrap();
    let run_id = results["run_id"].as_str().unwrap();
    let put = common::stage(&results, "put");
    let figures = put["metrics"].as_array().unwrap();
    assert!(figures.len() > 5, "{put:#}");

    // Every figure of the finished stage, as results.json has it.
    let scraped = query(
        &prom,
        &format!("last_over_time(pipeline_stage_metric{{run_id=\"{run_id}\",stage=\"put\"}}[10m])"),
    );
    assert_eq!(scraped.len(), figures.len(), "{scraped:#?}");
    for m in figures {
        let want = expected_labels("put", m);
        let got = scraped
            .iter()
            .find(|s| sample_labels(&s["metric"]) == want)
            .unwrap_or_else(|| panic!("{want:?} was not scraped: {scraped:#?}"));
        let (got, want_value) = (number(&got["value"][1]), m["value"].as_f64().unwrap());
        assert!(
            same(got, want_value),
            "{want:?}: scraped {got}, results.json {want_value}"
        );
    }

    // The stage was seen running, and its per-second series while it ran:
    // each scraped value a point of its series file.
    let running = query(
        &prom,
        &format!("max_over_time(pipeline_stage_running{{run_id=\"{run_id}\",stage=\"put\"}}[10m])"),
    );
    assert_eq!(running.len(), 1, "{running:#?}");
    assert_eq!(number(&running[0]["value"][1]), 1.0);
    for series in ["put_ops_per_s", "put_bandwidth", "put_latency_p99"] {
        let scraped = query(
            &prom,
            &format!(
                "pipeline_stage_series{{run_id=\"{run_id}\",stage=\"put\",series=\"{series}\"}}[10m]"
            ),
        );
        assert_eq!(scraped.len(), 1, "{series}: {scraped:#?}");
        let values: Vec<f64> = scraped[0]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| number(&v[1]))
            .collect();
        // 12 s scraped every second: most of its seconds were seen.
        assert!(values.len() >= 8, "{series}: {values:?}");
        let file = series_values(&run_dir, series);
        eprintln!(
            "{series}: {} values scraped while it ran, {} points in its file",
            values.len(),
            file.len()
        );
        for v in &values {
            assert!(
                file.contains(v),
                "{series}: scraped {v}, not in the series file {file:?}"
            );
        }
    }

    // The telemetry: this machine's CPU, each value the mean of one of the
    // samples results.json keeps.
    let samples: Vec<f64> = put["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "local")
        .expect("the local host watched")["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let cores: Vec<f64> = s["cpu_busy_pct"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_f64().unwrap())
                .collect();
            cores.iter().sum::<f64>() / cores.len() as f64
        })
        .collect();
    let cpu = query(
        &prom,
        &format!("pipeline_host_cpu_busy_percent{{run_id=\"{run_id}\",host=\"local\"}}[10m]"),
    );
    assert_eq!(cpu.len(), 1, "{cpu:#?}");
    let cpu_values = cpu[0]["values"].as_array().unwrap();
    assert!(cpu_values.len() >= 8, "{cpu_values:?}");
    for v in cpu_values {
        let v = number(&v[1]);
        assert!(
            samples
                .iter()
                .any(|s| (s - v).abs() <= 1e-9 * s.abs().max(1.0)),
            "CPU {v}% scraped, not a sample of results.json: {samples:?}"
        );
    }

    // The Pushgateway holds the same figures, under the run's group.
    let (code, pushed) = get(&format!("{}/metrics", gateway.url()));
    assert_eq!(code, 200);
    let pushed: Vec<&str> = pushed
        .lines()
        .filter(|l| {
            l.starts_with("pipeline_stage_metric{") && l.contains(&format!("run_id=\"{run_id}\""))
        })
        .collect();
    assert_eq!(pushed.len(), figures.len(), "{pushed:#?}");
    for m in figures {
        let name = format!("metric=\"{}\"", m["name"].as_str().unwrap());
        let value = m["value"].as_f64().unwrap();
        assert!(
            pushed.iter().any(|l| l.contains(&name)
                && l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| same(v, value))),
            "{name} = {value} not pushed: {pushed:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_taken_port_and_a_bad_push_url_fail_before_anything_runs() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = common::temp_dir("prometheus-refused");
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        "tests/prometheus/s3-live.yaml",
        "--out",
        run_dir.to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot listen on 127.0.0.1:{port} for --metrics-listen"
        )),
        "{stderr}"
    );
    assert!(
        !run_dir.exists(),
        "a run folder was made: nothing should have run"
    );
    let out = common::pipeline(&[
        "run",
        "tests/prometheus/s3-live.yaml",
        "--out",
        run_dir.to_str().unwrap(),
        "--metrics-push",
        "https://gw.example:9091",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--metrics-push https://gw.example:9091: the URL uses `https:`"),
        "{stderr}"
    );
    assert!(!run_dir.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "a_scraped_and_pushed_run_gives_back_its_results",
            &[Tier::Cluster, Tier::Integrations],
            a_scraped_and_pushed_run_gives_back_its_results,
        ),
        live(
            "a_taken_port_and_a_bad_push_url_fail_before_anything_runs",
            &[],
            a_taken_port_and_a_bad_push_url_fail_before_anything_runs,
        ),
    ]);
}
