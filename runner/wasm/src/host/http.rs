//! `http`: plain HTTP/1.1 requests to URL prefixes the pipeline grants
//! (`grants: {http: ["http://127.0.0.1:7480/"]}`), e.g. a radosgw or a
//! Prometheus exporter on the cluster under test.
//!
//! A deliberately small client (std's TcpStream, `Connection: close`, plain
//! or chunked bodies): the runner has no HTTP stack and a plugin that needs
//! TLS can exec `curl` instead. Redirects are not followed, so a granted
//! prefix cannot bounce a request elsewhere.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{HostError, HostState, remaining};

/// Largest response body a plugin may receive.
pub const MAX_RESPONSE: usize = 64 << 20;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HostState {
    pub fn http(&mut self, req: HttpRequest) -> Result<HttpResponse, HostError> {
        let tried = format!("send `{} {}`", req.method, req.url);
        let prefixes = self.setup.grants.http.clone();
        self.require("http", !prefixes.is_empty(), &tried)?;
        if !prefixes.iter().any(|p| req.url.starts_with(p.as_str())) {
            let message = format!(
                "plugin `{}` tried to {tried}, which the pipeline does not grant (grants.http: [{}])",
                self.plugin,
                prefixes.join(", ")
            );
            return Err(self.refuse(message));
        }
        let mut timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT);
        if let Some(left) = remaining(self.setup.deadline) {
            timeout = timeout.min(left);
        }
        self.log("http", &format!("{} {}", req.method, req.url));
        self.timed(|_| send(&req, timeout))
    }
}

/// `(host:port, path)` of an `http://` URL.
fn split_url(url: &str) -> Result<(String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("`{url}`: only plain http:// URLs are supported (use exec with curl for https)")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("`{url}`: expected http://host[:port]/path"));
    }
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.to_string()))
}

pub fn send(req: &HttpRequest, timeout: Duration) -> Result<HttpResponse, HostError> {
    let fail = |m: String| HostError::Failed(m);
    let (authority, path) = split_url(&req.url).map_err(fail)?;
    let method = req.method.to_ascii_uppercase();
    if !["GET", "HEAD", "PUT", "POST", "DELETE"].contains(&method.as_str()) {
        return Err(fail(format!("unsupported HTTP method `{}`", req.method)));
    }
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| fail(format!("{authority}: {e}")))?
        .next()
        .ok_or_else(|| fail(format!("{authority}: no address")))?;
    let io = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            HostError::Timeout(format!(
                "{} {}: no answer within {:?}",
                method, req.url, timeout
            ))
        } else {
            HostError::Failed(format!("{} {}: {e}", method, req.url))
        }
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout.max(Duration::from_millis(1))).map_err(io)?;
    stream
        .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(io)?;
    stream
        .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(io)?;
    let host = authority.trim_end_matches(":80");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in &req.headers {
        if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
            return Err(fail(format!("invalid header `{k}`")));
        }
        if k.eq_ignore_ascii_case("host")
            || k.eq_ignore_ascii_case("content-length")
            || k.eq_ignore_ascii_case("connection")
        {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", req.body.len()));
    stream.write_all(head.as_bytes()).map_err(io)?;
    stream.write_all(&req.body).map_err(io)?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE as u64 + 65536)
        .read_to_end(&mut raw)
        .map_err(io)?;
    parse_response(&raw, method == "HEAD").map_err(|m| fail(format!("{} {}: {m}", method, req.url)))
}

fn parse_response(raw: &[u8], head_only: bool) -> Result<HttpResponse, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("incomplete response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line `{status_line}`"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = &raw[end + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if head_only {
        Vec::new()
    } else if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    if body.len() > MAX_RESPONSE {
        return Err(format!("response larger than {} MiB", MAX_RESPONSE >> 20));
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunked body")?;
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "bad chunk size")?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err("truncated chunked body".into());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:7480/a?b").unwrap(),
            ("127.0.0.1:7480".into(), "/a?b".into())
        );
        assert_eq!(split_url("http://h").unwrap(), ("h:80".into(), "/".into()));
        assert!(split_url("https://h/").is_err());
    }

    #[test]
    fn round_trip_against_a_local_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
                .unwrap();
            req
        });
        let resp = send(
            &HttpRequest {
                method: "get".into(),
                url: format!("http://127.0.0.1:{port}/x"),
                headers: vec![("Accept".into(), "text/plain".into())],
                body: Vec::new(),
                timeout: Some(Duration::from_secs(5)),
            },
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"hello world");
        let req = server.join().unwrap();
        assert!(req.starts_with("GET /x HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("Accept: text/plain\r\n"), "{req}");
    }
}
