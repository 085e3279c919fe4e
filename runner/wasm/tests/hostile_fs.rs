//! A hostile plugin (`plugins/guests/testing/hostile-fs`) against the file
//! side of the sandbox: links out of its files folder (symbolic, dangling,
//! hard), FIFOs and sockets, artifacts over planted links or over the stage's
//! evidence, and granted programs named inside the run folder by `..` forms.
//!
//! Each test runs in a folder it knows beforehand, so it can plant what an
//! earlier command would have left (a link, a FIFO) and give the plugin
//! absolute paths for its granted `ln`/`mkfifo`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::progress::Progress;
use pipeline_engine::results::{RunResults, StageRecord, StageStatus};
use pipeline_engine::runner::{self, RunOptions};

mod common;
use common::*;

/// A run folder laid out the way the runner will make it.
struct Layout {
    dir: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let dir = temp_dir("hostile-fs");
        std::fs::create_dir_all(dir.join("run/stages/plugin/files")).unwrap();
        Layout { dir }
    }
    fn run(&self) -> PathBuf {
        self.dir.join("run")
    }
    /// The stage folder: its evidence (command outputs, plugin.log, artifacts).
    fn stage(&self) -> PathBuf {
        self.dir.join("run/stages/plugin")
    }
    /// The plugin's own files (what `read-file`/`write-file` paths are relative to).
    fn files(&self) -> PathBuf {
        self.stage().join("files")
    }
    /// A place outside the run folder.
    fn outside(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs one `hostile-fs` stage with these grants and parameters.
    fn run_stage(&self, grants: &str, with: &[(&str, String)]) -> RunResults {
        let with: String = with
            .iter()
            .map(|(k, v)| format!("      {k}: {v}\n"))
            .collect();
        let yaml = format!(
            "name: hostile-fs\nstages:\n  - id: plugin\n    uses: ./hostile_fs.wasm\n    timeout: 60s\n    grants: {grants}\n    with:\n{with}"
        );
        std::fs::copy(guest("hostile-fs"), self.dir.join("hostile_fs.wasm")).unwrap();
        let file = self.dir.join("pipeline.yaml");
        std::fs::write(&file, yaml).unwrap();
        let plan = compile_file(&file, &registry(limits()), &CompileOptions::default())
            .unwrap_or_else(|d| panic!("{d}"));
        runner::run(
            &plan,
            RunOptions {
                out_dir: Some(self.run()),
                runs_root: self.dir.clone(),
                signals: Signals::default(),
                progress: Progress::Quiet,
                live: None,
            },
        )
        .unwrap()
        .results
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn yaml_list(items: &[&str]) -> String {
    format!("[{}]", items.join(", "))
}

fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The stage failed, refused with a message containing `expected`.
fn refused<'a>(r: &'a RunResults, expected: &str) -> &'a StageRecord {
    let s = stage(r, "plugin");
    assert_eq!(s.status, StageStatus::Failed, "{:?}", s.error);
    let e = s.error.as_deref().unwrap_or_default();
    assert!(
        e.starts_with("plugin `hostile-fs` tried to") && e.contains(expected),
        "{e}"
    );
    s
}

#[test]
fn a_dangling_symlink_left_by_a_granted_command_leads_no_write_outside() {
    let l = Layout::new();
    let target = l.outside("created-outside.txt");
    let link = l.files().join("dangling");
    let r = l.run_stage(
        "{exec: [ln], files: work}",
        &[
            ("mode", "write".into()),
            ("path", "dangling".into()),
            (
                "argv",
                yaml_list(&["ln", "-s", &path_str(&target), &path_str(&link)]),
            ),
        ],
    );
    refused(&r, "symbolic link");
    assert!(link.is_symlink(), "the command did leave the link");
    assert!(
        !target.exists(),
        "a file was created outside the run folder"
    );
}

#[test]
fn a_symlink_to_a_file_outside_is_neither_read_nor_written() {
    let l = Layout::new();
    let secret = l.outside("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    std::os::unix::fs::symlink(&secret, l.files().join("escape")).unwrap();
    for mode in ["read", "write"] {
        let r = l.run_stage(
            "{files: work}",
            &[("mode", mode.into()), ("path", "escape".into())],
        );
        let s = refused(&r, "symbolic link");
        assert!(!s.outputs.contains_key("read"));
        std::fs::remove_file(l.run().join("results.json")).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
}

#[test]
fn a_hard_link_to_a_file_outside_is_neither_read_nor_written() {
    let l = Layout::new();
    let secret = l.outside("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    // What `ln SECRET files/hard` (a granted command) would leave.
    std::fs::hard_link(&secret, l.files().join("hard")).unwrap();
    for mode in ["read", "write"] {
        let r = l.run_stage(
            "{files: work}",
            &[("mode", mode.into()), ("path", "hard".into())],
        );
        let s = refused(&r, "2 hard links");
        assert!(!s.outputs.contains_key("read"), "{:?}", s.outputs);
        std::fs::remove_file(l.run().join("results.json")).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
}

#[test]
fn a_folder_link_cannot_reach_the_run_results_or_other_stages() {
    let l = Layout::new();
    std::os::unix::fs::symlink(l.run(), l.files().join("up")).unwrap();
    for path in ["up/pipeline.yaml", "../plugin.log", "../../other/files/x"] {
        let r = l.run_stage(
            "{files: work}",
            &[("mode", "read".into()), ("path", path.into())],
        );
        let s = stage(&r, "plugin");
        assert_eq!(s.status, StageStatus::Failed, "{path}: {:?}", s.outputs);
        assert!(!s.outputs.contains_key("read"));
        std::fs::remove_file(l.run().join("results.json")).unwrap();
    }
}

#[test]
fn a_plugin_file_named_like_the_evidence_does_not_touch_it() {
    let l = Layout::new();
    let r = l.run_stage(
        "{exec: [echo], files: work}",
        &[
            ("mode", "write".into()),
            ("path", "01-echo.stdout".into()),
            ("argv", "[echo, real output]".into()),
        ],
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    let evidence = l.stage().join("01-echo.stdout");
    assert_eq!(std::fs::read_to_string(evidence).unwrap(), "real output\n");
    // The plugin's file went to its own folder.
    assert_eq!(
        std::fs::read_to_string(l.files().join("01-echo.stdout")).unwrap(),
        "forged by hostile-fs\n"
    );
}

#[test]
fn an_artifact_never_overwrites_the_stage_evidence() {
    for name in ["01-echo.stdout", "plugin.log"] {
        let l = Layout::new();
        let r = l.run_stage(
            "{exec: [echo]}",
            &[
                ("mode", "artifact".into()),
                ("path", name.into()),
                ("argv", "[echo, real output]".into()),
            ],
        );
        let s = stage(&r, "plugin");
        assert_eq!(s.status, StageStatus::Failed, "{name}");
        let e = s.error.as_deref().unwrap_or_default();
        assert!(
            e.contains(&format!("cannot write artifact `{name}`")),
            "{e}"
        );
        assert!(e.contains("already exists"), "{e}");
        let kept = std::fs::read_to_string(l.stage().join(name)).unwrap();
        assert!(!kept.contains("forged"), "{name} was overwritten: {kept}");
    }
}

#[test]
fn an_artifact_never_follows_a_planted_link() {
    // Artifacts need no grant at all: a link left in the stage folder by an
    // earlier command must not turn one into a write anywhere.
    let l = Layout::new();
    let target = l.outside("artifact-outside.txt");
    std::os::unix::fs::symlink(&target, l.stage().join("report.txt")).unwrap();
    let r = l.run_stage(
        "{}",
        &[("mode", "artifact".into()), ("path", "report.txt".into())],
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    let e = s.error.as_deref().unwrap_or_default();
    assert!(e.contains("cannot write artifact `report.txt`"), "{e}");
    assert!(!target.exists(), "the artifact was written outside");
}

/// Runs `f` on a thread; panics if it has not returned after `limit` (a
/// read that blocks forever must fail the test, not hang it).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("still blocked after {limit:?}"))
}

#[test]
fn reading_a_fifo_is_refused_at_once_instead_of_blocking() {
    let started = Instant::now();
    // The stage's timeout is 60 s; the attack would block forever.
    let error = within(Duration::from_secs(45), || {
        let l = Layout::new();
        let fifo = l.files().join("pipe");
        let r = l.run_stage(
            "{exec: [mkfifo], files: work}",
            &[
                ("mode", "read".into()),
                ("path", "pipe".into()),
                ("argv", yaml_list(&["mkfifo", &path_str(&fifo)])),
            ],
        );
        stage(&r, "plugin").error.clone().unwrap_or_default()
    });
    assert!(
        error.starts_with("plugin `hostile-fs` tried to read `pipe`")
            && error.contains("FIFO (named pipe)"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn reading_a_socket_is_refused() {
    let l = Layout::new();
    let _listener = std::os::unix::net::UnixListener::bind(l.files().join("sock")).unwrap();
    let r = l.run_stage(
        "{files: work}",
        &[("mode", "read".into()), ("path", "sock".into())],
    );
    refused(&r, "it is a socket");
}

#[test]
fn a_granted_program_inside_the_run_folder_never_runs_however_it_is_named() {
    let l = Layout::new();
    let marker = l.outside("hijacked");
    let fake = l.files().join("echo");
    std::fs::write(&fake, format!("#!/bin/sh\ntouch {}\n", path_str(&marker))).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A link outside the run folder that points in.
    let outside_link = l.outside("echo");
    std::os::unix::fs::symlink(&fake, &outside_link).unwrap();
    let cwd = std::env::current_dir().unwrap();
    let ups = "../".repeat(cwd.components().count() - 1);
    let forms = [
        path_str(&fake),
        format!("/tmp/..{}", path_str(&fake)),
        format!(
            "/proc/self/cwd/{ups}{}",
            path_str(&fake).trim_start_matches('/')
        ),
        format!("{}/run/../run/stages/plugin/files/echo", path_str(&l.dir)),
        path_str(&outside_link),
    ];
    for program in forms {
        let r = l.run_stage(
            "{exec: [echo]}",
            &[("mode", "exec".into()), ("argv", yaml_list(&[&program]))],
        );
        let s = refused(&r, "inside the run folder");
        assert!(s.commands.is_empty(), "{program} ran: {:?}", s.commands);
        assert!(!marker.exists(), "{program} ran");
        std::fs::remove_file(l.run().join("results.json")).unwrap();
    }
    // The real one still runs.
    let r = l.run_stage(
        "{exec: [echo]}",
        &[("mode", "exec".into()), ("argv", "[echo, fine]".into())],
    );
    assert_eq!(stage(&r, "plugin").status, StageStatus::Succeeded);
}

#[test]
fn a_command_that_swaps_its_output_file_for_a_link_leaks_nothing() {
    // `ln -sf SECRET <stage>/01-ln.stdout` replaces the command's own output
    // file: reading it back for the plugin must not follow the link.
    let l = Layout::new();
    let secret = l.outside("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    let own_output = l.stage().join("01-ln.stdout");
    let r = l.run_stage(
        "{exec: [ln]}",
        &[
            ("mode", "exec".into()),
            (
                "argv",
                yaml_list(&["ln", "-sf", &path_str(&secret), &path_str(&own_output)]),
            ),
        ],
    );
    let s = stage(&r, "plugin");
    assert!(own_output.is_symlink(), "the command did swap its output");
    let leaked = s
        .outputs
        .get("stdout")
        .map(|v| v.to_string())
        .unwrap_or_default();
    assert!(!leaked.contains("secret"), "{leaked}");
}

#[test]
fn links_planted_where_the_host_writes_lead_nowhere() {
    // The stage's log, a command's output file, the plugin's files folder:
    // each replaced by a link out, as an earlier command could leave them.
    let l = Layout::new();
    let log_target = l.outside("log-outside.txt");
    std::os::unix::fs::symlink(&log_target, l.stage().join("plugin.log")).unwrap();
    let out_target = l.outside("stdout-outside.txt");
    std::os::unix::fs::symlink(&out_target, l.stage().join("01-echo.stdout")).unwrap();
    let elsewhere = l.outside("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::remove_dir(l.files()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, l.files()).unwrap();

    let r = l.run_stage(
        "{exec: [echo], files: work}",
        &[
            ("mode", "write".into()),
            ("path", "note.txt".into()),
            ("argv", "[echo, hi]".into()),
        ],
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed, "{:?}", s.outputs);
    assert!(!out_target.exists(), "a command's output went outside");
    assert!(!log_target.exists(), "plugin.log went outside");
    std::fs::remove_file(l.run().join("results.json")).unwrap();

    // Without the command: the write itself meets the linked files folder.
    let r = l.run_stage(
        "{files: work}",
        &[("mode", "write".into()), ("path", "note.txt".into())],
    );
    refused(&r, "symbolic link");
    assert!(
        !elsewhere.join("note.txt").exists(),
        "the write went outside"
    );
    assert!(!log_target.exists(), "plugin.log went outside");
}
