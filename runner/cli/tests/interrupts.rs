//! Nothing is lost: cleanup runs after Ctrl-C (SIGINT) and SIGTERM, and
//! results.json of finished stages survives SIGKILL of the runner.

mod common;

use common::results;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

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

/// Waits until the `slow` stage's command runs: its shell has written its
/// pid (the output file exists before the command starts, so it would not
/// say the shell got that far).
fn wait_for_slow_stage(run_dir: &Path) {
    let pid_file = run_dir.parent().unwrap().join("slow.pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&pid_file).map_or(true, |p| !p.ends_with('\n')) {
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
    assert!(
        ended(slow_pid(&run_dir)),
        "the interrupted command lives on"
    );
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
    // The command the runner was waiting for dies with it (its own process
    // group does not save it: it gets SIGKILL when its parent dies).
    assert!(
        ended(slow_pid(&run_dir)),
        "the slow command outlived the runner"
    );
    // The run's lock died with it: `pipeline cleanup` may work on the folder
    // (nothing was created here), and marks the dead run failed.
    let out = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("nothing to clean up"), "{text}");
    assert_eq!(results(&run_dir).unwrap()["status"], "failed");
}

/// The pid the slow stage's shell wrote.
fn slow_pid(run_dir: &Path) -> i32 {
    let file = run_dir.parent().unwrap().join("slow.pid");
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{file:?}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// Whether `pid` has ended (gone, or a zombie), waiting up to 10 s.
fn ended(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()));
        match state {
            None => return true,
            Some(s) if s.starts_with('Z') || s.starts_with('X') => return true,
            Some(_) if Instant::now() > deadline => return false,
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A stage whose command leaves processes behind, in its group (`&`) and
/// out of it (`setsid`): the stage ends, and neither lives on; the escaped
/// one is named in the stage's record.
#[test]
fn processes_a_stage_leaves_behind_do_not_outlive_it() {
    let dir = common::temp_dir("leftover-processes");
    let (in_group, escaped) = (dir.join("in-group.pid"), dir.join("escaped.pid"));
    let file = dir.join("leftovers.yaml");
    std::fs::write(
        &file,
        format!(
            "name: leftovers\nstages:\n  - id: leaves-two\n    uses: exec\n    with:\n      command: [sh, -c, \"sleep 300 & echo $! > {0}; setsid sh -c 'echo $$ > {1}; exec sleep 301' & while [ ! -s {1} ]; do sleep 0.01; done\"]\n  - id: next\n    uses: exec\n    with: {{command: [echo, next]}}\n",
            in_group.display(),
            escaped.display(),
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for pid_file in [&in_group, &escaped] {
        let pid: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(ended(pid), "{pid_file:?}: still running");
    }
    let r = results(&run_dir).unwrap();
    let notes = r["stages"][0]["notes"].to_string();
    let escaped_pid = std::fs::read_to_string(&escaped).unwrap();
    assert!(
        notes.contains("stopped 1 process(es) the stage left running: ")
            && notes.contains(&format!("(pid {})", escaped_pid.trim())),
        "{notes}"
    );
    assert!(r["stages"][1]["notes"].is_null(), "{r:#}");
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

/// SIGKILL in the middle of disk-baseline: the scratch file stays (nothing
/// can run in a killed process), the ledger's journal names it, and
/// `pipeline cleanup` removes it and only it.
#[test]
fn a_killed_disk_baseline_leaves_its_scratch_file_to_pipeline_cleanup() {
    let dir = common::temp_dir("disk-sigkill");
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("someone-elses"), "keep").unwrap();
    let file = dir.join("disk.yaml");
    std::fs::write(
        &file,
        format!(
            "name: disk-sigkill\nstages:\n  - id: disk\n    uses: disk-baseline\n    with: {{targets: [{}], size: 16M, runtime: 60, tests: [fio-randread]}}\n",
            scratch.display()
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let mut child = spawn_run(&file, &run_dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&scratch).unwrap().count() < 2 {
        assert!(Instant::now() < deadline, "the scratch file never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500)); // into the fio run
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    let journal = std::fs::read_to_string(run_dir.join("created.jsonl")).unwrap();
    assert!(journal.contains("\"kind\":\"scratch-file\""), "{journal}");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 2);

    let out = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("removed: scratch-file `local:"), "{text}");
    let left: Vec<String> = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(left, ["someone-elses"]);
}
