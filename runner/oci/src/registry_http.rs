//! The registry's HTTP API (OCI distribution spec), under bounds: a
//! manifest is read up to 4 MiB, a blob up to the size its manifest declares
//! (at most 64 MiB), a token answer and an error body up to 64 KiB each.
//! Every body is read chunk by chunk and the read stops at its bound; a
//! Content-Length beyond it is refused unread; hyper refuses a header
//! section over 408 KiB.
//!
//! Why not oci-client (our registry client until now): 0.15 reads a
//! manifest (`pull_manifest_raw`), a token answer and every error body whole
//! into memory before anything can look at its size (README, Choices).
//!
//! Authentication follows the spec: a pull goes without credentials (or
//! with a token already got); on a 401 the `WWW-Authenticate` challenge says
//! Basic (the credentials go to the registry itself) or Bearer (a token is
//! asked of the realm, with the credentials, for `repository:NAME:pull`, and
//! the request is sent again). A push asks `/v2/` first and gets a token for
//! `pull,push` before it sends a byte of the plugin.

use std::sync::Mutex;
use std::time::Duration;

use crate::credentials::RegistryAuth;
use base64::Engine as _;

use crate::client::plain_http_allowed;

/// The manifest types a plugin may be published as (and the indexes that
/// are refused with a clear message).
pub(crate) const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json";
pub(crate) const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
/// A token answer is a small JSON object; an error body a few lines of JSON.
const MAX_TOKEN_BYTES: u64 = 64 * 1024;
const MAX_ERROR_BYTES: u64 = 64 * 1024;
/// How much of an error body a message quotes.
const QUOTED_ERROR_CHARS: usize = 300;

/// What went wrong talking to the registry, before it becomes an [`crate::OciError`].
#[derive(Debug)]
pub(crate) enum HttpError {
    /// No connection, or it broke.
    Unreachable(String),
    Unauthorized,
    NotFound,
    /// A body (or what its Content-Length announced) beyond its bound.
    TooLong {
        what: &'static str,
        limit: u64,
        found: String,
    },
    /// Any other answer: its status and the start of its body, cleaned.
    Status {
        what: &'static str,
        status: u16,
        body: String,
    },
    /// A token realm the runner will not send credentials to.
    Refused(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Unreachable(reason) => write!(f, "unreachable: {reason}"),
            HttpError::Unauthorized => write!(f, "401 Unauthorized"),
            HttpError::NotFound => write!(f, "404 Not Found"),
            HttpError::TooLong { what, limit, found } => write!(
                f,
                "the {what} is longer than the {limit} bytes the runner reads of one ({found}); refused"
            ),
            HttpError::Status { what, status, body } => {
                write!(f, "the {what} was answered with HTTP {status}")?;
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            HttpError::Refused(why) => write!(f, "{why}"),
        }
    }
}

pub(crate) struct RegistryHttp {
    http: reqwest::Client,
    /// `http://host:port` or `https://host:port`.
    base: String,
    auth: RegistryAuth,
    /// Set once the registry asked for it: what goes in `Authorization`.
    authorization: Mutex<Option<String>>,
    /// PIPELINE_REGISTRY_INSECURE, for a token realm on plain HTTP.
    insecure: Option<String>,
}

impl RegistryHttp {
    pub(crate) fn new(
        registry: &str,
        https: bool,
        auth: RegistryAuth,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, HttpError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .read_timeout(Duration::from_secs(30))
            // A redirect (to blob storage) is followed at most a few times;
            // the bounds hold for whatever answers at its end.
            .redirect(reqwest::redirect::Policy::limited(5))
            .user_agent(concat!("pipeline/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| HttpError::Unreachable(e.to_string()))?;
        Ok(RegistryHttp {
            http,
            base: format!("{}://{registry}", if https { "https" } else { "http" }),
            authorization: Mutex::new(None),
            auth,
            insecure: env("PIPELINE_REGISTRY_INSECURE"),
        })
    }

    /// The manifest `reference` (a tag or a digest) names, at most 4 MiB.
    pub(crate) async fn manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Vec<u8>, HttpError> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let response = self.get(&url, repository, Some(MANIFEST_ACCEPT)).await?;
        read_bounded(response, "manifest", MAX_MANIFEST_BYTES).await
    }

    /// A blob, which must be exactly `size` bytes (the manifest said so).
    pub(crate) async fn blob(
        &self,
        repository: &str,
        digest: &str,
        size: u64,
    ) -> Result<Vec<u8>, HttpError> {
        let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
        let response = self.get(&url, repository, None).await?;
        let bytes = read_bounded(response, "plugin blob", size).await?;
        if (bytes.len() as u64) < size {
            return Err(HttpError::Status {
                what: "plugin blob",
                status: 200,
                body: format!("it ended after {} of its {size} bytes", bytes.len()),
            });
        }
        Ok(bytes)
    }

    /// A GET that answered 200, authenticating once if the registry asks.
    async fn get(
        &self,
        url: &str,
        repository: &str,
        accept: Option<&str>,
    ) -> Result<reqwest::Response, HttpError> {
        let send = |authorization: Option<String>| {
            let mut request = self.http.get(url);
            if let Some(a) = accept {
                request = request.header(reqwest::header::ACCEPT, a);
            }
            if let Some(a) = authorization {
                request = request.header(reqwest::header::AUTHORIZATION, a);
            }
            request.send()
        };
        let current = self.current_authorization();
        let had_authorization = current.is_some();
        let mut response = send(current).await.map_err(unreachable)?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED && !had_authorization {
            let authorization = self
                .answer(&challenge(&response), repository, "pull")
                .await?;
            self.set_authorization(Some(authorization.clone()));
            response = send(Some(authorization)).await.map_err(unreachable)?;
        }
        expect(response, "request", 200).await
    }

    fn current_authorization(&self) -> Option<String> {
        self.authorization.lock().ok().and_then(|a| a.clone())
    }

    fn set_authorization(&self, authorization: Option<String>) {
        if let Ok(mut a) = self.authorization.lock() {
            *a = authorization;
        }
    }

    /// Pushes a plugin: its blobs (each skipped when the registry has it),
    /// then its manifest under `reference` (a tag).
    pub(crate) async fn push(
        &self,
        repository: &str,
        reference: &str,
        blobs: &[(&str, &[u8])],
        manifest: &[u8],
        manifest_type: &str,
    ) -> Result<(), HttpError> {
        self.authorize_push(repository).await?;
        for (digest, bytes) in blobs {
            let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
            let has = self
                .request(reqwest::Method::HEAD, &url)
                .send()
                .await
                .map_err(unreachable)?;
            if has.status() == reqwest::StatusCode::OK {
                continue;
            }
            let start = format!("{}/v2/{repository}/blobs/uploads/", self.base);
            let started = self
                .request(reqwest::Method::POST, &start)
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .send()
                .await
                .map_err(unreachable)?;
            let started = expect(started, "blob upload", 202).await?;
            let location = started
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| HttpError::Status {
                    what: "blob upload",
                    status: 202,
                    body: "its answer names no Location to upload to".into(),
                })?;
            let mut upload = reqwest::Url::parse(&start)
                .and_then(|base| base.join(location))
                .map_err(|_| {
                    HttpError::Refused(format!(
                        "its upload Location `{}` is not a URL",
                        clean(location, 200)
                    ))
                })?;
            let origin =
                |u: &reqwest::Url| (u.host_str().map(str::to_string), u.port_or_known_default());
            if reqwest::Url::parse(&self.base).ok().map(|b| origin(&b)) != Some(origin(&upload)) {
                return Err(HttpError::Refused(format!(
                    "its upload Location `{}` is on another host; the plugin and the credentials go only to the registry",
                    clean(location, 200)
                )));
            }
            upload.query_pairs_mut().append_pair("digest", digest);
            let done = self
                .request(reqwest::Method::PUT, upload.as_str())
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .body(bytes.to_vec())
                .send()
                .await
                .map_err(unreachable)?;
            expect(done, "blob upload", 201).await?;
        }
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let done = self
            .request(reqwest::Method::PUT, &url)
            .header(reqwest::header::CONTENT_TYPE, manifest_type)
            .body(manifest.to_vec())
            .send()
            .await
            .map_err(unreachable)?;
        expect(done, "manifest upload", 201).await?;
        Ok(())
    }

    /// A request with the authorization got so far.
    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, url);
        if let Some(a) = self.current_authorization() {
            request = request.header(reqwest::header::AUTHORIZATION, a);
        }
        request
    }

    /// Asks `/v2/` whether the registry wants credentials, and gets what
    /// a push of `repository` needs.
    async fn authorize_push(&self, repository: &str) -> Result<(), HttpError> {
        let probe = self
            .http
            .get(format!("{}/v2/", self.base))
            .send()
            .await
            .map_err(unreachable)?;
        if probe.status() == reqwest::StatusCode::UNAUTHORIZED {
            let authorization = self
                .answer(&challenge(&probe), repository, "pull,push")
                .await?;
            self.set_authorization(Some(authorization));
        }
        Ok(())
    }

    /// The `Authorization` a 401's challenge asks for.
    async fn answer(
        &self,
        challenge: &str,
        repository: &str,
        actions: &str,
    ) -> Result<String, HttpError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return match &self.auth {
                RegistryAuth::Basic(user, password) => Ok(basic(user, password)),
                _ => Err(HttpError::Unauthorized),
            };
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(HttpError::Unauthorized);
        }
        let param = |name: &str| challenge_param(params, name);
        let Some(realm) = param("realm") else {
            return Err(HttpError::Unauthorized);
        };
        let realm_url = reqwest::Url::parse(&realm).map_err(|_| {
            HttpError::Refused(format!(
                "its token realm `{}` is not a URL",
                clean(&realm, 200)
            ))
        })?;
        let realm_host = match (realm_url.host_str(), realm_url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => String::new(),
        };
        // Credentials go over plain HTTP only where the registry itself may.
        let insecure = |k: &str| {
            (k == "PIPELINE_REGISTRY_INSECURE")
                .then(|| self.insecure.clone())
                .flatten()
        };
        let plain_ok = realm_url.scheme() == "http" && plain_http_allowed(&realm_host, &insecure);
        if realm_url.scheme() != "https" && !plain_ok {
            return Err(HttpError::Refused(format!(
                "its token realm `{}` is not HTTPS; credentials are sent over plain HTTP only to loopback hosts and those in PIPELINE_REGISTRY_INSECURE",
                clean(&realm, 200)
            )));
        }
        let scope = format!("repository:{repository}:{actions}");
        let mut query = vec![("scope", scope)];
        if let Some(service) = param("service") {
            query.push(("service", service));
        }
        let mut request = self.http.get(realm_url).query(&query);
        if let RegistryAuth::Basic(user, password) = &self.auth {
            request = request.header(reqwest::header::AUTHORIZATION, basic(user, password));
        }
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            return Err(HttpError::Unauthorized);
        }
        if status != 200 {
            return Err(HttpError::Status {
                what: "token request",
                status,
                body: error_text(response).await,
            });
        }
        let body = read_bounded(response, "token answer", MAX_TOKEN_BYTES).await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| HttpError::Status {
            what: "token request",
            status,
            body: format!("its answer is not a token ({e})"),
        })?;
        match token.token.or(token.access_token) {
            Some(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()) => {
                Ok(format!("Bearer {t}"))
            }
            _ => Err(HttpError::Status {
                what: "token request",
                status,
                body: "its answer holds no usable token".into(),
            }),
        }
    }
}

/// A 401's `WWW-Authenticate`.
fn challenge(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The response when its status is `wanted`, else the error it means.
async fn expect(
    response: reqwest::Response,
    what: &'static str,
    wanted: u16,
) -> Result<reqwest::Response, HttpError> {
    match response.status().as_u16() {
        s if s == wanted => Ok(response),
        401 | 403 => Err(HttpError::Unauthorized),
        404 if wanted == 200 => Err(HttpError::NotFound),
        status => Err(HttpError::Status {
            what,
            status,
            body: error_text(response).await,
        }),
    }
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// `realm="https://auth/token",service="registry"` -> the value of `name`.
fn challenge_param(params: &str, name: &str) -> Option<String> {
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().trim_start_matches(',').trim();
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if key.eq_ignore_ascii_case(name) {
            return Some(value.to_string());
        }
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    None
}

/// hyper's read buffer for a response's head (its `DEFAULT_MAX_BUFFER_SIZE`,
/// which reqwest keeps): a longer header section is refused.
const MAX_HEADER_BYTES: u64 = 8192 + 4096 * 100;

fn unreachable(e: reqwest::Error) -> HttpError {
    let chain = crate::client::error_chain(&e);
    if chain.contains("message head is too large") {
        return HttpError::TooLong {
            what: "header section",
            limit: MAX_HEADER_BYTES,
            found: "hyper: message head is too large".into(),
        };
    }
    HttpError::Unreachable(chain)
}

/// A body read chunk by chunk, refused as soon as it passes `limit`.
async fn read_bounded(
    mut response: reqwest::Response,
    what: &'static str,
    limit: u64,
) -> Result<Vec<u8>, HttpError> {
    if let Some(length) = response.content_length()
        && length > limit
    {
        return Err(HttpError::TooLong {
            what,
            limit,
            found: format!("its Content-Length says {length}"),
        });
    }
    let mut out = Vec::with_capacity(response.content_length().unwrap_or(0).min(limit) as usize);
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(HttpError::TooLong {
                what,
                limit,
                found: "more was sent".into(),
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The start of an error body, as text a terminal can show.
async fn error_text(response: reqwest::Response) -> String {
    let mut response = response;
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = (MAX_ERROR_BYTES as usize).saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() as u64 >= MAX_ERROR_BYTES {
            break;
        }
    }
    clean(&String::from_utf8_lossy(&out), QUOTED_ERROR_CHARS)
}

/// At most `max` characters, control characters (escapes) dropped.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .take(max)
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_are_read_quoted_or_not() {
        let p = r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#;
        assert_eq!(
            challenge_param(p, "realm").as_deref(),
            Some("https://auth.example/token")
        );
        assert_eq!(
            challenge_param(p, "service").as_deref(),
            Some("registry.example")
        );
        assert_eq!(
            challenge_param("realm=x, service=y", "service").as_deref(),
            Some("y")
        );
        assert_eq!(challenge_param(p, "error"), None);
        assert_eq!(challenge_param(r#"realm="unterminated"#, "realm"), None);
    }

    #[test]
    fn quoted_errors_are_short_and_free_of_escapes() {
        let hostile = format!("\x1b[2J\x1b]0;owned\x07{}", "x".repeat(1000));
        let c = clean(&hostile, QUOTED_ERROR_CHARS);
        assert!(!c.chars().any(|c| c.is_control()), "{c:?}");
        assert!(c.chars().count() <= QUOTED_ERROR_CHARS + 1);
        assert!(c.ends_with('…'));
    }
}
