//! The run folder's file system fills up mid-run (a 1 MiB tmpfs): the run
//! fails with a clear error, results.json is never truncated or half
//! written (the last complete version stays), and cleanup still runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test; unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a tmpfs needs root (scripts/test.sh runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(dir.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_run_folder_fails_the_run_keeps_results_whole_and_cleanup_runs() {
    let dir = common::temp_dir("disk-full");
    let disk = SmallDisk::mount(&dir.join("small"), "1M");
    let marker = dir.join("cleanup-ran");
    let suite = dir.join("suite.yaml");
    std::fs::write(
        &suite,
        format!(
            "name: disk-full\nstages:\n  - id: first\n    uses: exec\n    with: {{command: [echo, fits]}}\n  - id: fill\n    uses: exec\n    with: {{command: [head, -c, \"3000000\", /dev/zero]}}\n  - id: after\n    uses: exec\n    with: {{command: [echo, never]}}\ncleanup:\n  - id: marker\n    uses: exec\n    with: {{command: [touch, {}]}}\n",
            marker.display()
        ),
    )
    .unwrap();
    let run_dir = disk.0.join("run");
    let out = common::pipeline(&[
        "run",
        suite.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
    assert!(
        text.contains("error: results.json could not be written"),
        "{text}"
    );
    assert!(marker.exists(), "cleanup did not run: {text}");
    // Whole JSON: the last version that could be written.
    let saved = std::fs::read_to_string(run_dir.join("results.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&saved)
        .unwrap_or_else(|e| panic!("results.json is not whole JSON ({e}):\n{saved}"));
    assert_eq!(r["stages"][0]["id"], "first", "{r:#}");
    assert!(
        !run_dir.join(".results.json.tmp").exists(),
        "a half-written temporary file was left"
    );
}
