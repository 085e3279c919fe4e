//! A lean Swift client for load generation: v1 auth (`X-Auth-User`,
//! `X-Auth-Key` -> `X-Storage-Url`, `X-Auth-Token`), then plain-HTTP reqwest
//! with the token on every request. The same payload and GET check as the S3
//! client (see [`super::client`]); a token that expires mid-run (radosgw's
//! `rgw_swift_token_expiration`, 15 min by default) is renewed once and the
//! request sent again.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::bounds;
use super::client::{
    Body, Got, OpError, content_length, encode_key, encode_query, http_client, receive_checked,
};

/// Where to authenticate, and as whom.
#[derive(Clone)]
pub struct SwiftAuth {
    /// `http://HOST:PORT/auth/1.0`.
    pub url: String,
    /// `account:user`, e.g. `sandbox:swift`.
    pub user: String,
    pub key: String,
    /// Hosts (`HOST:PORT`) besides the auth URL's that a storage URL may
    /// name: the token is sent nowhere else.
    pub storage_hosts: Vec<String>,
}

/// `HOST:PORT` of a plain-HTTP URL (port 80 when it names none), lower case.
pub fn authority(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    Some(if has_port { host } else { format!("{host}:80") })
}

struct Session {
    storage_url: String,
    token: String,
}

pub struct SwiftClient {
    http: reqwest::Client,
    pub auth: SwiftAuth,
    session: RwLock<Option<Arc<Session>>>,
}

/// Longest listing page radosgw serves (and Swift's default).
pub const PAGE: usize = 10_000;

impl SwiftClient {
    pub fn new(auth: SwiftAuth, connections: usize, timeout: Duration) -> Result<Self, OpError> {
        let http = http_client(connections, timeout)?;
        Ok(SwiftClient {
            http,
            auth,
            session: RwLock::new(None),
        })
    }

    /// v1 auth: a token and the account's storage URL.
    pub async fn authenticate(&self) -> Result<(), OpError> {
        let response = self
            .http
            .get(&self.auth.url)
            .header("X-Auth-User", &self.auth.user)
            .header("X-Auth-Key", &self.auth.key)
            .send()
            .await
            .map_err(|e| OpError::from_transport(&e))?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Err(OpError::Status {
                status,
                code: String::new(),
            });
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (Some(storage_url), Some(token)) = (header("X-Storage-Url"), header("X-Auth-Token"))
        else {
            return Err(OpError::Other(format!(
                "the auth answer ({status}) has no X-Storage-Url or X-Auth-Token"
            )));
        };
        let storage_url = storage_url.trim_end_matches('/');
        self.check_storage_host(storage_url)?;
        let session = Arc::new(Session {
            storage_url: storage_url.to_string(),
            token,
        });
        *self.session.write().unwrap_or_else(|e| e.into_inner()) = Some(session);
        Ok(())
    }

    /// The storage URL the auth server named must be on the auth URL's
    /// host or one the suite allows (`storage_hosts`): the token, which
    /// every request carries, goes nowhere else.
    fn check_storage_host(&self, storage_url: &str) -> Result<(), OpError> {
        let shown = pipeline_stage_api::remote_worker::shown(storage_url);
        let auth = authority(&self.auth.url).unwrap_or_default();
        let Some(storage) = authority(storage_url) else {
            return Err(OpError::Other(format!(
                "a storage URL that is not plain http://HOST:PORT, `{shown}`: refused"
            )));
        };
        if storage == auth
            || self
                .auth
                .storage_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&storage))
        {
            return Ok(());
        }
        Err(OpError::Other(format!(
            "a storage URL on another host, `{shown}`: refused, the token goes only to {auth}; if {storage} is the gateway, allow it with `storage_hosts: [\"{storage}\"]`"
        )))
    }

    fn session(&self) -> Result<Arc<Session>, OpError> {
        self.session
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| OpError::Other("not authenticated".into()))
    }

    /// Sends a request built for the current session; on a 401 (an expired
    /// token) authenticates again and sends it once more.
    async fn send(
        &self,
        build: impl Fn(&Session) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, OpError> {
        let mut renewed = false;
        loop {
            let session = self.session()?;
            let response = build(&session)
                .header("X-Auth-Token", &session.token)
                .send()
                .await
                .map_err(|e| OpError::from_transport(&e))?;
            let status = response.status().as_u16();
            if response.status().is_success() {
                return Ok(response);
            }
            if status == 401 && !renewed {
                renewed = true;
                self.authenticate().await?;
                continue;
            }
            return Err(OpError::Status {
                status,
                code: String::new(),
            });
        }
    }

    fn url(session: &Session, container: &str, object: Option<&str>) -> String {
        let mut url = format!("{}/{}", session.storage_url, encode_key(container));
        if let Some(o) = object {
            url.push('/');
            url.push_str(&encode_key(o));
        }
        url
    }

    pub async fn put_object(
        &self,
        container: &str,
        key: &str,
        body: Body<'_>,
    ) -> Result<u64, OpError> {
        self.send(|s| {
            self.http
                .put(Self::url(s, container, Some(key)))
                .body(body.bytes.clone())
        })
        .await?;
        Ok(body.bytes.len() as u64)
    }

    pub async fn get_object(
        &self,
        container: &str,
        key: &str,
        expected: &[u8],
        started: Instant,
    ) -> Result<Got, OpError> {
        let response = self
            .send(|s| self.http.get(Self::url(s, container, Some(key))))
            .await?;
        receive_checked(response, expected, started).await
    }

    pub async fn delete_object(&self, container: &str, key: &str) -> Result<(), OpError> {
        self.send(|s| self.http.delete(Self::url(s, container, Some(key))))
            .await?;
        Ok(())
    }

    /// A segmented upload (Swift's dynamic large object): the segments under
    /// `KEY/`, one after the other, then the manifest at `KEY`. Returns the
    /// bytes and each segment's bytes and time.
    pub async fn put_multipart(
        &self,
        container: &str,
        key: &str,
        body: Bytes,
        part_size: usize,
    ) -> Result<(u64, Vec<(u64, Duration)>), OpError> {
        let mut parts = Vec::new();
        for (i, start) in (0..body.len().max(1)).step_by(part_size.max(1)).enumerate() {
            let end = (start + part_size).min(body.len());
            let segment = format!("{key}/{:08}", i + 1);
            let started = Instant::now();
            let bytes = body.slice(start..end);
            self.send(|s| {
                self.http
                    .put(Self::url(s, container, Some(&segment)))
                    .body(bytes.clone())
            })
            .await?;
            parts.push(((end - start) as u64, started.elapsed()));
        }
        let manifest = format!("{container}/{key}/");
        self.send(|s| {
            self.http
                .put(Self::url(s, container, Some(key)))
                .header("X-Object-Manifest", &manifest)
                // radosgw answers 411 to a PUT without a length.
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .body(Vec::new())
        })
        .await?;
        Ok((body.len() as u64, parts))
    }

    /// HEAD of an object: its Content-Length.
    pub async fn head_object(&self, container: &str, key: &str) -> Result<Option<u64>, OpError> {
        let response = self
            .send(|s| self.http.head(Self::url(s, container, Some(key))))
            .await?;
        Ok(content_length(&response))
    }

    /// One listing page (up to 1000 names) under `prefix`: how many names.
    pub async fn list_page(&self, container: &str, prefix: &str) -> Result<usize, OpError> {
        let names = self.names(container, prefix, None, 1000).await?;
        bounds::Pager::new(container, prefix, 1000).check(&names, None)?;
        Ok(names.len())
    }

    /// Up to `limit` object names under `prefix`, after `marker`; the
    /// caller's [`bounds::Pager`] checks them.
    pub async fn names(
        &self,
        container: &str,
        prefix: &str,
        marker: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, OpError> {
        let mut query = format!("format=json&limit={limit}&prefix={}", encode_query(prefix));
        if let Some(m) = marker {
            query.push_str(&format!("&marker={}", encode_query(m)));
        }
        let body = bounds::text(
            self.send(|s| {
                self.http
                    .get(format!("{}?{query}", Self::url(s, container, None)))
            })
            .await?,
            bounds::LISTING_PAGE,
            &format!("the gateway's listing of container `{container}`"),
        )
        .await?;
        super::answers::swift_listing(&body)
    }

    pub async fn create_container(&self, container: &str) -> Result<(), OpError> {
        self.send(|s| self.http.put(Self::url(s, container, None)))
            .await?;
        Ok(())
    }

    pub async fn delete_container(&self, container: &str) -> Result<(), OpError> {
        self.send(|s| self.http.delete(Self::url(s, container, None)))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::authority;

    #[test]
    fn authorities_compare_host_and_port() {
        assert_eq!(
            authority("http://127.0.0.1:7480/auth/1.0").as_deref(),
            Some("127.0.0.1:7480")
        );
        assert_eq!(
            authority("http://GW.example/swift/v1").as_deref(),
            Some("gw.example:80")
        );
        assert_eq!(
            authority("http://[::1]:7480/x").as_deref(),
            Some("[::1]:7480")
        );
        assert_eq!(authority("http://[::1]/x").as_deref(), Some("[::1]:80"));
        assert_eq!(authority("https://gw:443/"), None);
        assert_eq!(authority("http://user@gw:80/"), None);
    }
}
