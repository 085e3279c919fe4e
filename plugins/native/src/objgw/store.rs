//! The object store a load runs against: S3 or Swift, behind one set of
//! calls (an enum, not a trait object: no boxed futures per request).

use std::time::Instant;

use pipeline_stage_api::stage::StageError;

use super::bounds::Pager;
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

    /// A listing of every key under `prefix`, to be read page by page
    /// ([`next_page`](Self::next_page)): a page is dealt with before the
    /// next is asked for, and nothing of the listing is kept but where it is.
    pub fn listing(&self, bucket: &str, prefix: &str) -> Listing {
        let page_size = match self {
            Store::S3(_) => super::client::PAGE,
            Store::Swift(_) => super::swift_client::PAGE,
        };
        Listing {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            pager: Pager::new(bucket, prefix, page_size),
            next: None,
            ended: false,
        }
    }

    /// The listing's next page of keys; `None` once it ended. Each page is
    /// checked by the listing's [`Pager`]: a listing that pages forever,
    /// repeats itself or names keys outside the prefix is an error.
    pub async fn next_page(&self, listing: &mut Listing) -> Result<Option<Vec<String>>, OpError> {
        if listing.ended {
            return Ok(None);
        }
        let (keys, next) = match self {
            Store::S3(c) => {
                c.list_v2(&listing.bucket, &listing.prefix, listing.next.as_deref())
                    .await?
            }
            Store::Swift(c) => {
                let names = c
                    .names(
                        &listing.bucket,
                        &listing.prefix,
                        listing.next.as_deref(),
                        super::swift_client::PAGE,
                    )
                    .await?;
                // A full page may have more after it: its last name is the marker.
                let next = (names.len() >= super::swift_client::PAGE)
                    .then(|| names.last().cloned())
                    .flatten();
                (names, next)
            }
        };
        listing.pager.check(&keys, next.as_deref())?;
        listing.ended = next.is_none();
        listing.next = next;
        Ok(Some(keys))
    }
}

/// Where a listing of one bucket has got to.
pub struct Listing {
    bucket: String,
    prefix: String,
    pager: Pager,
    /// The next page's continuation token (S3) or marker (Swift).
    next: Option<String>,
    ended: bool,
}
