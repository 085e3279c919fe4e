//! Nothing is lost: cleanup runs after Ctrl-C (SIGINT) and SIGTERM, and
//! results.json of finished stages survives SIGKILL of the runner.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const PIPELINE: &str = r#"
name: interrupt
vars:
  marker: MARKER
stages:
  - id: quick
    uses: exec
    with:
      command: [echo, done]
  - id: slow
    uses: exec
    with:
      command: [sh, -c, "echo $$ > PIDFILE; exec sleep 60"]
  - id: after
    uses: exec
    with:
      command: [echo, never]
cleanup:
  - id: cleanup-marker
    uses: exec
    with:
      command: [touch, "{{ vars.marker }}"]
"#;

fn start(name: &str) -> (Child, std::path::PathBuf, std::path::PathBuf) {
    let dir = common::temp_dir(name);
    let marker = dir.join("cleanup-ran");
    let file = dir.join("interrupt.yaml");
    let pid_file = dir.join("slow.pid");
    let text = PIPELINE
        .replace("MARKER", marker.to_str().unwrap())
        .replace("PIDFILE", pid_file.to_str().unwrap());
    std::fs::write(&file, text).unwrap();
    let run_dir = dir.join("run");
    (spawn_run(&file, &run_dir), run_dir, marker)
}

/// `pipeline run FILE --out RUN_DIR` in the background, output discarded.
fn spawn_run(file: &Path, run_dir: &Path) -> Child {
    common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

fn results(run_dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(run_dir.join("results.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Waits until the `slow` stage's command has started (its stdout file exists).
fn wait_for_slow_stage(run_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !run_dir.join("stages/slow/01-command.stdout").exists() {
        assert!(Instant::now() < deadline, "the slow stage never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

fn wait(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the runner did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_interrupted(sig: i32, name: &str) {
    let (mut child, run_dir, marker) = start(name);
    wait_for_slow_stage(&run_dir);
    signal(&child, sig);
    assert_eq!(wait(&mut child), Some(130), "exit code after signal {sig}");
    assert!(marker.exists(), "cleanup did not run after signal {sig}");
    let r = results(&run_dir).expect("results.json");
    assert_eq!(r["status"], "cancelled");
    let statuses: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "cancelled", "cancelled"]);
    assert_eq!(r["cleanup"][0]["status"], "succeeded");
    assert!(run_dir.join("report.md").exists());
}

#[test]
fn cleanup_runs_after_sigint() {
    check_interrupted(libc::SIGINT, "sigint");
}

#[test]
fn cleanup_runs_after_sigterm() {
    check_interrupted(libc::SIGTERM, "sigterm");
}

#[test]
fn finished_stages_survive_sigkill() {
    let (mut child, run_dir, _) = start("sigkill");
    wait_for_slow_stage(&run_dir);
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let r = results(&run_dir).expect("results.json must be complete JSON after SIGKILL");
    assert_eq!(r["status"], "running", "the run never finished");
    let stages = r["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1, "{r:#}");
    assert_eq!(stages[0]["id"], "quick");
    assert_eq!(stages[0]["status"], "succeeded");
    // The killed runner's child is in its own process group and outlives it;
    // stop it by the pid it wrote, so the test leaves nothing behind.
    let pid_file = run_dir.parent().unwrap().join("slow.pid");
    if let Some(pid) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
    {
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// A stage interrupted mid-measurement still removes what it made on the
/// host (here disk-baseline's scratch file).
#[test]
fn interrupted_disk_baseline_removes_its_scratch_file() {
    let dir = common::temp_dir("disk-interrupt");
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let file = dir.join("disk.yaml");
    std::fs::write(
        &file,
        format!(
            "name: disk-interrupt\nstages:\n  - id: disk\n    uses: disk-baseline\n    with: {{targets: [{}], size: 16M, runtime: 60, tests: [fio-randread]}}\n",
            scratch.display()
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let mut child = spawn_run(&file, &run_dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&scratch).unwrap().next().is_none() {
        assert!(Instant::now() < deadline, "the scratch file never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500)); // into the fio run
    signal(&child, libc::SIGINT);
    assert_eq!(wait(&mut child), Some(130));
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        results(&run_dir).unwrap()["stages"][0]["status"],
        "cancelled"
    );
}
