//! `--metrics-push URL`: at the end of a run, its figures go to a
//! Prometheus Pushgateway (a short run ends between two scrapes; the
//! gateway keeps its last push for Prometheus to scrape). One `PUT` of the
//! whole group, so a later push of the same run replaces it: grouped by job
//! `pipeline`, the suite and the run id (base64url in the path: any name
//! is safe there).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use base64::Engine as _;

use super::LiveMetrics;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("--metrics-push {url}: the URL {why}")]
    Url { url: String, why: String },
    #[error("--metrics-push {url}: {why}")]
    Failed { url: String, why: String },
}

const TIMEOUT: Duration = Duration::from_secs(10);
/// Of the gateway's answer, what is read: its status line and a message.
const MAX_ANSWER: u64 = 64 * 1024;

/// The grouping path under `base` for `suite` and `run_id`.
fn group_path(base: &str, suite: &str, run_id: &str) -> String {
    let b64 = |s: &str| {
        if s.is_empty() {
            // The Pushgateway's spelling of an empty value.
            "=".to_string()
        } else {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
        }
    };
    format!(
        "{}/metrics/job/pipeline/suite@base64/{}/run_id@base64/{}",
        base.trim_end_matches('/'),
        b64(suite),
        b64(run_id)
    )
}

/// PUTs the run's figures to the Pushgateway at `url` (`http://HOST:PORT`,
/// optionally with a path prefix).
pub fn push(url: &str, metrics: &LiveMetrics) -> Result<(), PushError> {
    let parsed = pipeline_stage_api::http_url::parse(url).map_err(|e| PushError::Url {
        url: url.to_string(),
        why: e.to_string(),
    })?;
    let failed = |why: String| PushError::Failed {
        url: url.to_string(),
        why,
    };
    let host = parsed.host_str().unwrap_or_default().to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let (suite, run_id) = {
        let s = metrics.state();
        (s.suite.clone(), s.run_id.clone())
    };
    let path = group_path(parsed.path(), &suite, &run_id);
    let body = metrics.render(false, false);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| failed(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| failed(format!("{host} has no address")))?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| failed(format!("cannot connect to {addr}: {e}")))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| failed(e.to_string()))?;
    let authority = match parsed.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    write!(
        stream,
        "PUT {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .and_then(|()| stream.flush())
    .map_err(|e| failed(format!("sending the push: {e}")))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(|e| failed(format!("reading the gateway's answer: {e}")))?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.lines().next().unwrap_or("");
    let code = status.split(' ').nth(1).unwrap_or("");
    if code.starts_with('2') {
        return Ok(());
    }
    let message = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("");
    Err(failed(format!(
        "the gateway answered {}: {}",
        crate::terminal::line(status),
        crate::terminal::line(&message.chars().take(300).collect::<String>())
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_path_carries_any_name_safely() {
        assert_eq!(
            group_path("/", "full-baseline", "20261205T1540Z-ab12cd-full-baseline"),
            "/metrics/job/pipeline/suite@base64/ZnVsbC1iYXNlbGluZQ/run_id@base64/MjAyNjEyMDVUMTU0MFotYWIxMmNkLWZ1bGwtYmFzZWxpbmU"
        );
        assert_eq!(
            group_path("/gw/", "a/b?c", ""),
            "/gw/metrics/job/pipeline/suite@base64/YS9iP2M/run_id@base64/="
        );
    }
}
