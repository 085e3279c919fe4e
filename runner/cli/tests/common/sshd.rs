//! A real OpenSSH server for the multi-host tests: `/usr/sbin/sshd -D`
//! started by the test on the loopback addresses 127.0.0.2 and 127.0.0.3
//! (port 2222, or the next free port when another run holds it), with host
//! and client keys generated for the test, and killed — with every session it
//! started — when the [`Sshd`] is dropped.
//!
//! Two "hosts" are two addresses of this machine: enough to exercise the SSH
//! transport, per-host fan-out and the failure paths (wrong key, unknown host
//! key, host down at 127.0.0.4) without containers.
//!
//! One server at a time per test process: [`Sshd::start`] takes a lock that
//! the returned value holds, so the tests of one binary take turns (they also
//! share iperf3 ports and the machine's two cores).
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";
/// The loopback addresses the server listens on: node1, node2.
pub const ADDRESSES: [&str; 2] = ["127.0.0.2", "127.0.0.3"];
/// An address nothing listens on: a host that is down.
pub const DOWN_ADDRESS: &str = "127.0.0.4";
pub const PREFERRED_PORT: u16 = 2222;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How node2 (127.0.0.3) differs from node1, to simulate broken hosts. Its
/// sessions run through a wrapper script (sshd `ForceCommand`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Programs node2's sessions cannot find (their PATH is a folder of
    /// links to every program of the system's PATH except these).
    pub node2_missing: Vec<String>,
    /// node2's sessions see /proc/sys/vm read-only (a private mount
    /// namespace), as in a container: dropping caches is refused there.
    pub node2_read_only_proc_sys: bool,
}
static STARTED: AtomicUsize = AtomicUsize::new(0);

pub struct Sshd {
    /// The test's folder: keys, config, known_hosts, `sshd.log`.
    pub dir: PathBuf,
    /// The client key the server accepts (for `root`).
    pub key: PathBuf,
    /// A valid key the server does NOT accept.
    pub wrong_key: PathBuf,
    /// Host keys of `[127.0.0.2]:PORT` and `[127.0.0.3]:PORT`.
    pub known_hosts: PathBuf,
    /// An empty known_hosts: every host key is unknown.
    pub empty_known_hosts: PathBuf,
    pub port: u16,
    pub log: PathBuf,
    child: Child,
    _turn: MutexGuard<'static, ()>,
}

impl Sshd {
    /// Generates keys, starts sshd on 127.0.0.2 and 127.0.0.3 and waits until
    /// both addresses accept connections. Panics with the reason (and the
    /// server's log) when it cannot.
    pub fn start() -> Sshd {
        Sshd::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> Sshd {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: the multi-host tests need a real SSH server; \
             install openssh-server and openssh-client (scripts/install-deps.sh does)"
        );
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let dir = super::temp_dir(&format!("sshd-{n}"));
        let keygen = |file: &str, comment: &str| {
            let path = dir.join(file);
            run_ok(Command::new("ssh-keygen").args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                comment,
                "-f",
                path.to_str().unwrap(),
            ]));
            path
        };
        let host_key = keygen("ssh_host_ed25519_key", "pipeline-test-host");
        let key = keygen("test_key", "pipeline-test-client");
        let wrong_key = keygen("wrong_key", "pipeline-test-not-authorized");
        let authorized = dir.join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).unwrap();

        let port = free_port();
        let pid_file = dir.join("sshd.pid");
        let config = dir.join("sshd_config");
        let listen: String = ADDRESSES
            .iter()
            .map(|a| format!("ListenAddress {a}:{port}\n"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "{listen}\
                 HostKey {host_key}\n\
                 AuthorizedKeysFile {authorized}\n\
                 PermitRootLogin prohibit-password\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 UsePAM no\n\
                 StrictModes no\n\
                 PidFile {pid_file}\n\
                 LogLevel VERBOSE\n\
                 MaxStartups 100\n\
                 MaxSessions 100\n\
                 {node2}",
                node2 = node2_session(&dir, &options),
                host_key = host_key.display(),
                authorized = authorized.display(),
                pid_file = pid_file.display(),
            ),
        )
        .unwrap();
        // The privilege separation folder sshd insists on (no systemd here to make it).
        std::fs::create_dir_all("/run/sshd").expect("create /run/sshd (needs root)");
        run_ok(Command::new(SSHD).arg("-t").arg("-f").arg(&config));

        let log = dir.join("sshd.log");
        let log_file = File::create(&log).unwrap();
        let mut command = Command::new(SSHD);
        command
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        // If the test process dies without unwinding, the server goes too.
        // SAFETY: prctl in the forked child before exec; no allocation.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = command.spawn().expect("start sshd");

        let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let host_pub: Vec<&str> = host_pub.split_whitespace().take(2).collect();
        let known_hosts = dir.join("known_hosts");
        let lines: String = ADDRESSES
            .iter()
            .map(|a| format!("[{a}]:{port} {}\n", host_pub.join(" ")))
            .collect();
        std::fs::write(&known_hosts, lines).unwrap();
        let empty_known_hosts = dir.join("empty_known_hosts");
        std::fs::write(&empty_known_hosts, "").unwrap();

        let mut sshd = Sshd {
            dir,
            key,
            wrong_key,
            known_hosts,
            empty_known_hosts,
            port,
            log,
            child,
            _turn: turn,
        };
        sshd.wait_listening();
        sshd
    }

    /// Waits for sshd's "Server listening on ADDR port PORT." for both addresses.
    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if ADDRESSES
                .iter()
                .all(|a| log.contains(&format!("Server listening on {a} port {}.", self.port)))
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("sshd exited ({status}) before listening:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "sshd is not listening after 15 s:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `address:port` of node1 / node2.
    pub fn node(&self, i: usize) -> String {
        format!("{}:{}", ADDRESSES[i], self.port)
    }

    /// The `inventory:` section for a pipeline: node1 (127.0.0.2), node2
    /// (127.0.0.3), groups `osds: [node1, node2]`, `clients: [node2]`.
    pub fn inventory_yaml(&self) -> String {
        self.inventory_yaml_with(&self.key, &self.known_hosts, "")
    }

    /// The same with another key or known_hosts file, and more host lines
    /// (`"    node3: {address: 127.0.0.4, port: 2222}\n"`).
    pub fn inventory_yaml_with(&self, key: &Path, known_hosts: &Path, extra_hosts: &str) -> String {
        format!(
            "inventory:\n  \
               ssh:\n    \
                 user: root\n    \
                 key: {key}\n    \
                 known_hosts: {known_hosts}\n  \
               hosts:\n    \
                 node1: {{address: {a1}, port: {port}}}\n    \
                 node2: {{address: {a2}, port: {port}}}\n\
             {extra_hosts}  \
               groups:\n    \
                 osds: [node1, node2]\n    \
                 clients: [node2]\n",
            key = key.display(),
            known_hosts = known_hosts.display(),
            a1 = ADDRESSES[0],
            a2 = ADDRESSES[1],
            port = self.port,
        )
    }

    /// The system ssh client against `address` with the test's key and
    /// known_hosts (or the given ones): `ssh ... root@ADDRESS -- COMMAND`.
    pub fn ssh_with(&self, key: &Path, known_hosts: &Path, address: &str, command: &str) -> Output {
        Command::new("ssh")
            .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
            .args(["-o", "ConnectTimeout=5", "-o", "IdentitiesOnly=yes"])
            .args(["-o", "ControlMaster=no", "-o", "ControlPath=none"])
            .args(["-o", "GlobalKnownHostsFile=/dev/null"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .arg("-i")
            .arg(key)
            .args([
                "-p",
                &self.port.to_string(),
                "-l",
                "root",
                address,
                "--",
                command,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run ssh")
    }

    pub fn ssh(&self, address: &str, command: &str) -> Output {
        self.ssh_with(&self.key, &self.known_hosts, address, command)
    }

    /// The server's log so far (for assertion messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sshd {
    /// Kills the server and every session process it started (sessions call
    /// setsid, so they are found by parent pid, not by process group), so no
    /// multiplexed ssh connection outlives the test.
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        let mut victims = descendants(pid);
        victims.push(pid);
        for p in &victims {
            // SAFETY: kill(2) on processes this test started (sshd and its sessions).
            unsafe {
                libc::kill(*p, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in victims {
            if p != pid && Path::new(&format!("/proc/{p}")).exists() {
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The `Match` block that wraps node2's sessions, when `options` ask for it.
fn node2_session(dir: &Path, options: &Options) -> String {
    if options.node2_missing.is_empty() && !options.node2_read_only_proc_sys {
        return String::new();
    }
    let mut script =
        String::from("#!/bin/sh\n# node2's SSH sessions (see common/sshd.rs)\nset -e\n");
    if options.node2_read_only_proc_sys {
        script.push_str(
            "if [ -z \"$NODE2_NAMESPACE\" ]; then NODE2_NAMESPACE=1 exec unshare -m \"$0\"; fi\n\
             mount --bind -o ro /proc/sys/vm /proc/sys/vm\n",
        );
    }
    if !options.node2_missing.is_empty() {
        let bin = dir.join("node2-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let system_path = std::env::var("PATH").unwrap_or_default();
        for folder in system_path
            .split(':')
            .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])
        {
            for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
                let name = entry.file_name();
                let link = bin.join(&name);
                if options.node2_missing.iter().any(|m| name == m.as_str()) || link.exists() {
                    continue;
                }
                let _ = std::os::unix::fs::symlink(entry.path(), link);
            }
        }
        script.push_str(&format!("PATH={}\nexport PATH\n", bin.display()));
    }
    script.push_str("exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n");
    let path = dir.join("node2-session.sh");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!(
        "Match LocalAddress {}\n    ForceCommand {}\n",
        ADDRESSES[1],
        path.display()
    )
}

/// Every process below `root` (from /proc/PID/stat's ppid field).
fn descendants(root: i32) -> Vec<i32> {
    let mut parent: HashMap<i32, i32> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&child, &pp) in &parent {
            if pp == p && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

/// 2222 when it is free on both addresses, else the next free port. Tests
/// of one binary start their sshd in parallel: a port handed to one is
/// never handed to another, even before its sshd has bound it (checking
/// alone would give two of them the same free port). Other processes are
/// kept out by the test lock (scripts/test.sh).
fn free_port() -> u16 {
    static CLAIMED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    let port = (PREFERRED_PORT..PREFERRED_PORT + 100)
        .find(|port| {
            !claimed.contains(port)
                && ADDRESSES
                    .iter()
                    .all(|a| TcpListener::bind((*a, *port)).is_ok())
        })
        .expect("no free port in 2222..2322 on 127.0.0.2 and 127.0.0.3");
    claimed.push(port);
    port
}

fn run_ok(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
