//! The sandbox's OCI registry: Debian's `docker-registry` on 127.0.0.1:5055,
//! for sharing plugins (`pipeline plugins push`, `uses: oci://127.0.0.1:5055/…`)
//! without any registry outside the machine. Started after the gateway when
//! the program is installed (scripts/install-deps.sh installs it), stopped by
//! `down` through its pid file like the Ceph daemons.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use crate::daemons::Daemon;
use crate::error::SandboxError;
use crate::layout::Layout;
use crate::pids::{PidFile, read_pid};
use crate::process::{self, Deadline};

/// Not 5000, the port a registry the machine already runs (Debian's
/// docker-registry service) listens on: the sandbox never collides with it.
pub const REGISTRY_PORT: u16 = 5055;
pub const PROGRAM: &str = "docker-registry";

pub fn available() -> bool {
    process::find_program(PROGRAM).is_some()
}

/// The registry's address, `127.0.0.1:5055`.
pub fn address() -> String {
    format!("127.0.0.1:{REGISTRY_PORT}")
}

/// Writes its configuration, starts it in a session of its own (it does not
/// daemonize itself), records its pid, and waits until `GET /v2/` answers.
pub(crate) fn start(layout: &Layout, deadline: &Deadline) -> Result<u32, SandboxError> {
    let daemon = Daemon::registry();
    let name = daemon.name();
    let config = layout.registry_config();
    let data = layout.dir().join("registry-data");
    std::fs::create_dir_all(&data).map_err(SandboxError::io("create", &data))?;
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {}\n",
            data.display(),
            address()
        ),
    )
    .map_err(SandboxError::io("write", &config))?;
    let log = layout.log_file(&name);
    let file = std::fs::File::create(&log).map_err(SandboxError::io("create", &log))?;
    let err_file = file
        .try_clone()
        .map_err(SandboxError::io("duplicate handle of", &log))?;
    let mut cmd = process::command(PROGRAM);
    cmd.arg("serve")
        .arg(&config)
        .stdout(file)
        .stderr(err_file)
        .stdin(Stdio::null());
    // SAFETY: setsid is async-signal-safe; it detaches the registry from the
    // terminal's process group so a Ctrl-C at `sandbox up` does not stop it later.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let failed = |detail: String| SandboxError::DaemonStart {
        daemon: name.clone(),
        detail,
        tail: crate::logs::tail_file(&log, 20),
        log: log.clone(),
    };
    let child = cmd.spawn().map_err(|e| failed(e.to_string()))?;
    let pid = child.id();
    // The child is not waited for: `down` stops it by pid file, as the Ceph daemons.
    drop(child);
    let pid_path = layout.pid_file(&name);
    std::fs::write(&pid_path, format!("{pid}\n")).map_err(SandboxError::io("write", &pid_path))?;
    let waited = Deadline::after(deadline.limit(Duration::from_secs(15)));
    loop {
        let file = PidFile {
            daemon: daemon.clone(),
            path: pid_path.clone(),
            pid: read_pid(&pid_path),
        };
        if file.live_pid(layout).is_none() {
            return Err(failed("it exited".into()));
        }
        if v2_status().is_some_and(|s| s == 200) {
            return Ok(pid);
        }
        if waited.expired() {
            return Err(failed(format!(
                "GET http://{}/v2/ did not answer 200 within {:.1?}",
                address(),
                waited.elapsed()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn v2_status() -> Option<u16> {
    let mut s =
        TcpStream::connect_timeout(&address().parse().ok()?, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", address()).ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
