//! `--metrics-listen ADDR`: a plain-HTTP endpoint Prometheus scrapes,
//! `GET /metrics`, on a thread of its own for the run's life. One request
//! per connection, one connection at a time, each bounded in time and size:
//! a scraper that hangs or sends garbage costs the run nothing but the
//! listener's own thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::LiveMetrics;

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for --metrics-listen: {source}")]
pub struct ListenError {
    addr: String,
    source: std::io::Error,
}

/// A request's head larger than this is refused (a scrape's is ~200 bytes).
const MAX_HEAD: usize = 8 * 1024;
/// A connection that has not sent its request (or read the answer) by then is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` now (so a taken port fails the run before it starts) and
/// serves `metrics` from a background thread; the address bound (port 0
/// picks one).
pub fn listen(addr: &str, metrics: Arc<LiveMetrics>) -> Result<SocketAddr, ListenError> {
    let err = |source| ListenError {
        addr: addr.to_string(),
        source,
    };
    let listener = TcpListener::bind(addr).map_err(err)?;
    let bound = listener.local_addr().map_err(err)?;
    std::thread::Builder::new()
        .name("metrics-listen".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &metrics);
            }
        })
        .map_err(err)?;
    Ok(bound)
}

fn serve(mut stream: TcpStream, metrics: &LiveMetrics) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut request_line = head.lines().next().unwrap_or("").split(' ');
    let (method, target) = (request_line.next(), request_line.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != Some("GET") {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        );
    }
    match path {
        "/metrics" => {
            // Prometheus asks for OpenMetrics first; others get the 0.0.4 text.
            let openmetrics = head.lines().any(|l| {
                l.to_ascii_lowercase().starts_with("accept:")
                    && l.contains("application/openmetrics-text")
            });
            let body = metrics.render(openmetrics, true);
            let content_type = if openmetrics {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            respond(&mut stream, "200 OK", content_type, &body)
        }
        "/" => respond(
            &mut stream,
            "200 OK",
            "text/plain; charset=utf-8",
            "pipeline run: metrics at /metrics\n",
        ),
        _ => respond(&mut stream, "404 Not Found", "text/plain", "not found\n"),
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
