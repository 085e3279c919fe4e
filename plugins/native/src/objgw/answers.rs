//! What a gateway answers, read: the S3 XML of a listing, an error and a
//! multipart upload, and a Swift container's JSON listing. Plain functions
//! of the answer's text (already read under its [`super::bounds`]), so
//! that they are tested, and fuzzed (`fuzz/fuzz_targets/gateway_answers.rs`),
//! without a gateway.

use super::bounds;
use super::client::OpError;

/// One ListObjectsV2 page: its keys (unescaped), and the token of the
/// next page when the page says it is truncated.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub keys: Vec<String>,
    pub next: Option<String>,
}

/// A ListObjectsV2 answer; `what` names it in an error ("the gateway's
/// listing of bucket `b`"). A DOCTYPE or an entity is refused unread.
pub fn s3_listing(body: &str, what: &str) -> Result<Listing, OpError> {
    bounds::plain_xml(body, what)?;
    let keys = xml_values(body, "Key")
        .into_iter()
        .map(|k| xml_unescape(&k))
        .collect();
    let truncated = xml_values(body, "IsTruncated").first().map(String::as_str) == Some("true");
    let next = xml_values(body, "NextContinuationToken")
        .into_iter()
        .next()
        .filter(|_| truncated);
    Ok(Listing { keys, next })
}

/// The `<Code>` of an S3 error answer; empty when it has none. Only the
/// code is read (it goes into an error kind, cleaned there).
pub fn s3_error_code(body: &str) -> String {
    xml_values(body, "Code")
        .into_iter()
        .next()
        .unwrap_or_default()
}

/// The upload id of a CreateMultipartUpload answer.
pub fn s3_upload_id(body: &str) -> Result<Option<String>, OpError> {
    bounds::plain_xml(body, "the answer to CreateMultipartUpload")?;
    Ok(xml_values(body, "UploadId").into_iter().next())
}

/// The error code a CompleteMultipartUpload answer carries in its body
/// (S3 may answer 200 and fail in the body).
pub fn s3_complete_error(body: &str) -> Result<Option<String>, OpError> {
    bounds::plain_xml(body, "the answer to CompleteMultipartUpload")?;
    Ok(xml_values(body, "Code").into_iter().next())
}

/// The object names of a Swift container listing (`format=json`); an
/// empty answer is an empty container.
pub fn swift_listing(body: &str) -> Result<Vec<String>, OpError> {
    if body.trim().is_empty() {
        return Ok(Vec::new());
    }
    let page: Vec<serde_json::Value> = serde_json::from_str(body)
        .map_err(|e| OpError::Other(format!("container listing: {e}")))?;
    Ok(page
        .iter()
        .filter_map(|o| o.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect())
}

/// The texts of every `<tag>…</tag>` in an S3 XML answer (flat tags only).
fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut values = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        values.push(after[..end].to_string());
        rest = &after[end + close.len()..];
    }
    values
}

fn xml_unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_page_gives_its_unescaped_keys_and_the_next_token_when_truncated() {
        let xml = "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key></Contents><Contents><Key>c</Key></Contents><NextContinuationToken>t1</NextContinuationToken></ListBucketResult>";
        let page = s3_listing(xml, "the listing").unwrap();
        assert_eq!(page.keys, vec!["a&b", "c"]);
        assert_eq!(page.next.as_deref(), Some("t1"));
        let last = xml.replace("<IsTruncated>true", "<IsTruncated>false");
        assert_eq!(s3_listing(&last, "the listing").unwrap().next, None);
    }

    #[test]
    fn a_listing_with_a_doctype_is_refused() {
        let xml = "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult><Key>&a;</Key></ListBucketResult>";
        let e = s3_listing(xml, "the gateway's listing of bucket `b`").unwrap_err();
        assert!(e.to_string().contains("bucket `b`"), "{e}");
    }

    #[test]
    fn error_codes_and_multipart_answers_are_read() {
        assert_eq!(
            s3_error_code("<Error><Code>NoSuchKey</Code></Error>"),
            "NoSuchKey"
        );
        assert_eq!(s3_error_code("not xml at all"), "");
        assert_eq!(
            s3_upload_id("<InitiateMultipartUploadResult><UploadId>2~x</UploadId></InitiateMultipartUploadResult>")
                .unwrap()
                .as_deref(),
            Some("2~x")
        );
        assert_eq!(
            s3_complete_error("<Error><Code>InternalError</Code></Error>")
                .unwrap()
                .as_deref(),
            Some("InternalError")
        );
    }

    #[test]
    fn a_swift_listing_gives_its_names() {
        let json = r#"[{"name":"p/1","bytes":4},{"bytes":2},{"name":"p/2"}]"#;
        assert_eq!(swift_listing(json).unwrap(), vec!["p/1", "p/2"]);
        assert_eq!(swift_listing("  \n").unwrap(), Vec::<String>::new());
        assert!(swift_listing("{\"name\":1}").is_err());
    }

    /// Answers captured from the sandbox's radosgw (16.2.15) with curl.
    fn captured(name: &str) -> String {
        let path = format!("{}/tests/data/gateway/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn captured_radosgw_answers_are_read() {
        let first = s3_listing(&captured("s3-list-v2-truncated.xml"), "l").unwrap();
        assert_eq!(first.keys, vec!["pl-run/1", "pl-run/2"]);
        assert_eq!(first.next.as_deref(), Some("pl-run/2"));
        let last = s3_listing(&captured("s3-list-v2-last.xml"), "l").unwrap();
        assert_eq!(
            last.keys,
            vec!["pl-run/1", "pl-run/2", "pl-run/3", "pl-run/a&b<c>"]
        );
        assert_eq!(last.next, None);
        assert_eq!(
            s3_error_code(&captured("s3-error-nosuchkey.xml")),
            "NoSuchKey"
        );
        assert_eq!(
            s3_error_code(&captured("s3-error-nosuchbucket.xml")),
            "NoSuchBucket"
        );
        assert_eq!(
            s3_upload_id(&captured("s3-create-multipart.xml"))
                .unwrap()
                .as_deref(),
            Some("2~M_My21eEdQDR3HuvpSX7oDVtYUSZcTV")
        );
        assert_eq!(
            s3_complete_error(&captured("s3-complete-multipart-error.xml"))
                .unwrap()
                .as_deref(),
            Some("InvalidPart")
        );
        assert_eq!(
            swift_listing(&captured("swift-list-json-limit2.json")).unwrap(),
            vec!["pl-run/1", "pl-run/2"]
        );
        assert_eq!(
            swift_listing(&captured("swift-list-json-after-marker.json")).unwrap(),
            vec!["pl-run/été"]
        );
        assert!(
            swift_listing(&captured("swift-list-json-none.json"))
                .unwrap()
                .is_empty()
        );
    }
}
