//! The Debian package, installed for real (tier `package`): the .deb of
//! scripts/build-deb.sh (or $PIPELINE_DEB) goes into a throw-away
//! copy-on-write overlay of the Debian trixie root (scripts/ceph-root.sh
//! 18.2) with `dpkg -i`, and the installed runner, man page and bash
//! completion are used there as a user would: the completion through a real
//! interactive login bash under tmux, read off the screen.

use pipeline_test_tiers::{Tier, live};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The root the overlay's lower layer is (never written to): trixie under
/// $PIPELINE_CLIENT_ROOTS (scripts/test.sh sets it), default
/// /var/cache/pipeline/roots. The tier promised it: missing, it fails.
fn trixie_root() -> PathBuf {
    let roots = std::env::var_os("PIPELINE_CLIENT_ROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/pipeline/roots"));
    let root = roots.join("trixie");
    assert!(
        root.join(".pipeline-root").is_file(),
        "the package tier is on, but {} is not a finished root: run scripts/ceph-root.sh 18.2",
        root.display()
    );
    root
}
/// The user the completion test logs in as, created inside the overlay.
const USER: &str = "debuser";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Runs `cmd`, panics with its output unless it succeeds; its stdout.
fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The .deb: $PIPELINE_DEB, else what scripts/build-deb.sh builds (its last line).
fn deb() -> PathBuf {
    if let Some(path) = std::env::var_os("PIPELINE_DEB") {
        return PathBuf::from(path);
    }
    let out = ok(Command::new(repo_root().join("scripts/build-deb.sh")).current_dir(repo_root()));
    let last = out.lines().last().unwrap_or_default().trim();
    let path = PathBuf::from(last);
    assert!(
        last.ends_with(".deb") && path.is_file(),
        "scripts/build-deb.sh did not end with a .deb path:\n{out}"
    );
    path
}

/// An overlay over the trixie root with /proc, /dev and /dev/pts in it, and
/// a tmux server of its own; all of it undone on drop, also after a failed
/// assertion (the panic unwinds through it).
struct Overlay {
    dir: PathBuf,
    merged: PathBuf,
    /// Mount points to undo, innermost last.
    mounts: Vec<PathBuf>,
    tmux_socket: String,
    tmux_started: bool,
}

impl Overlay {
    fn new() -> Overlay {
        let lower = trixie_root();
        let dir =
            std::env::temp_dir().join(format!("pipeline-test-package-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut overlay = Overlay {
            merged: dir.join("merged"),
            dir,
            mounts: Vec::new(),
            tmux_socket: format!("pipeline-package-{}", std::process::id()),
            tmux_started: false,
        };
        for sub in ["upper", "work", "merged"] {
            std::fs::create_dir_all(overlay.dir.join(sub)).expect("overlay folders");
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            overlay.dir.join("upper").display(),
            overlay.dir.join("work").display()
        );
        overlay.mount(
            Command::new("mount").args(["-t", "overlay", "overlay", "-o", &options]),
            PathBuf::new(),
        );
        overlay.mount(
            Command::new("mount").args(["-t", "proc", "proc"]),
            "proc".into(),
        );
        overlay.mount(Command::new("mount").args(["--bind", "/dev"]), "dev".into());
        overlay.mount(
            Command::new("mount").args(["--bind", "/dev/pts"]),
            "dev/pts".into(),
        );
        overlay
    }

    /// Mounts onto `merged/at` (`cmd` lacks only the target) and remembers it.
    fn mount(&mut self, cmd: &mut Command, at: PathBuf) {
        let target = self.merged.join(at);
        ok(cmd.arg(&target));
        self.mounts.push(target);
    }

    fn chroot(&self) -> Command {
        let mut cmd = Command::new("chroot");
        cmd.arg(&self.merged)
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        cmd
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.tmux_socket]);
        cmd
    }

    fn screen(&self) -> String {
        ok(self.tmux().args(["capture-pane", "-p", "-t", "login"]))
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if self.tmux_started {
            let _ = self.tmux().arg("kill-server").output();
        }
        // Innermost first; lazily when something still holds one (a process
        // the killed server left), so the overlay never stays mounted.
        for target in self.mounts.iter().rev() {
            let done = Command::new("umount").arg(target).output();
            if !done.is_ok_and(|o| o.status.success()) {
                let _ = Command::new("umount").arg("--lazy").arg(target).output();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `state` every 100 ms until `ready` holds for it, panicking with
/// `what` and the last state after `limit`.
fn wait_until(
    limit: Duration,
    what: &str,
    mut state: impl FnMut() -> String,
    ready: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let now = state();
        if ready(&now) {
            return now;
        }
        assert!(
            start.elapsed() < limit,
            "gave up waiting for {what} after {limit:?}; last seen:\n{now}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn the_package_installs_and_its_runner_man_page_and_bash_completion_work() {
    let deb = deb();
    let overlay = Overlay::new();
    let inside = overlay.merged.join("tmp/pipeline.deb");
    std::fs::copy(&deb, &inside).expect("copy the .deb into the root");
    ok(overlay.chroot().args(["dpkg", "-i", "/tmp/pipeline.deb"]));

    let version = ok(overlay.chroot().args(["pipeline", "--version"]));
    assert_eq!(
        version.trim(),
        format!("pipeline {}", env!("CARGO_PKG_VERSION")),
        "pipeline --version"
    );
    // smoke.yaml needs no cluster; validating it reads only the file.
    ok(overlay.chroot().args([
        "pipeline",
        "validate",
        "/usr/share/doc/pipeline/examples/smoke.yaml",
    ]));
    // The root has no man-db; the page is where `man -w pipeline` would find it.
    for page in ["pipeline.1.gz", "pipeline-run.1.gz"] {
        let path = overlay.merged.join("usr/share/man/man1").join(page);
        assert!(path.is_file(), "{} is not installed", path.display());
    }
    // The run page is roff for `pipeline run` and documents its options.
    let run_page = ok(Command::new("gzip")
        .arg("-dc")
        .arg(overlay.merged.join("usr/share/man/man1/pipeline-run.1.gz")));
    assert!(
        run_page.contains(".TH pipeline-run"),
        "pipeline-run.1 is not a man page:\n{run_page}"
    );
    assert!(
        run_page.contains("\\-\\-locked"),
        "pipeline-run.1 does not document --locked:\n{run_page}"
    );
    for file in [
        "usr/share/bash-completion/completions/pipeline",
        "usr/share/zsh/vendor-completions/_pipeline",
        "usr/share/fish/vendor_completions.d/pipeline.fish",
    ] {
        assert!(
            overlay.merged.join(file).is_file(),
            "/{file} is not installed"
        );
    }

    bash_completes_subcommands(overlay);
}

/// A login shell of a fresh user (its ~/.bashrc from /etc/skel loads
/// bash-completion, which loads the package's script on first use).
fn bash_completes_subcommands(mut overlay: Overlay) {
    ok(overlay
        .chroot()
        .args(["useradd", "--create-home", "--shell", "/bin/bash", USER]));
    let login = format!(
        "TERM=screen chroot {} su - {USER}",
        overlay.merged.display()
    );
    overlay.tmux_started = true;
    ok(overlay.tmux().args([
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "login",
        "-x",
        "200",
        "-y",
        "50",
        &login,
    ]));
    wait_until(
        Duration::from_secs(30),
        "the login shell's prompt",
        || overlay.screen(),
        // capture-pane drops the prompt's trailing space.
        |screen| screen.lines().any(|l| l.trim_end().ends_with('$')),
    );
    // `run`, `report`, `runs` start with r: the first Tab completes nothing
    // more, the second lists them.
    ok(overlay
        .tmux()
        .args(["send-keys", "-t", "login", "pipeline r", "Tab", "Tab"]));
    let screen = wait_until(
        Duration::from_secs(30),
        "bash to list the completions",
        || overlay.screen(),
        |screen| {
            ["run", "report", "runs"]
                .iter()
                .all(|word| screen.split_whitespace().any(|w| w == *word))
        },
    );
    eprintln!("completion screen:\n{}", screen.trim_end());
}

fn main() {
    pipeline_test_tiers::run(vec![live(
        "the_package_installs_and_its_runner_man_page_and_bash_completion_work",
        &[Tier::Package],
        the_package_installs_and_its_runner_man_page_and_bash_completion_work,
    )]);
}
