//! A lean S3 client for load generation: plain-HTTP reqwest, path-style
//! addressing, every request signed with SigV4 by the `aws-sigv4` crate.
//!
//! Lean because the client's CPU per request decides how much of a small
//! machine is left for the gateway (see `docs/objgw-notes.md`): the payload
//! is one shared buffer whose SHA-256 is computed once, GET bodies are
//! compared with it chunk by chunk (verification at the cost of a memcmp),
//! and nothing per request is kept.

use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{answers, bounds};

/// Keys per ListObjectsV2 page (the S3 default, which the request leaves).
pub const PAGE: usize = 1000;

/// Why one request failed, by the kinds the report counts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpError {
    /// The gateway answered with an error status; `code` is the S3 error
    /// code from the body (`NoSuchKey`, `SignatureDoesNotMatch`), if any.
    #[error("HTTP {status}{}", code_suffix(.code))]
    Status { status: u16, code: String },
    #[error("timed out")]
    Timeout,
    #[error("connection reset")]
    ConnectionReset,
    #[error("cannot connect: {0}")]
    Connect(String),
    /// A GET returned other bytes (or another length) than were PUT.
    #[error("data mismatch: {0}")]
    DataMismatch(String),
    #[error("{0}")]
    Other(String),
}

fn code_suffix(code: &str) -> String {
    if code.is_empty() {
        String::new()
    } else {
        format!(" {code}")
    }
}

impl OpError {
    /// The error kind as the report counts it: `http-503`, `timeout`,
    /// `connection-reset`, `connect`, `data-mismatch`, `other`.
    pub fn kind(&self) -> String {
        match self {
            OpError::Status { status, .. } => format!("http-{status}"),
            OpError::Timeout => "timeout".into(),
            OpError::ConnectionReset => "connection-reset".into(),
            OpError::Connect(_) => "connect".into(),
            OpError::DataMismatch(_) => "data-mismatch".into(),
            OpError::Other(_) => "other".into(),
        }
    }

    /// The gateway refused the credentials (wrong key id, wrong secret).
    pub fn is_credentials(&self) -> bool {
        matches!(self, OpError::Status { status: 403, code }
            if code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code.is_empty())
    }

    pub(super) fn from_transport(e: &reqwest::Error) -> Self {
        if e.is_timeout() {
            return OpError::Timeout;
        }
        if e.is_connect() {
            return OpError::Connect(error_chain(e));
        }
        let mut source: Option<&dyn std::error::Error> = Some(e);
        while let Some(err) = source {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::BrokenPipe
                )
            {
                return OpError::ConnectionReset;
            }
            source = err.source();
        }
        let chain = error_chain(e);
        if chain.contains("message head is too large") {
            // hyper's bound on a response head (its DEFAULT_MAX_BUFFER_SIZE).
            return OpError::Other(format!(
                "{chain} (its header section was longer than the 417792 bytes the runner reads of one)"
            ));
        }
        OpError::Other(chain)
    }
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        text.push_str(": ");
        text.push_str(&err.to_string());
        source = err.source();
    }
    text
}

/// What the client needs to reach and sign for a gateway.
#[derive(Clone)]
pub struct Endpoint {
    /// `http://host:port`, no trailing slash.
    pub url: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
}

/// The bytes every PUT sends a prefix of (an object of `n` bytes is the
/// first `n`), with the SHA-256 of each prefix length the run uses computed
/// once.
pub struct Payload {
    pub bytes: Bytes,
    /// By prefix length; a length not here is sent as `UNSIGNED-PAYLOAD`.
    hashes: std::collections::BTreeMap<usize, String>,
}

/// One PUT's body: a prefix of the payload (no copy) and its hash, if known.
pub struct Body<'a> {
    pub bytes: Bytes,
    pub sha256_hex: Option<&'a str>,
}

impl Payload {
    /// `size` bytes of a fixed pseudo-random pattern (not compressible, not zeros).
    pub fn new(size: usize) -> Self {
        Self::with_hashes(size, &[size])
    }

    /// `size` bytes, with the hashes of the prefixes of `hashed` lengths.
    pub fn with_hashes(size: usize, hashed: &[usize]) -> Self {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut data = Vec::with_capacity(size);
        while data.len() < size {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let take = (size - data.len()).min(8);
            data.extend_from_slice(&state.to_le_bytes()[..take]);
        }
        let hashes = hashed
            .iter()
            .filter(|n| **n <= data.len())
            .map(|n| (*n, hex(&Sha256::digest(&data[..*n]))))
            .collect();
        Payload {
            bytes: Bytes::from(data),
            hashes,
        }
    }

    /// The body of an object of `size` bytes.
    pub fn body(&self, size: usize) -> Body<'_> {
        let size = size.min(self.bytes.len());
        Body {
            bytes: self.bytes.slice(..size),
            sha256_hex: self.hashes.get(&size).map(String::as_str),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Stands for "no hash known": the body is signed as `UNSIGNED-PAYLOAD`.
const UNSIGNED: &str = "UNSIGNED-PAYLOAD";

const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A GET's figures: bytes received and the time to the response headers
/// (the first byte of the answer).
pub struct Got {
    pub bytes: u64,
    pub ttfb: Duration,
}

pub struct S3Client {
    http: reqwest::Client,
    endpoint: Endpoint,
    identity: Identity,
    unsigned_payload: bool,
}

impl S3Client {
    pub fn new(
        endpoint: Endpoint,
        connections: usize,
        timeout: Duration,
        unsigned_payload: bool,
    ) -> Result<Self, OpError> {
        let http = http_client(connections, timeout)?;
        let identity = Credentials::new(
            endpoint.access_key.clone(),
            endpoint.secret_key.clone(),
            None,
            None,
            "pipeline s3-bench",
        )
        .into();
        Ok(S3Client {
            http,
            endpoint,
            identity,
            unsigned_payload,
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn url(&self, bucket: &str, key: Option<&str>, query: &str) -> String {
        let mut url = format!("{}/{bucket}", self.endpoint.url);
        if let Some(key) = key {
            url.push('/');
            url.push_str(&encode_key(key));
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    fn signed(
        &self,
        method: reqwest::Method,
        url: &str,
        body_sha256: Option<&str>,
    ) -> Result<reqwest::RequestBuilder, OpError> {
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.endpoint.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| OpError::Other(format!("cannot sign: {e}")))?
            .into();
        let body = match body_sha256 {
            Some(_) if self.unsigned_payload => SignableBody::UnsignedPayload,
            Some(UNSIGNED) => SignableBody::UnsignedPayload,
            Some(hash) => SignableBody::Precomputed(hash.to_string()),
            None => SignableBody::Precomputed(EMPTY_SHA256.to_string()),
        };
        let signable = SignableRequest::new(method.as_str(), url, std::iter::empty(), body)
            .map_err(|e| OpError::Other(format!("cannot sign: {e}")))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| OpError::Other(format!("cannot sign: {e}")))?
            .into_parts();
        let mut request = self.http.request(method, url);
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        Ok(request)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, OpError> {
        let response = request
            .send()
            .await
            .map_err(|e| OpError::from_transport(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        // Only the code is read: a body beyond an error's size is not.
        let body = bounds::text(response, bounds::ERROR_BODY, "an error answer")
            .await
            .unwrap_or_default();
        Err(OpError::Status {
            status,
            code: answers::s3_error_code(&body),
        })
    }

    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Body<'_>,
    ) -> Result<u64, OpError> {
        let url = self.url(bucket, Some(key), "");
        let length = body.bytes.len() as u64;
        let request = self
            .signed(
                reqwest::Method::PUT,
                &url,
                Some(body.sha256_hex.unwrap_or(UNSIGNED)),
            )?
            .body(body.bytes);
        self.send(request).await?;
        Ok(length)
    }

    /// GETs `key` and checks the body is `expected`, byte for byte.
    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
        expected: &[u8],
        started: Instant,
    ) -> Result<Got, OpError> {
        let url = self.url(bucket, Some(key), "");
        let response = self
            .send(self.signed(reqwest::Method::GET, &url, None)?)
            .await?;
        receive_checked(response, expected, started).await
    }

    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), OpError> {
        let url = self.url(bucket, Some(key), "");
        self.send(self.signed(reqwest::Method::DELETE, &url, None)?)
            .await?;
        Ok(())
    }
    /// A multipart upload of `body` in parts of `part_size` (one after the
    /// other; requests in flight give the parallelism): create, upload each
    /// part (signed `UNSIGNED-PAYLOAD`), complete. Returns the bytes and each
    /// part's bytes and time. An upload that fails is aborted.
    pub async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        part_size: usize,
    ) -> Result<(u64, Vec<(u64, Duration)>), OpError> {
        let url = self.url(bucket, Some(key), "uploads=");
        let created = bounds::text(
            self.send(self.signed(reqwest::Method::POST, &url, None)?)
                .await?,
            bounds::SMALL_ANSWER,
            "the answer to CreateMultipartUpload",
        )
        .await?;
        let Some(upload_id) = answers::s3_upload_id(&created)? else {
            return Err(OpError::Other(
                "no UploadId in the answer to CreateMultipartUpload".into(),
            ));
        };
        let result = self
            .upload_parts(bucket, key, &upload_id, &body, part_size)
            .await;
        if result.is_err() {
            let url = self.url(
                bucket,
                Some(key),
                &format!("uploadId={}", encode_query(&upload_id)),
            );
            if let Ok(abort) = self.signed(reqwest::Method::DELETE, &url, None) {
                let _ = self.send(abort).await;
            }
        }
        result.map(|parts| (body.len() as u64, parts))
    }

    async fn upload_parts(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        body: &Bytes,
        part_size: usize,
    ) -> Result<Vec<(u64, Duration)>, OpError> {
        let id = encode_query(upload_id);
        let mut parts = Vec::new();
        let mut etags = Vec::new();
        for (i, start) in (0..body.len().max(1)).step_by(part_size.max(1)).enumerate() {
            let number = i + 1;
            let end = (start + part_size).min(body.len());
            let url = self.url(
                bucket,
                Some(key),
                &format!("partNumber={number}&uploadId={id}"),
            );
            let started = Instant::now();
            let response = self
                .send(
                    self.signed(reqwest::Method::PUT, &url, Some(UNSIGNED))?
                        .body(body.slice(start..end)),
                )
                .await?;
            let etag = response
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| OpError::Other(format!("no ETag for part {number}")))?
                .to_string();
            parts.push(((end - start) as u64, started.elapsed()));
            etags.push((number, etag));
        }
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (number, etag) in &etags {
            xml.push_str(&format!(
                "<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag></Part>"
            ));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let url = self.url(bucket, Some(key), &format!("uploadId={id}"));
        let hash = hex(&Sha256::digest(xml.as_bytes()));
        let response = self
            .send(
                self.signed(reqwest::Method::POST, &url, Some(&hash))?
                    .body(xml),
            )
            .await?;
        // Completion can fail inside a 200 (the error is in the body).
        let text = bounds::text(
            response,
            bounds::SMALL_ANSWER,
            "the answer to CompleteMultipartUpload",
        )
        .await?;
        if let Some(code) = answers::s3_complete_error(&text)? {
            return Err(OpError::Status { status: 200, code });
        }
        Ok(parts)
    }

    /// HEAD of an object: its Content-Length.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<u64>, OpError> {
        let url = self.url(bucket, Some(key), "");
        let response = self
            .send(self.signed(reqwest::Method::HEAD, &url, None)?)
            .await?;
        Ok(content_length(&response))
    }

    /// One ListObjectsV2 page (up to 1000 keys) under `prefix`: how many keys.
    pub async fn list_page(&self, bucket: &str, prefix: &str) -> Result<usize, OpError> {
        let (keys, next) = self.list_v2(bucket, prefix, None).await?;
        bounds::Pager::new(bucket, prefix, PAGE).check(&keys, next.as_deref())?;
        Ok(keys.len())
    }

    /// One ListObjectsV2 page (up to [`PAGE`] keys): its keys, and the
    /// token of the next page; the caller's [`bounds::Pager`] checks them.
    pub async fn list_v2(
        &self,
        bucket: &str,
        prefix: &str,
        token: Option<&str>,
    ) -> Result<(Vec<String>, Option<String>), OpError> {
        // Query parameters in the canonical (sorted) order SigV4 wants.
        let mut query = String::new();
        if let Some(t) = token {
            query.push_str(&format!("continuation-token={}&", encode_query(t)));
        }
        query.push_str(&format!("list-type=2&prefix={}", encode_query(prefix)));
        let url = self.url(bucket, None, &query);
        let what = format!("the gateway's listing of bucket `{bucket}`");
        let body = bounds::text(
            self.send(self.signed(reqwest::Method::GET, &url, None)?)
                .await?,
            bounds::LISTING_PAGE,
            &what,
        )
        .await?;
        let page = answers::s3_listing(&body, &what)?;
        Ok((page.keys, page.next))
    }

    pub async fn create_bucket(&self, bucket: &str) -> Result<(), OpError> {
        let url = self.url(bucket, None, "");
        self.send(self.signed(reqwest::Method::PUT, &url, None)?)
            .await?;
        Ok(())
    }

    pub async fn delete_bucket(&self, bucket: &str) -> Result<(), OpError> {
        let url = self.url(bucket, None, "");
        self.send(self.signed(reqwest::Method::DELETE, &url, None)?)
            .await?;
        Ok(())
    }
}

/// The HTTP client of a load generator: keep-alive for `connections`
/// requests in flight, no Nagle, no proxy, `timeout` per request.
pub(super) fn http_client(
    connections: usize,
    timeout: Duration,
) -> Result<reqwest::Client, OpError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .pool_max_idle_per_host(connections)
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(|e| OpError::Other(error_chain(&e)))
}

/// Reads a GET's body, comparing it with `expected` chunk by chunk (no copy),
/// and the time to the response headers from `started`.
pub(super) async fn receive_checked(
    mut response: reqwest::Response,
    expected: &[u8],
    started: Instant,
) -> Result<Got, OpError> {
    let ttfb = started.elapsed();
    let mut received = 0usize;
    let mut mismatch = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| OpError::from_transport(&e))?
    {
        let end = received + chunk.len();
        if end > expected.len() || expected[received..end] != chunk[..] {
            mismatch = true;
        }
        received = end;
        if received > expected.len() {
            // More than the object holds: nothing further is read.
            break;
        }
    }
    if mismatch || received != expected.len() {
        return Err(OpError::DataMismatch(format!(
            "{received} bytes came back for an object of {} bytes{}",
            expected.len(),
            if mismatch { ", content differs" } else { "" }
        )));
    }
    Ok(Got {
        bytes: received as u64,
        ttfb,
    })
}

/// The Content-Length header (a HEAD has no body to measure).
pub(super) fn content_length(response: &reqwest::Response) -> Option<u64> {
    response
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Percent-encodes a key for the path (keeps `/`, as S3 does).
pub(super) fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn encode_query(value: &str) -> String {
    encode_key(value).replace('/', "%2F")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_for_the_path_and_the_query() {
        assert_eq!(encode_key("pl-x/00000001"), "pl-x/00000001");
        assert_eq!(encode_key("a b+c"), "a%20b%2Bc");
        assert_eq!(encode_query("pl-x/"), "pl-x%2F");
    }

    #[test]
    fn error_kinds_name_what_happened() {
        let refused = OpError::Status {
            status: 403,
            code: "SignatureDoesNotMatch".into(),
        };
        assert_eq!(refused.kind(), "http-403");
        assert!(refused.is_credentials());
        let denied = OpError::Status {
            status: 403,
            code: "AccessDenied".into(),
        };
        assert!(!denied.is_credentials());
        assert_eq!(OpError::Timeout.kind(), "timeout");
    }

    #[test]
    fn the_payload_hash_is_the_sha256_of_its_bytes() {
        let p = Payload::with_hashes(4096, &[4096, 100]);
        assert_eq!(p.bytes.len(), 4096);
        assert_eq!(
            p.body(4096).sha256_hex.unwrap(),
            hex(&Sha256::digest(&p.bytes))
        );
        let small = p.body(100);
        assert_eq!(small.bytes.len(), 100);
        assert_eq!(
            small.sha256_hex.unwrap(),
            hex(&Sha256::digest(&p.bytes[..100]))
        );
        assert!(
            p.body(99).sha256_hex.is_none(),
            "an unhashed length goes unsigned"
        );
        assert_eq!(hex(&Sha256::digest(b"")), EMPTY_SHA256);
        assert_ne!(p.bytes[0..8], p.bytes[8..16]);
    }
}
