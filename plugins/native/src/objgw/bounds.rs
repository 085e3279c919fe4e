//! What a gateway may send: every answer the S3 and Swift clients read
//! whole is read under a size bound for what such an answer can need, and
//! a listing is followed page by page under a [`Pager`] that stops one that
//! never ends, repeats itself or names keys outside the prefix it was asked
//! for. A gateway behind a broken proxy (or a hostile one) then costs a
//! clear error naming the bucket and the limit, not memory without bound
//! or a cleanup that never returns.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use super::client::OpError;

/// An error answer's body: only its `<Code>` is read (radosgw's are < 1 KiB).
pub const ERROR_BODY: usize = 64 << 10;
/// One listing page: 1000 keys (S3) or 10 000 names (Swift) of at most
/// 1024 bytes each, with their XML or JSON around them, is under 16 MiB.
pub const LISTING_PAGE: usize = 16 << 20;
/// The small XML answers of multipart uploads (an upload id, an error code).
pub const SMALL_ANSWER: usize = 1 << 20;
/// Pages one listing may take (10 million S3 keys): far beyond what one
/// stage writes into a bucket, and a listing that goes on longer is no
/// listing of ours.
pub const MAX_PAGES: usize = 10_000;

/// A response's body as text, refused once it passes `limit` bytes (before
/// reading, when its Content-Length already says so). `what` names the
/// answer for the error.
pub async fn text(
    mut response: reqwest::Response,
    limit: usize,
    what: &str,
) -> Result<String, OpError> {
    let too_long = || {
        OpError::Other(format!(
            "{what} was longer than {} (more than such an answer can need): refused",
            size(limit)
        ))
    };
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| OpError::from_transport(&e))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// S3 answers are plain XML: a document type declaration (the way to
/// entities, and to their expansion) is refused, never read.
pub fn plain_xml(xml: &str, what: &str) -> Result<(), OpError> {
    let upper = xml
        .get(..xml.len().min(4096))
        .unwrap_or(xml)
        .to_ascii_uppercase();
    if upper.contains("<!DOCTYPE") || xml.to_ascii_uppercase().contains("<!ENTITY") {
        return Err(OpError::Other(format!(
            "{what} holds a DOCTYPE or ENTITY declaration: refused (S3 answers have none)"
        )));
    }
    Ok(())
}

/// Follows one listing of `bucket` under `prefix`, page by page.
pub struct Pager {
    bucket: String,
    prefix: String,
    /// Keys a page may hold: what each request asked for.
    page_size: usize,
    pages: usize,
    /// The continuation tokens (or markers) seen, hashed: a repeat is a loop.
    seen: HashSet<u64>,
}

impl Pager {
    pub fn new(bucket: &str, prefix: &str, page_size: usize) -> Pager {
        Pager {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            page_size,
            pages: 0,
            seen: HashSet::new(),
        }
    }

    /// Checks a page that came back: at most the keys asked for, each under
    /// the prefix (a key outside it is not this run's to delete), and the
    /// next page's `token`, which must be new.
    pub fn check(&mut self, keys: &[String], token: Option<&str>) -> Result<(), OpError> {
        self.pages += 1;
        if keys.len() > self.page_size {
            return Err(self.error(format!(
                "page {} held {} keys, more than the {} asked for",
                self.pages,
                keys.len(),
                self.page_size
            )));
        }
        if let Some(key) = keys.iter().find(|k| !k.starts_with(&self.prefix)) {
            return Err(self.error(format!(
                "page {} named key `{}`, outside the prefix `{}` asked for (nothing of that page is deleted)",
                self.pages,
                pipeline_stage_api::remote_worker::shown(key),
                self.prefix
            )));
        }
        let Some(token) = token else { return Ok(()) };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        token.hash(&mut hasher);
        if !self.seen.insert(hasher.finish()) {
            return Err(self.error(format!(
                "did not end after {} pages (token repeated)",
                self.pages
            )));
        }
        if self.pages >= MAX_PAGES {
            return Err(self.error(format!("did not end after {} pages", self.pages)));
        }
        Ok(())
    }

    fn error(&self, what: String) -> OpError {
        OpError::Other(format!(
            "the gateway's listing of bucket `{}` {what}",
            self.bucket
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_listing_that_repeats_its_token_is_stopped_by_name() {
        let mut pager = Pager::new("b1", "pl-x/", 1000);
        pager.check(&keys(&["pl-x/1"]), Some("t")).unwrap();
        let err = pager.check(&keys(&["pl-x/2"]), Some("t")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the gateway's listing of bucket `b1` did not end after 2 pages (token repeated)"
        );
    }

    #[test]
    fn a_listing_that_never_ends_is_stopped_at_the_page_bound() {
        let mut pager = Pager::new("b1", "", 1000);
        let mut last = Ok(());
        for i in 0..MAX_PAGES + 5 {
            last = pager.check(&[], Some(&format!("t{i}")));
            if last.is_err() {
                assert_eq!(i + 1, MAX_PAGES);
                break;
            }
        }
        assert!(
            last.unwrap_err()
                .to_string()
                .contains("did not end after 10000 pages")
        );
    }

    #[test]
    fn keys_outside_the_prefix_or_too_many_are_refused() {
        let mut pager = Pager::new("b1", "pl-x/", 2);
        let err = pager
            .check(&keys(&["pl-x/1", "other/\x1b[2Jk"]), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the prefix `pl-x/`"), "{err}");
        assert!(!err.contains('\x1b'), "{err}");
        let err = pager
            .check(&keys(&["pl-x/1", "pl-x/2", "pl-x/3"]), None)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("held 3 keys, more than the 2 asked for")
        );
        assert!(pager.check(&keys(&["pl-x/1"]), None).is_ok());
    }

    #[test]
    fn a_doctype_is_refused_and_plain_xml_passes() {
        let bomb = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaa\">]><ListBucketResult>&a;</ListBucketResult>";
        let err = plain_xml(bomb, "the listing of bucket `b`").unwrap_err();
        assert!(err.to_string().contains("DOCTYPE or ENTITY"), "{err}");
        assert!(plain_xml("<ListBucketResult><Key>a</Key></ListBucketResult>", "x").is_ok());
    }
}
