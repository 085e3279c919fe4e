//! Which URLs a WASM plugin may request (`grants.http`, checked by the
//! compiler for the grants and by the plugin host for each request),
//! decided on PARSED URLs: the text a
//! plugin sends is parsed by the `url` crate (WHATWG rules: `.`/`..` and
//! their `%2e` spellings resolved, host lower-cased, default port known),
//! and the request goes out as that parsed URL, never as the plugin's text.
//!
//! Why not compare text: a prefix grant `http://127.0.0.1:1848` is a text
//! prefix of `http://127.0.0.1:18481/`, `http://h/ok/../secret` starts with
//! `http://h/ok/`, and a CR/LF in the text becomes a second request line.
//! Here a grant is a scheme, a host, a port (all compared exactly) and a
//! path prefix compared segment by segment.

use url::Url;

/// Why a URL (or a grant) is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error(
        "contains a control character or a space (byte {0}); URLs must be percent-encoded (a CR/LF would inject headers)"
    )]
    Control(usize),
    #[error("is not a valid URL ({0})")]
    Parse(url::ParseError),
    #[error("uses `{0}:`; only plain `http://` is supported (exec `curl` for https)")]
    Scheme(String),
    #[error("carries a user name or password; put credentials in a header")]
    Credentials,
    #[error("has a query or a fragment, which a grant cannot have")]
    GrantQuery,
    #[error(
        "hides `.`, `..` or a `/` in an encoded path segment (`{0}`), which servers may resolve differently"
    )]
    HiddenSegment(String),
}

/// A URL a plugin may send, or a grant, after the checks every URL gets.
pub fn parse(text: &str) -> Result<Url, UrlError> {
    // The parser silently drops tabs and newlines and trims spaces; refuse
    // them instead, so the URL checked is the URL the plugin meant.
    if let Some(i) = text.bytes().position(|b| b.is_ascii_control() || b == b' ') {
        return Err(UrlError::Control(i));
    }
    let mut url = Url::parse(text).map_err(UrlError::Parse)?;
    if url.scheme() != "http" {
        return Err(UrlError::Scheme(url.scheme().to_string()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    // Never sent to a server anyway.
    url.set_fragment(None);
    for segment in url.path_segments().into_iter().flatten() {
        let decoded = percent_decode(segment);
        if decoded == "." || decoded == ".." || decoded.contains(['/', '\\']) {
            return Err(UrlError::HiddenSegment(segment.to_string()));
        }
    }
    Ok(url)
}

/// One entry of `grants.http`: requests to this scheme, host and port whose
/// path starts with these segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlGrant {
    pub text: String,
    host: String,
    port: u16,
    segments: Vec<String>,
}

impl UrlGrant {
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let url = parse(text)?;
        if url.query().is_some() || text.contains('#') {
            return Err(UrlError::GrantQuery);
        }
        Ok(UrlGrant {
            text: text.to_string(),
            host: url.host_str().unwrap_or_default().to_string(),
            port: url.port_or_known_default().unwrap_or(80),
            segments: segments(&url),
        })
    }

    /// Same host and port exactly, and the grant's path segments are the
    /// first segments of the URL's (`/api/` grants `/api/x`, not `/api2`).
    pub fn allows(&self, url: &Url) -> bool {
        url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == Some(self.port)
            && segments(url).starts_with(&self.segments)
    }
}

/// Path segments without the empty one a trailing `/` leaves.
fn segments(url: &Url) -> Vec<String> {
    let mut segments: Vec<String> = url
        .path_segments()
        .into_iter()
        .flatten()
        .map(str::to_string)
        .collect();
    if segments.last().is_some_and(String::is_empty) {
        segments.pop();
    }
    segments
}

/// `%XX` decoded (invalid escapes kept as they are); lossy UTF-8.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(grant: &str, url: &str) -> bool {
        UrlGrant::parse(grant)
            .unwrap()
            .allows(&parse(url).expect(url))
    }

    #[test]
    fn a_grant_without_a_slash_is_its_port_not_a_text_prefix() {
        assert!(allowed("http://127.0.0.1:1848", "http://127.0.0.1:1848/x"));
        assert!(!allowed(
            "http://127.0.0.1:1848",
            "http://127.0.0.1:18481/x"
        ));
        assert!(parse("http://127.0.0.1:1848.evil/x").is_err());
        assert!(allowed("http://h", "http://h:80/"));
        assert!(!allowed("http://h", "http://h:8080/"));
    }

    #[test]
    fn paths_compare_by_segment_after_dot_segments_are_resolved() {
        assert!(allowed("http://h/api/", "http://h/api/x?y=1"));
        assert!(allowed("http://h/api", "http://h/api/x"));
        assert!(!allowed("http://h/api", "http://h/api2"));
        assert!(!allowed("http://h/api/", "http://h/api/../secret"));
        assert!(!allowed("http://h/api/", "http://h/api/%2e%2E/secret"));
        assert!(!allowed("http://h/api/", "http://h/api/.%2e/secret"));
        assert!(allowed("http://h/api/", "http://h/api/a/../b"));
        assert_eq!(
            parse("http://h/api/%2e%2e/secret").unwrap().path(),
            "/secret"
        );
    }

    #[test]
    fn hosts_compare_parsed() {
        assert!(allowed("http://LocalHost:7480/", "http://localhost:7480/a"));
        assert!(!allowed("http://h/", "http://h.evil/"));
        assert_eq!(parse("http://127.0.0.1@evil/"), Err(UrlError::Credentials));
    }

    #[test]
    fn control_characters_credentials_schemes_and_encoded_slashes_are_refused() {
        assert_eq!(
            parse("http://h/a HTTP/1.1\r\nX: y"),
            Err(UrlError::Control(10))
        );
        assert!(matches!(parse("http://h/\ta"), Err(UrlError::Control(_))));
        assert!(matches!(parse("https://h/"), Err(UrlError::Scheme(_))));
        assert!(matches!(
            parse("file:///etc/passwd"),
            Err(UrlError::Scheme(_))
        ));
        assert_eq!(parse("http://u:p@h/"), Err(UrlError::Credentials));
        assert!(matches!(
            parse("http://h/api/..%2fsecret"),
            Err(UrlError::HiddenSegment(_))
        ));
        assert!(matches!(
            UrlGrant::parse("http://h/?a=1"),
            Err(UrlError::GrantQuery)
        ));
    }
}
