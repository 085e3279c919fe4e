//! A tiny HTTP/1.1 client, just enough to ask the gateway whether it answers S3 and Swift.
//!
//! Readiness needs two GETs on loopback; a full HTTP stack would be a large dependency for
//! that. Requests use `Connection: close`, so a response ends at EOF.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Responses larger than this are cut (a probe only needs the first bytes).
const MAX_RESPONSE: usize = 1 << 20;

/// Why the gateway did not answer a probe as a ready gateway would.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// No connection, or it broke (the gateway is not listening yet).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Something answered, but not HTTP.
    #[error("{0}")]
    NotHttp(String),
    /// The gateway answered, but not yet as a ready one.
    #[error("{0}")]
    NotReady(String),
}

/// A parsed HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// GET `path` from `addr`; every step bounded by `timeout`.
pub(crate) fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Response, ProbeError> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE as u64).read_to_end(&mut raw)?;
    parse_response(&raw)
}

/// Parses status line, headers and body (de-chunked if needed).
pub(crate) fn parse_response(raw: &[u8]) -> Result<Response, ProbeError> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| ProbeError::NotHttp("incomplete response: no end of headers".into()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/"))
        .ok_or_else(|| ProbeError::NotHttp(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut response = Response {
        status,
        headers,
        body: String::new(),
    };
    let body = &raw[split + 4..];
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    response.body = String::from_utf8_lossy(&body).into_owned();
    Ok(response)
}

/// Decodes a chunked body; stops at the last chunk or at malformed input.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size_hex, 16) else {
            return out;
        };
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// Anonymous `GET /`: the gateway answers S3 when it returns a ListAllMyBuckets document.
pub(crate) fn probe_s3(addr: SocketAddr, timeout: Duration) -> Result<(), ProbeError> {
    let response = get(addr, "/", &[], timeout)?;
    if response.status == 200 && response.body.contains("ListAllMyBucketsResult") {
        Ok(())
    } else {
        Err(ProbeError::NotReady(format!(
            "S3 GET / returned {} {:?}",
            response.status,
            crate::logs::last_lines(&response.body, 3)
        )))
    }
}

/// Swift v1 auth: returns the `X-Storage-Url` when `user`/`key` are accepted.
pub(crate) fn probe_swift(
    addr: SocketAddr,
    user: &str,
    key: &str,
    timeout: Duration,
) -> Result<String, ProbeError> {
    let response = get(
        addr,
        "/auth/1.0",
        &[("X-Auth-User", user), ("X-Auth-Key", key)],
        timeout,
    )?;
    match (response.status, response.header("x-storage-url")) {
        (200 | 204, Some(url)) if response.header("x-auth-token").is_some() => Ok(url.into()),
        (status, _) => Err(ProbeError::NotReady(format!(
            "Swift auth returned {status} without a token"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    /// Captured from radosgw 16.2.15 (`curl -si -H 'X-Auth-User: …' …/auth/1.0`).
    const SWIFT_AUTH: &str = "HTTP/1.1 204 No Content\r\n\
        X-Storage-Url: http://127.0.0.1:7480/swift/v1\r\n\
        X-Storage-Token: AUTH_rgwtk0d00000073616e64\r\n\
        X-Auth-Token: AUTH_rgwtk0d00000073616e64\r\n\
        Content-Type: application/json; charset=utf-8\r\n\
        Connection: Keep-Alive\r\n\r\n";

    const S3_LIST: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListAllMyBucketsResult \
        xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>anonymous</ID>\
        <DisplayName></DisplayName></Owner><Buckets></Buckets></ListAllMyBucketsResult>";

    #[test]
    fn parses_swift_auth_response() {
        let r = parse_response(SWIFT_AUTH.as_bytes()).unwrap();
        assert_eq!(r.status, 204);
        assert_eq!(
            r.header("x-storage-url"),
            Some("http://127.0.0.1:7480/swift/v1")
        );
        assert_eq!(r.body, "");
    }

    #[test]
    fn dechunks_bodies() {
        let raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw.as_bytes()).unwrap().body, "hello world");
        // truncated or malformed chunks do not panic
        for raw in [
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            parse_response(raw.as_bytes()).unwrap();
        }
    }

    #[test]
    fn rejects_garbage() {
        for raw in [
            "",
            "hello",
            "SSH-2.0-OpenSSH\r\n\r\n",
            "HTTP/1.1 abc\r\n\r\n",
        ] {
            assert!(parse_response(raw.as_bytes()).is_err(), "{raw:?}");
        }
    }

    /// Serves one canned response on an ephemeral port.
    fn serve_once(response: String) -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(response.as_bytes());
            }
        });
        addr
    }

    #[test]
    fn probes_against_a_fake_gateway() {
        let t = Duration::from_secs(5);
        let ok = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{S3_LIST}",
            S3_LIST.len()
        );
        probe_s3(serve_once(ok), t).unwrap();
        let denied = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".to_string();
        assert!(probe_s3(serve_once(denied.clone()), t).is_err());
        let url = probe_swift(serve_once(SWIFT_AUTH.into()), "u", "k", t).unwrap();
        assert_eq!(url, "http://127.0.0.1:7480/swift/v1");
        assert!(probe_swift(serve_once(denied), "u", "k", t).is_err());
    }
}
