//! A throw-away PostgreSQL 15 for one test: initdb into a temporary folder,
//! `pg_ctl start` on a free loopback port with its socket in that folder,
//! stopped and removed by Drop (also when the test panics).
//!
//! PostgreSQL refuses to run as root: as root the folder is handed to the
//! `postgres` user that Debian's package creates and the tools run through
//! `runuser`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = "/usr/lib/postgresql/15/bin";
pub const USER: &str = "pipeline";
pub const PASSWORD: &str = "s3cret-pw";

pub struct Server {
    dir: PathBuf,
    pub port: u16,
}

fn as_postgres(tool: &str) -> Command {
    let program = format!("{BIN}/{tool}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--", &program]);
        cmd
    } else {
        Command::new(program)
    }
}

fn check(what: &str, out: Output) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port nothing listens on now (the kernel's pick; freed again at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Server {
    pub fn start(name: &str) -> Server {
        assert!(
            Path::new(BIN).join("initdb").is_file(),
            "{BIN}/initdb missing: install Debian's postgresql (scripts/install-deps.sh)"
        );
        let dir = std::env::temp_dir().join(format!("pipeline-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = Server {
            dir: dir.clone(),
            port: free_port(),
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            check(
                "chown",
                Command::new("chown")
                    .args(["postgres:postgres"])
                    .arg(&dir)
                    .output()
                    .unwrap(),
            );
        }
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        // SAFETY: as above.
        if unsafe { libc::geteuid() } == 0 {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&pwfile)
                .output()
                .unwrap();
        }
        check(
            "initdb",
            as_postgres("initdb")
                .args([
                    "-U",
                    USER,
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                ])
                .arg(format!("--pwfile={}", pwfile.display()))
                .arg("-D")
                .arg(dir.join("data"))
                .output()
                .unwrap(),
        );
        // The port was free when picked, but is not held: another process
        // may bind it before the server does. Such a start fails with
        // "Address already in use" in the log; pick again then (the port
        // race is the only failure retried).
        for attempt in 1.. {
            let out = as_postgres("pg_ctl")
                .arg("-D")
                .arg(dir.join("data"))
                .arg("-l")
                .arg(dir.join("log"))
                .arg("-w")
                .arg("-o")
                .arg(format!(
                    "-k {} -p {} -c listen_addresses=127.0.0.1 -c fsync=off",
                    dir.display(),
                    server.port
                ))
                .arg("start")
                .output()
                .unwrap();
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            if !out.status.success() && attempt < 5 && log.contains("Address already in use") {
                let _ = std::fs::remove_file(dir.join("log"));
                server.port = free_port();
                continue;
            }
            check("pg_ctl start", out);
            break;
        }
        server
    }

    /// postgres://pipeline:PASSWORD@127.0.0.1:PORT/postgres
    pub fn url(&self) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Runs SQL through psql over the folder's socket (as the superuser);
    /// returns its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        let out = as_postgres("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                "postgres",
                "-c",
                sql,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        check(&format!("psql {sql}"), out);
        text.trim().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = as_postgres("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
