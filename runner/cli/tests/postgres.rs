//! `pipeline publish --to postgres://…` and `pipeline history --db`
//! against a real PostgreSQL 15 that each test starts in a temporary folder
//! on a loopback port (pg/server.rs), and the Grafana dashboard's SQL
//! (dashboards/*.json) run against the published runs.
//!
//! A live test of the `integrations` tier (pipeline-test-tiers): listed as
//! ignored unless PIPELINE_TEST_TIERS turns it on.

mod common;
#[path = "pg/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::Output;

use pipeline_test_tiers::{Tier, live};
use serde_json::Value;
use server::Server;

fn text(out: &Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(out: Output) -> String {
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    stdout
}

fn copy_run(file: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(common::root().join(file), to.join("results.json")).unwrap();
}

/// A runs folder of: two full-baseline runs (the second with a stage
/// measured on an unclean cluster and host-limited), a failed run, and
/// three runs of tests/repeat/counter.yaml (repetitions; the last gated
/// against the first and regressed, so results.json has its regressions).
fn runs_folder(name: &str) -> PathBuf {
    let dir = common::temp_dir(&format!("pg-{name}"));
    let runs = dir.join("runs");
    copy_run(
        "tests/compare/full-baseline-1.results.json",
        &runs.join("a-first"),
    );
    copy_run(
        "tests/compare/full-baseline-2.results.json",
        &runs.join("b-second"),
    );
    copy_run(
        "tests/report/failing-stage.results.json",
        &runs.join("c-failed"),
    );
    // A run folder with series files (stages/*/series-*.json).
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(common::root().join("tests/report/charts"))
        .arg(runs.join("g-charts"))
        .status()
        .unwrap();
    assert!(status.success());
    let second = runs.join("b-second/results.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    for stage in r["stages"].as_array_mut().unwrap() {
        if stage["id"] == "rados-read[mode=rand]" {
            stage["cluster"] =
                serde_json::json!({"interval_s": 1.0, "unhealthy": "16 PGs were recovering"});
            stage["hosts"] = serde_json::json!([{
                "host": "local", "interval_s": 1.0,
                "limited_by": ["CPU: every core of local ≥ 90% busy"], "sampler_cpu_s": 0.02
            }]);
        }
    }
    std::fs::write(&second, serde_json::to_string_pretty(&r).unwrap()).unwrap();

    let suite = common::root().join("tests/repeat/counter.yaml");
    let counter = |out: &str, suite: &Path, start: u32| {
        let work = dir.join(format!("work-{out}"));
        std::fs::create_dir_all(&work).unwrap();
        common::pipeline(&[
            "run",
            suite.to_str().unwrap(),
            "--out",
            runs.join(out).to_str().unwrap(),
            "--set",
            &format!("dir={}", work.display()),
            "--set",
            &format!("start={start}"),
        ])
    };
    assert_eq!(counter("d-counter", &suite, 100).status.code(), Some(0));
    assert_eq!(counter("e-counter", &suite, 200).status.code(), Some(0));
    let gated = dir.join("gated.yaml");
    std::fs::write(
        &gated,
        std::fs::read_to_string(&suite).unwrap()
            + &format!(
                "report:\n  compare_to: {}\n  thresholds: {{runs: -2%}}\n",
                runs.join("d-counter").display()
            ),
    )
    .unwrap();
    let out = counter("f-counter", &gated, 0);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    runs
}

fn run_dirs(runs: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    dirs.sort();
    dirs
}

fn publish(url: &str, dirs: &[String]) -> Output {
    let mut args = vec!["publish"];
    args.extend(dirs.iter().map(String::as_str));
    args.extend(["--to", url]);
    common::pipeline(&args)
}

const TABLES: [&str; 5] = [
    "runs",
    "stage_instances",
    "metrics",
    "series",
    "regressions",
];

fn counts(pg: &Server) -> Vec<String> {
    TABLES
        .iter()
        .map(|t| pg.psql(&format!("SELECT count(*) FROM {t}")))
        .collect()
}

/// Publishing writes every table; publishing again changes nothing; a run
/// whose folder changed after it was published is refused, not overwritten.
fn publish_twice_changes_nothing() {
    let pg = Server::start("twice");
    let runs = runs_folder("twice");
    let dirs = run_dirs(&runs);
    let stdout = ok(publish(&pg.url(), &dirs));
    assert_eq!(stdout.matches("published ").count(), dirs.len(), "{stdout}");
    let first = counts(&pg);
    assert_eq!(first[0], dirs.len().to_string());
    for (table, n) in TABLES.iter().zip(&first) {
        assert_ne!(n, "0", "{table} is empty");
    }
    // Repetitions are their own column, not a label.
    assert_eq!(
        pg.psql("SELECT count(*) FROM metrics WHERE labels ? 'repetition'"),
        "0"
    );
    assert_ne!(
        pg.psql("SELECT count(*) FROM metrics WHERE repetition = 3"),
        "0"
    );
    let stamp = pg.psql("SELECT max(published_at) FROM runs");

    let stdout = ok(publish(&pg.url(), &dirs));
    assert_eq!(
        stdout.matches("already published ").count(),
        dirs.len(),
        "{stdout}"
    );
    assert_eq!(counts(&pg), first);
    assert_eq!(pg.psql("SELECT max(published_at) FROM runs"), stamp);

    let file = runs.join("a-first/results.json");
    // The same run id, other content (the host it claims).
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    r["host"]["hostname"] = Value::from("elsewhere");
    std::fs::write(&file, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let (code, _, stderr) = text(&publish(&pg.url(), &dirs[..1]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("already published with different content"),
        "{stderr}"
    );
    assert_eq!(counts(&pg), first);
}

fn history(source: &[&str], metric: &str, stage: Option<&str>, format: &str) -> String {
    let mut args = vec!["history"];
    args.extend_from_slice(source);
    args.extend(["--metric", metric, "--format", format]);
    if let Some(stage) = stage {
        args.extend(["--stage", stage]);
    }
    ok(common::pipeline(&args))
}

/// history --db says byte for byte what history over the folders says.
fn history_from_the_database_matches_the_folders() {
    let pg = Server::start("history");
    let runs = runs_folder("history");
    ok(publish(&pg.url(), &run_dirs(&runs)));
    let folder = runs.to_str().unwrap();
    let url = pg.url();
    let cases = [
        ("bandwidth", None),
        ("bandwidth", Some("rados-read")),
        ("runs", None),
        ("runs", Some("count")),
        ("no-such-metric", None),
    ];
    for (metric, stage) in cases {
        for format in ["markdown", "json"] {
            let from_folders = history(&[folder], metric, stage, format);
            let from_db = history(&["--db", &url], metric, stage, format);
            assert_eq!(from_db, from_folders, "{metric} {stage:?} {format}");
        }
    }
    // The cases cover what they are meant to: repetitions, an unclean
    // figure and a gate that fires.
    let runs_md = history(&[folder], "runs", None, "markdown");
    assert!(
        runs_md.contains("(n=3)") && runs_md.contains("❌ gate"),
        "{runs_md}"
    );
    let bw = history(&[folder], "bandwidth", None, "markdown");
    assert!(bw.contains("⚠️ cluster not clean"), "{bw}");
}

/// A database migrated by a newer pipeline is refused, naming both versions.
fn a_newer_schema_is_refused() {
    let pg = Server::start("migrations");
    let runs = runs_folder("migrations");
    let dirs = run_dirs(&runs);
    ok(publish(&pg.url(), &dirs[..1]));
    assert_eq!(
        pg.psql("SELECT string_agg(version || ':' || name, ',') FROM schema_migrations"),
        "1:initial"
    );
    pg.psql("INSERT INTO schema_migrations (version, name) VALUES (99, 'from-the-future')");
    let (code, _, stderr) = text(&publish(&pg.url(), &dirs[1..2]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("schema is at version 99, newer than this pipeline knows (1)"),
        "{stderr}"
    );
    let (code, _, stderr) = text(&common::pipeline(&[
        "history",
        "--db",
        &pg.url(),
        "--metric",
        "bandwidth",
    ]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("version 99"), "{stderr}");
}

/// A refused login and a server that is not there: exit 1, a message that
/// says so, and never the password.
fn connection_failures_are_clear_and_keep_the_password() {
    let pg = Server::start("login");
    let wrong = format!(
        "postgres://{}:wrong-pw-42@127.0.0.1:{}/postgres",
        server::USER,
        pg.port
    );
    let (code, _, stderr) = text(&common::pipeline(&[
        "history", "--db", &wrong, "--metric", "x",
    ]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot connect") && stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wrong-pw-42") && stderr.contains("pipeline:***@"),
        "{stderr}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let gone = format!("postgres://u:{}@127.0.0.1:{port}/db", server::PASSWORD);
    let (code, _, stderr) = text(&publish(&gone, &["/nonexistent".into()]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(!stderr.contains(server::PASSWORD), "{stderr}");

    let (code, _, stderr) = text(&publish(
        "postgres://u@127.0.0.1:notaport/db",
        &["/x".into()],
    ));
    assert_eq!(code, Some(2), "{stderr}");
}

/// Quotes, backslashes, markup and control characters in names and labels
/// come back as they went in; a NUL (which PostgreSQL text cannot hold) is
/// refused with a message, and nothing of that run is kept.
fn hostile_strings_round_trip_or_are_refused() {
    let pg = Server::start("hostile");
    let dir = common::temp_dir("pg-hostile");
    let hostile = "it's \"q\" \\ '); DROP TABLE runs; -- \u{1b}]0;x\u{7}\t<b>\u{9b}é";
    let base = common::root().join("tests/compare/full-baseline-1.results.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    for stage in r["stages"].as_array_mut().unwrap() {
        for m in stage["metrics"].as_array_mut().unwrap() {
            m["name"] = Value::from(format!("{}{hostile}", m["name"].as_str().unwrap()));
            m["labels"] = serde_json::json!({ hostile: hostile });
        }
    }
    let run = dir.join("runs/hostile");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.json"), serde_json::to_string(&r).unwrap()).unwrap();
    ok(publish(&pg.url(), &[run.display().to_string()]));
    let metric = format!("bandwidth{hostile}");
    for format in ["markdown", "json"] {
        let folders = history(&[dir.join("runs").to_str().unwrap()], &metric, None, format);
        assert_eq!(
            history(&["--db", &pg.url()], &metric, None, format),
            folders
        );
    }
    assert_eq!(pg.psql("SELECT count(*) FROM runs"), "1");

    r["run_id"] = Value::from("nul-run");
    r["stages"][0]["metrics"][0]["name"] = Value::from("nul\u{0}here");
    let nul = dir.join("runs2/nul");
    std::fs::create_dir_all(&nul).unwrap();
    std::fs::write(nul.join("results.json"), serde_json::to_string(&r).unwrap()).unwrap();
    let (code, _, stderr) = text(&publish(&pg.url(), &[nul.display().to_string()]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not published"), "{stderr}");
    assert_eq!(pg.psql("SELECT count(*) FROM runs"), "1");
    assert_eq!(
        pg.psql("SELECT count(*) FROM stage_instances WHERE run_id = 'nul-run'"),
        "0"
    );
}

/// What the dashboard's Grafana macros and variables become here: the whole
/// time range, and the repeat-counter suite's `runs` metric of stage `count`.
fn concrete(sql: &str) -> String {
    let mut s = sql.to_string();
    // $__timeFilter(col) -> col BETWEEN the range's ends.
    while let Some(start) = s.find("$__timeFilter(") {
        let open = start + "$__timeFilter(".len();
        let close = open + s[open..].find(')').expect("closing parenthesis");
        let column = s[open..close].to_string();
        s.replace_range(
            start..=close,
            &format!("{column} BETWEEN '1970-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z'"),
        );
    }
    for (from, to) in [
        ("$__timeFrom()", "'1970-01-01T00:00:00Z'"),
        ("$__timeTo()", "'2100-01-01T00:00:00Z'"),
        ("${suite}", "repeat-counter"),
        ("$suite", "repeat-counter"),
        ("${metric}", "runs"),
        ("$metric", "runs"),
        ("${stage}", "count"),
        ("$stage", "count"),
    ] {
        s = s.replace(from, to);
    }
    assert!(
        !s.contains('$'),
        "a macro or variable the test does not know: {s}"
    );
    s
}

/// Every panel's SQL (and every variable's query) returns rows.
fn the_dashboard_queries_return_rows() {
    let pg = Server::start("grafana");
    let runs = runs_folder("grafana");
    ok(publish(&pg.url(), &run_dirs(&runs)));
    let dashboards: Vec<PathBuf> = std::fs::read_dir(common::root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(!dashboards.is_empty());
    let mut ran = 0;
    for file in dashboards {
        let d: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(
            d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
            "{}",
            file.display()
        );
        let mut queries: Vec<(String, String)> = Vec::new();
        for panel in d["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                if let Some(sql) = t["rawSql"].as_str() {
                    queries.push((panel["title"].as_str().unwrap_or("?").into(), sql.into()));
                }
            }
        }
        for v in d["templating"]["list"].as_array().into_iter().flatten() {
            if v["type"] == "query" {
                let sql = v["query"]
                    .as_str()
                    .or(v["query"]["rawSql"].as_str())
                    .unwrap();
                queries.push((format!("variable {}", v["name"]), sql.into()));
            }
        }
        for a in d["annotations"]["list"].as_array().into_iter().flatten() {
            if let Some(sql) = a["target"]["rawSql"].as_str().or(a["rawQuery"].as_str()) {
                queries.push((format!("annotation {}", a["name"]), sql.into()));
            }
        }
        for (title, sql) in queries {
            let sql = concrete(&sql);
            let rows = pg.psql(&sql);
            assert!(
                !rows.is_empty(),
                "{}: {title}: no rows from\n{sql}",
                file.display()
            );
            ran += 1;
        }
    }
    assert!(ran >= 4, "only {ran} queries");
}

fn main() {
    let needs = [Tier::Integrations];
    pipeline_test_tiers::run(vec![
        live(
            "publish_twice_changes_nothing",
            &needs,
            publish_twice_changes_nothing,
        ),
        live(
            "history_from_the_database_matches_the_folders",
            &needs,
            history_from_the_database_matches_the_folders,
        ),
        live(
            "a_newer_schema_is_refused",
            &needs,
            a_newer_schema_is_refused,
        ),
        live(
            "connection_failures_are_clear_and_keep_the_password",
            &needs,
            connection_failures_are_clear_and_keep_the_password,
        ),
        live(
            "hostile_strings_round_trip_or_are_refused",
            &needs,
            hostile_strings_round_trip_or_are_refused,
        ),
        live(
            "the_dashboard_queries_return_rows",
            &needs,
            the_dashboard_queries_return_rows,
        ),
    ]);
}
