//! `http`: plain HTTP requests to URL prefixes the pipeline grants
//! (`grants: {http: ["http://127.0.0.1:7480/"]}`), e.g. a radosgw or a
//! Prometheus exporter on the cluster under test.
//!
//! The plugin's request is treated as hostile text: the URL is parsed and
//! checked against the grants by [`pipeline_stage_api::http_url`], headers that frame or
//! route the message (`Host`, `Content-Length`, `Transfer-Encoding`,
//! hop-by-hop headers) are refused, and the request is built by a maintained
//! client (reqwest, which the object-gateway stages use anyway) from the
//! parsed URL. Redirects are not followed (a granted server cannot bounce a
//! request elsewhere), proxies from the environment are ignored (the grant
//! names the server the request goes to).
//!
//! Time: one deadline for the whole exchange (connect, send, every byte of
//! the answer), the earlier of the request's `timeout` and the stage's
//! deadline, so a server trickling one byte a second cannot stretch it; and
//! Ctrl-C ends the wait at once.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use url::Url;

use super::{HostError, HostState, remaining};
use crate::engine::TICK;
use pipeline_stage_api::http_url::{self, UrlGrant};

/// Largest response body a plugin may receive.
pub const MAX_RESPONSE: usize = 64 << 20;
/// A request's deadline when the plugin gives none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const METHODS: [&str; 5] = ["GET", "HEAD", "PUT", "POST", "DELETE"];
/// Headers the client owns: they frame the message or act on the
/// connection, so a plugin setting them could smuggle a second request or
/// reach another server (RFC 9110 section 7.6.1, RFC 9112 section 6).
const FORBIDDEN_HEADERS: [&str; 12] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "http2-settings",
];

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
        // Escaped: a CR/LF or a terminal escape in the URL shows as `\r\n`,
        // in messages and in plugin.log alike.
        let tried = format!(
            "send `{} {}`",
            req.method.escape_debug(),
            req.url.escape_debug()
        );
        let granted = self.setup.grants.http.clone();
        self.require("http", !granted.is_empty(), &tried)?;
        let mut grants = Vec::new();
        for text in &granted {
            match UrlGrant::parse(text) {
                Ok(g) => grants.push(g),
                Err(e) => {
                    let message = format!(
                        "plugin `{}` tried to {tried}, but the stage's grant `{text:?}` {e}; fix `grants.http`",
                        self.plugin
                    );
                    return Err(self.refuse(message));
                }
            }
        }
        let url = match http_url::parse(&req.url) {
            Ok(url) => url,
            Err(e) => {
                let message = format!(
                    "plugin `{}` tried to {tried}, but the URL {e}; nothing was sent",
                    self.plugin
                );
                return Err(self.refuse(message));
            }
        };
        if !grants.iter().any(|g| g.allows(&url)) {
            let message = format!(
                "plugin `{}` tried to {tried}, which the pipeline does not grant (grants.http: [{}]; parsed, the URL is `{url}`; a grant is a host, a port and a path prefix, compared exactly)",
                self.plugin,
                granted.join(", ")
            );
            return Err(self.refuse(message));
        }
        let method = req.method.to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            let message = format!(
                "plugin `{}` tried to {tried}; the methods it may use are {}",
                self.plugin,
                METHODS.join(", ")
            );
            return Err(self.refuse(message));
        }
        if let Err(problem) = check_headers(&req.headers) {
            let message = format!("plugin `{}` tried to {tried} {problem}", self.plugin);
            return Err(self.refuse(message));
        }
        let mut timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let mut limit = "the request's timeout";
        if let Some(left) = remaining(self.setup.deadline)
            && left < timeout
        {
            timeout = left;
            limit = "the stage's deadline";
        }
        self.log("http", &format!("{method} {url}"));
        let exchange = Exchange {
            method,
            url,
            headers: req.headers,
            body: req.body,
            timeout,
            limit,
        };
        let cancelled = self.setup.cancelled.clone();
        self.timed(|_| exchange.send(&cancelled))
    }
}

/// Header names must be HTTP tokens, values free of control characters, and
/// none may be one the client owns. `Err`: what is wrong, for the refusal.
fn check_headers(headers: &[(String, String)]) -> Result<(), String> {
    for (name, value) in headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!(
                "with a header named {name:?}, which is not a valid header name"
            ));
        }
        if FORBIDDEN_HEADERS
            .iter()
            .any(|f| name.eq_ignore_ascii_case(f))
        {
            return Err(format!(
                "with a `{name}` header, which only the host sets (it frames or routes the request: {})",
                FORBIDDEN_HEADERS.join(", ")
            ));
        }
        // `HeaderValue` accepts obs-text but no CR, LF or NUL; refuse every
        // other control character too (tab excepted, RFC 9110 5.5).
        if value.chars().any(|c| c.is_control() && c != '\t')
            || reqwest::header::HeaderValue::from_str(value).is_err()
        {
            return Err(format!(
                "with header `{name}: {value:?}`, whose value holds a control character"
            ));
        }
    }
    Ok(())
}

/// A checked request, ready to go out.
pub struct Exchange {
    pub method: String,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout: Duration,
    /// What `timeout` is, for the message when it expires.
    pub limit: &'static str,
}

impl Exchange {
    /// Sends it and reads the whole answer within `timeout`, or gives up at
    /// once when `cancelled` is set.
    pub fn send(self, cancelled: &Arc<AtomicBool>) -> Result<HttpResponse, HostError> {
        let deadline = tokio::time::Instant::from_std(Instant::now() + self.timeout);
        let shown = format!("{} {}", self.method, self.url);
        let (timeout, limit) = (self.timeout, self.limit);
        let cancelled = cancelled.clone();
        wasmtime_wasi::runtime::in_tokio(async move {
            tokio::select! {
                r = tokio::time::timeout_at(deadline, self.exchange()) => match r {
                    Ok(r) => r.map_err(|e| HostError::Failed(format!("{shown}: {e}"))),
                    Err(_) => Err(HostError::Timeout(format!(
                        "{shown}: no complete answer within {} ({limit}, for the whole exchange)",
                        pipeline_stage_api::exec::format_duration(timeout)
                    ))),
                },
                () = watch(cancelled) => Err(HostError::Cancelled),
            }
        })
    }

    async fn exchange(self) -> Result<HttpResponse, String> {
        let method =
            reqwest::Method::from_bytes(self.method.as_bytes()).map_err(|e| e.to_string())?;
        let mut request = client()?.request(method.clone(), self.url);
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if !self.body.is_empty()
            || method == reqwest::Method::PUT
            || method == reqwest::Method::POST
        {
            request = request.body(self.body);
        }
        let mut response = request.send().await.map_err(describe)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let too_large = || format!("the response is larger than {} MiB", MAX_RESPONSE >> 20);
        if response
            .content_length()
            .is_some_and(|n| n > MAX_RESPONSE as u64)
        {
            return Err(too_large());
        }
        // Counted while it arrives: a server cannot make the host buffer
        // more than the cap before the check.
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            if body.len() + chunk.len() > MAX_RESPONSE {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// The client, built once: no proxy from the environment, no redirects,
/// no pooled connections kept between a plugin's calls.
fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .pool_max_idle_per_host(0)
                .build()
                .map_err(|e| format!("cannot start the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// reqwest's error with its causes (`error sending request: connection refused`).
fn describe(e: reqwest::Error) -> String {
    // The URL is already in the message, escaped.
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Resolves when `cancelled` is set (checked every tick).
pub async fn watch(cancelled: Arc<AtomicBool>) {
    while !cancelled.load(Ordering::Relaxed) {
        tokio::time::sleep(TICK).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn exchange(url: String, timeout: Duration) -> Exchange {
        Exchange {
            method: "GET".into(),
            url: http_url::parse(&url).unwrap(),
            headers: vec![("Accept".into(), "text/plain".into())],
            body: Vec::new(),
            timeout,
            limit: "the request's timeout",
        }
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
        let resp = exchange(
            format!("http://127.0.0.1:{port}/x"),
            Duration::from_secs(20),
        )
        .send(&Arc::new(AtomicBool::new(false)))
        .unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"hello world");
        let req = server.join().unwrap().to_ascii_lowercase();
        assert!(req.starts_with("get /x http/1.1\r\n"), "{req}");
        assert!(req.contains("accept: text/plain\r\n"), "{req}");
    }

    #[test]
    fn forbidden_and_malformed_headers_are_refused() {
        let h = |k: &str, v: &str| check_headers(&[(k.to_string(), v.to_string())]);
        assert!(h("X-Ok", "fine\tvalue").is_ok());
        for name in [
            "Transfer-Encoding",
            "content-length",
            "Host",
            "Connection",
            "TE",
        ] {
            assert!(h(name, "x").is_err(), "{name}");
        }
        assert!(h("X-A\r\nX-B", "1").is_err());
        assert!(h("X-A", "1\r\nX-B: 2").is_err());
        assert!(h("X-A", "1\u{1b}[2J").is_err());
    }
}
