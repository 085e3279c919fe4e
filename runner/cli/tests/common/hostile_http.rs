//! A hostile HTTP peer on 127.0.0.1 for the tests: a real socket speaking
//! just enough HTTP/1.1 (keep-alive, Content-Length bodies) for a client to
//! take it for a gateway, an auth server or a registry, whose answers the
//! test writes. Bodies may be streamed without being held (`Body::Repeat`),
//! so a test can send a gigabyte without this process holding one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One request as the peer read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn query(&self, name: &str) -> Option<String> {
        let (_, query) = self.target.split_once('?')?;
        query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name).then(|| percent_decode(v))
        })
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len() + 1
            && let Ok(b) = u8::from_str_radix(text.get(i + 1..i + 3).unwrap_or("zz"), 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub enum Body {
    Bytes(Vec<u8>),
    /// `chunk` again and again, `total` bytes in all (Content-Length says so).
    Repeat {
        chunk: Vec<u8>,
        total: u64,
    },
    /// The same, sent chunked: no Content-Length announces how much.
    Chunked {
        chunk: Vec<u8>,
        total: u64,
    },
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    pub fn ok(body: impl Into<Vec<u8>>) -> Response {
        Response {
            status: 200,
            headers: Vec::new(),
            body: Body::Bytes(body.into()),
        }
    }

    pub fn status(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// The peer: answers every request with what `answer` says, until dropped.
pub struct HostilePeer {
    pub port: u16,
    pub requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl HostilePeer {
    pub fn start(answer: impl Fn(&Request) -> Response + Send + Sync + 'static) -> HostilePeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(answer);
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (answer, requests) = (answer.clone(), requests.clone());
                    std::thread::spawn(move || serve(conn, &*answer, &requests));
                }
            });
        }
        HostilePeer {
            port,
            requests,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for HostilePeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, answer: &dyn Fn(&Request) -> Response, requests: &AtomicU64) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone the connection"));
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let mut request = Request {
            method: method.to_string(),
            target: target.to_string(),
            headers: Vec::new(),
        };
        let mut length = 0u64;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
                request.headers.push((k.to_string(), v.trim().to_string()));
            }
        }
        if std::io::copy(&mut (&mut reader).take(length), &mut std::io::sink()).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::Relaxed);
        let response = answer(&request);
        if write_response(&mut writer, &request, response).is_err() {
            return;
        }
    }
}

fn write_response(out: &mut TcpStream, request: &Request, r: Response) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} Hostile\r\n", r.status);
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match &r.body {
        Body::Bytes(b) => head.push_str(&format!("Content-Length: {}\r\n\r\n", b.len())),
        Body::Repeat { total, .. } => head.push_str(&format!("Content-Length: {total}\r\n\r\n")),
        Body::Chunked { .. } => head.push_str("Transfer-Encoding: chunked\r\n\r\n"),
    }
    out.write_all(head.as_bytes())?;
    if request.method == "HEAD" {
        return out.flush();
    }
    match r.body {
        Body::Bytes(b) => out.write_all(&b)?,
        Body::Repeat { chunk, total } => {
            let mut left = total;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                out.write_all(&chunk[..n])?;
                left -= n as u64;
            }
        }
        Body::Chunked { chunk, total } => {
            let mut left = total;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                out.write_all(format!("{n:x}\r\n").as_bytes())?;
                out.write_all(&chunk[..n])?;
                out.write_all(b"\r\n")?;
                left -= n as u64;
            }
            out.write_all(b"0\r\n\r\n")?;
        }
    }
    out.flush()
}

/// Runs `cmd` to its end: its exit code, how long it took, and its peak
/// resident memory in KiB (its own, from wait4, not this process's).
pub fn run_measured(
    mut cmd: std::process::Command,
) -> (Option<i32>, std::time::Duration, u64, String) {
    let started = std::time::Instant::now();
    let out_path = std::env::temp_dir().join(format!(
        "hostile-out-{}-{}",
        std::process::id(),
        started.elapsed().as_nanos() ^ rand_seed()
    ));
    let out = std::fs::File::create(&out_path).unwrap();
    // Reaped by wait4 below, which also gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start pipeline");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data, written by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for this test's own child, by pid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let elapsed = started.elapsed();
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    (code, elapsed, usage.ru_maxrss as u64, output)
}

fn rand_seed() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
