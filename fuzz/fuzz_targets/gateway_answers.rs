//! What an S3 or Swift gateway answers, as the object-gateway stages read
//! it: the first byte picks the answer (ListObjectsV2 page, S3 error,
//! CreateMultipartUpload, CompleteMultipartUpload, Swift JSON listing),
//! the rest is the body. A listing page then goes through the pager's
//! checks, as in a cleanup: whatever it lets through is keys under the
//! run's prefix, no more than a page holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_native::objgw::{answers, bounds::Pager};

const PREFIX: &str = "pl-run/";
const PAGE: usize = 1000;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let body = String::from_utf8_lossy(rest);
    let keys = match which % 5 {
        0 => match answers::s3_listing(&body, "the gateway's listing of bucket `b`") {
            Ok(page) => {
                let mut pager = Pager::new("b", PREFIX, PAGE);
                if pager.check(&page.keys, page.next.as_deref()).is_ok() {
                    assert!(page.keys.len() <= PAGE);
                    assert!(page.keys.iter().all(|k| k.starts_with(PREFIX)));
                }
                page.keys
            }
            Err(e) => {
                assert!(!e.to_string().chars().any(char::is_control), "{e}");
                return;
            }
        },
        1 => vec![answers::s3_error_code(&body)],
        2 => answers::s3_upload_id(&body).ok().flatten().into_iter().collect(),
        3 => answers::s3_complete_error(&body).ok().flatten().into_iter().collect(),
        _ => match answers::swift_listing(&body) {
            Ok(names) => {
                let mut pager = Pager::new("c", PREFIX, PAGE);
                if pager.check(&names, None).is_ok() {
                    assert!(names.iter().all(|k| k.starts_with(PREFIX)));
                }
                names
            }
            Err(_) => return,
        },
    };
    // Nothing read is longer than the answer it came from.
    assert!(keys.iter().all(|k| k.len() <= body.len()));
});
