//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF
//! distribution registry) on 127.0.0.1, one per test, with its storage in a
//! temporary folder (so a test can corrupt a blob on disk), deletes enabled,
//! and optionally htpasswd users. Stopped when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub dir: PathBuf,
    child: Option<Child>,
}

/// 5100.. : a port handed to one test of this binary is never handed to
/// another, even before its registry has bound it.
fn claim_port() -> u16 {
    static CLAIMED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    let port = (5100..5300)
        .find(|p| !claimed.contains(p) && TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("no free port in 5100..5300 on 127.0.0.1");
    claimed.push(port);
    port
}

impl Registry {
    pub fn start(name: &str) -> Registry {
        Self::start_with(name, None)
    }

    /// With one htpasswd user (bcrypt, as the registry requires).
    pub fn start_with_user(name: &str, user: &str, password: &str) -> Registry {
        Self::start_with(name, Some((user, password)))
    }

    fn start_with(name: &str, user: Option<(&str, &str)>) -> Registry {
        let dir = super::temp_dir(&format!("registry-{name}"));
        let port = claim_port();
        let addr = format!("127.0.0.1:{port}");
        let auth = match user {
            Some((user, password)) => {
                let out = Command::new("htpasswd")
                    .args(["-Bbn", user, password])
                    .output()
                    .expect("htpasswd (apache2-utils; scripts/install-deps.sh installs it)");
                assert!(out.status.success());
                std::fs::write(dir.join("htpasswd"), out.stdout).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: pipeline-test\n    path: {}\n",
                    dir.join("htpasswd").display()
                )
            }
            None => String::new(),
        };
        std::fs::write(
            dir.join("config.yml"),
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{auth}",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (scripts/install-deps.sh installs it)");
        let mut registry = Registry {
            addr,
            dir,
            child: Some(child),
        };
        registry.wait_ready();
        registry
    }

    /// Until `GET /v2/` answers (200, or 401 with users).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "docker-registry exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
                );
            }
            if let Some(code) = self.get_status("/v2/")
                && (code == 200 || code == 401)
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not answer on {}",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The HTTP status of a GET, or None when nothing answers.
    pub fn get_status(&self, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect(&self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// `oci://127.0.0.1:PORT/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.addr)
    }

    /// Where the registry keeps a blob's bytes on disk.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Stops it (a later request finds nothing listening).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A request through `curl` (the registry's HTTP API, written out in the
    /// test as another tool would send it). Returns the status and headers+body.
    pub fn curl(&self, args: &[&str]) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-sS", "-i", "-w", "\n%{http_code}"])
            .args(args)
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let code = text
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        (code, text)
    }

    /// Uploads a blob the way the distribution spec describes (POST, then a
    /// monolithic PUT with the digest).
    pub fn upload_blob(&self, repository: &str, bytes: &[u8], work: &Path) -> String {
        let digest = sha256(bytes);
        let file = work.join(digest.replace(':', "-"));
        std::fs::write(&file, bytes).unwrap();
        let (code, text) = self.curl(&[
            "-X",
            "POST",
            &format!("http://{}/v2/{repository}/blobs/uploads/", self.addr),
        ]);
        assert_eq!(code, 202, "{text}");
        let location = text
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("location")
                    .then(|| v.trim().to_string())
            })
            .expect("Location");
        let url = if location.starts_with("http") {
            location
        } else {
            format!("http://{}{location}", self.addr)
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        let (code, text) = self.curl(&[
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            &format!("@{}", file.display()),
            &format!("{url}{sep}digest={digest}"),
        ]);
        assert_eq!(code, 201, "{text}");
        digest
    }

    /// PUTs a manifest; returns its digest.
    pub fn put_manifest(&self, repository: &str, tag: &str, manifest: &str, work: &Path) -> String {
        let file = work.join(format!("manifest-{tag}.json"));
        std::fs::write(&file, manifest).unwrap();
        let (code, text) = self.curl(&[
            "-X",
            "PUT",
            "-H",
            "Content-Type: application/vnd.oci.image.manifest.v1+json",
            "--data-binary",
            &format!("@{}", file.display()),
            &format!("http://{}/v2/{repository}/manifests/{tag}", self.addr),
        ]);
        assert_eq!(code, 201, "{text}");
        sha256(manifest.as_bytes())
    }

    /// DELETEs a manifest by digest.
    pub fn delete_manifest(&self, repository: &str, digest: &str) {
        let (code, text) = self.curl(&[
            "-X",
            "DELETE",
            &format!("http://{}/v2/{repository}/manifests/{digest}", self.addr),
        ]);
        assert_eq!(code, 202, "{text}");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `sha256:<hex>` by the system's `sha256sum`: an independent check of our digests.
pub fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}
