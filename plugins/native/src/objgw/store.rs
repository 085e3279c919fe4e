//! The object store a load runs against: S3 or Swift, behind one set of
//! calls (an enum, not a trait object: no boxed futures per request).

use std::time::Instant;

use pipeline_stage_api::stage::StageError;

use super::client::{Body, Got, OpError, S3Client};
use super::swift_client::SwiftClient;

pub enum Store {
    S3(S3Client),
    Swift(SwiftClient),
}

impl Store {
    /// Whether the gateway is on this machine's loopback (then its CPU can be read).
    pub fn is_loopback(&self) -> bool {
        let url = match self {
            Store::S3(c) => &c.endpoint().url,
            Store::Swift(c) => &c.auth.url,
        };
        let host = url
            .strip_prefix("http://")
            .unwrap_or(url)
            .split(['/', ':'])
            .next()
            .unwrap_or("");
        host == "localhost" || host.starts_with("127.") || url.starts_with("http://[::1]")
    }

    /// What must happen before the first request: Swift's v1 auth.
    pub async fn connect(&self) -> Result<(), OpError> {
        match self {
            Store::S3(_) => Ok(()),
            Store::Swift(c) => c.authenticate().await,
        }
    }

    /// The error of the first request, said for a person: refused
    /// credentials, an unreachable gateway, or what it answered.
    pub fn first_request_error(&self, e: &OpError) -> StageError {
        let (what, url, refused) = match self {
            Store::S3(c) => (
                "S3 gateway",
                c.endpoint().url.clone(),
                e.is_credentials().then(|| {
                    format!(
                        "the gateway at {} refused the credentials of access key `{}` ({e}): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or `access_key`/`secret_key`)",
                        c.endpoint().url,
                        c.endpoint().access_key
                    )
                }),
            ),
            Store::Swift(c) => (
                "Swift auth",
                c.auth.url.clone(),
                matches!(e, OpError::Status { status: 401 | 403, .. }).then(|| {
                    format!(
                        "{} refused the key of Swift user `{}` ({e}): check ST_USER / ST_KEY (or `user`/`key`)",
                        c.auth.url, c.auth.user
                    )
                }),
            ),
        };
        if let Some(message) = refused {
            return StageError::failed(message);
        }
        match e {
            OpError::Connect(_) | OpError::Timeout | OpError::ConnectionReset => {
                StageError::failed(format!("cannot reach the {what} at {url}: {e}"))
            }
            _ => StageError::failed(format!("the {what} at {url} answered {e}")),
        }
    }

    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Body<'_>,
    ) -> Result<u64, OpError> {
        match self {
            Store::S3(c) => c.put_object(bucket, key, body).await,
            Store::Swift(c) => c.put_object(bucket, key, body).await,
        }
    }

    pub async fn get_object(
        &self,
        bucket: &str,
        key: &str,
        expected: &[u8],
        started: Instant,
    ) -> Result<Got, OpError> {
        match self {
            Store::S3(c) => c.get_object(bucket, key, expected, started).await,
            Store::Swift(c) => c.get_object(bucket, key, expected, started).await,
        }
    }

    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), OpError> {
        match self {
            Store::S3(c) => c.delete_object(bucket, key).await,
            Store::Swift(c) => c.delete_object(bucket, key).await,
        }
    }

    /// A multipart (S3) or segmented (Swift) upload of `body` in parts of
    /// `part_size`: the object's bytes, and each part's bytes and time.
    pub async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        body: bytes::Bytes,
        part_size: usize,
    ) -> Result<(u64, Vec<(u64, std::time::Duration)>), OpError> {
        match self {
            Store::S3(c) => c.put_multipart(bucket, key, body, part_size).await,
            Store::Swift(c) => c.put_multipart(bucket, key, body, part_size).await,
        }
    }

    /// HEAD of an object; its length must be `size`.
    pub async fn head_object(&self, bucket: &str, key: &str, size: u64) -> Result<(), OpError> {
        let length = match self {
            Store::S3(c) => c.head_object(bucket, key).await?,
            Store::Swift(c) => c.head_object(bucket, key).await?,
        };
        match length {
            Some(n) if n != size => Err(OpError::DataMismatch(format!(
                "HEAD says {n} bytes for an object of {size} bytes"
            ))),
            _ => Ok(()),
        }
    }

    /// One listing page (up to 1000 keys) under `prefix`; the keys it holds.
    pub async fn list_page(&self, bucket: &str, prefix: &str) -> Result<usize, OpError> {
        match self {
            Store::S3(c) => c.list_page(bucket, prefix).await,
            Store::Swift(c) => c.list_page(bucket, prefix).await,
        }
    }

    pub async fn create_bucket(&self, bucket: &str) -> Result<(), OpError> {
        match self {
            Store::S3(c) => c.create_bucket(bucket).await,
            Store::Swift(c) => c.create_container(bucket).await,
        }
    }

    pub async fn delete_bucket(&self, bucket: &str) -> Result<(), OpError> {
        match self {
            Store::S3(c) => c.delete_bucket(bucket).await,
            Store::Swift(c) => c.delete_container(bucket).await,
        }
    }

    pub async fn list_keys(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, OpError> {
        match self {
            Store::S3(c) => c.list_keys(bucket, prefix).await,
            Store::Swift(c) => c.list_keys(bucket, prefix).await,
        }
    }
}
