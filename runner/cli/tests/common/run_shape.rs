//! A run reduced to what does not change between runs: exit code, run
//! status, each stage's status, metric names, outputs and error, the files
//! in the run folder and the report's headings (figures are measurements,
//! not compared).

use std::path::Path;

use serde_json::{Value, json};

fn shape_of_stage(s: &Value) -> Value {
    // The data cases' metrics come from `exec` stages that echo fixed
    // numbers: their values are deterministic and compared too.
    let metrics: Vec<Value> = s["metrics"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    Value::String(format!(
                        "{}={} {}",
                        m["name"].as_str().unwrap_or("?"),
                        m["value"],
                        m["unit"].as_str().unwrap_or("")
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "id": s["id"],
        "status": s["status"],
        "metrics": metrics,
        "outputs": s["outputs"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default(),
        "error": s["error"],
        "skip_reason": s["skip_reason"],
    })
}

fn files_in(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_in(&path, base, out);
        } else {
            out.push(
                path.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
            );
        }
    }
}

pub fn run_shape(case: &Path) -> (Value, String) {
    let rel = super::relative(case);
    let out_dir = super::temp_dir(&format!(
        "run-{}",
        case.file_stem().unwrap().to_string_lossy()
    ));
    let run_dir = out_dir.join("run");
    let out = super::pipeline(&["run", &rel, "--out", run_dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        run_dir.join("results.json").exists(),
        "{rel}: no results.json\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap_or_else(|e| {
        panic!(
            "{rel}: no report.md ({e}) {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut files = Vec::new();
    files_in(&run_dir, &run_dir, &mut files);
    files.sort();
    let headings: Vec<&str> = report.lines().filter(|l| l.starts_with('#')).collect();
    let shape = json!({
        "exit_code": out.status.code(),
        "status": results["status"],
        "stages": results["stages"].as_array().unwrap().iter().map(shape_of_stage).collect::<Vec<_>>(),
        "cleanup": results["cleanup"].as_array().unwrap().iter().map(shape_of_stage).collect::<Vec<_>>(),
        "files": files,
        "report_headings": headings,
    });
    // Every file of the run folder, raw command outputs included; but the
    // suite's own copy, which holds what its author wrote (a default).
    let mut texts = String::new();
    for f in files.iter().filter(|f| *f != "pipeline.yaml") {
        texts.push_str(&String::from_utf8_lossy(
            &std::fs::read(run_dir.join(f)).unwrap_or_default(),
        ));
    }
    assert!(
        stdout.contains(&format!("report: {}", run_dir.join("report.md").display())),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
    (shape, texts)
}
