//! Object gateway load: the S3 and Swift benchmark stages, with their own
//! lean request paths so that the client is not the bottleneck of the
//! gateway it measures. `load` is the engine both stages run; `store` is the
//! one interface to either client. From many client hosts their load runs
//! in remote workers (`pipeline_stage_api::remote_worker`): `worker` is the
//! kind of worker they are, `clients` what the runner adds for them.

pub mod answers;
pub mod bounds;
pub mod client;
pub mod clients;
pub mod load;
pub mod recorder;
pub mod s3_bench;
pub mod store;
pub mod swift_bench;
pub mod swift_client;
pub mod worker;

/// Ledger kind of a bucket this run created (emptied and deleted by its cleanup).
pub const S3_BUCKET: &str = "s3-bucket";
/// Ledger kind of the objects this run wrote into a bucket it did not create:
/// `BUCKET/PREFIX`; only keys under the prefix are removed.
pub const S3_OBJECTS: &str = "s3-objects";

/// A stage setting: the suite's value, else the environment variable (an
/// empty one counts as unset).
pub(crate) fn setting(value: &Option<String>, var: &str) -> Option<String> {
    value
        .clone()
        .or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

/// A setting neither the suite nor the environment gives.
pub(crate) fn missing_setting(
    api: &str,
    what: &str,
    param: &str,
    var: &str,
) -> pipeline_stage_api::stage::StageError {
    pipeline_stage_api::stage::StageError::failed(format!(
        "no {api} {what}: set `{param}:` or {var} (`pipeline sandbox env` exports it for the sandbox gateway)"
    ))
}

/// The gateway's URL must be plain HTTP (no TLS yet); `shape` shows one.
pub(crate) fn plain_http(
    stage: &str,
    what: &str,
    url: &str,
    shape: &str,
) -> Result<(), pipeline_stage_api::stage::StageError> {
    if url.starts_with("http://") {
        return Ok(());
    }
    Err(pipeline_stage_api::stage::StageError::failed(format!(
        "{what} `{url}`: {stage} speaks plain HTTP only ({shape})"
    )))
}

/// A bucket name that carries the run id: lower case, `[a-z0-9-]`, at most
/// 63 characters, the index kept at the end. A name that must be shortened
/// ends in a hash of the whole name before the index: the instance's tail
/// (`s3[workload=put]@client1` vs `@client2`) is what tells two hosts'
/// buckets apart, so cutting it off would give them one bucket.
pub fn bucket_name(run_id: &str, instance: &str, index: u32) -> String {
    let suffix = format!("-{index}");
    let mut stem = String::from("pl-");
    for c in format!("{run_id}-{instance}").chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && stem.ends_with('-')) {
            stem.push(c);
        }
    }
    if stem.len() + suffix.len() > 63 {
        // FNV-1a: stable across builds and hosts (a worker and the runner must agree).
        let hash = stem.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        let tag = format!("-{:08x}", (hash >> 32) as u32 ^ hash as u32);
        stem.truncate(63 - suffix.len() - tag.len());
        let kept = stem.trim_end_matches('-').len();
        stem.truncate(kept);
        stem.push_str(&tag);
    }
    format!("{stem}{suffix}")
}

/// The key prefix of this stage instance's objects in this run.
pub fn key_prefix(run_id: &str, instance: &str) -> String {
    format!("pipeline-{run_id}-{instance}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_valid_and_carry_the_run_id() {
        let b = bucket_name("20261130T221153Z-Full_Baseline", "s3.put", 3);
        assert_eq!(b, "pl-20261130t221153z-full-baseline-s3-put-3");
        let long = bucket_name(&"x".repeat(80), "stage", 12);
        assert_eq!(long.len(), 63);
        assert!(long.ends_with("-12"));
        // Seen in a lab run: two client hosts' buckets, alike up to the cut.
        let run = "20261203T090900Z-51a019-lab-baseline";
        let one = bucket_name(run, "swift[workload=put]@client1", 0);
        let two = bucket_name(run, "swift[workload=put]@client2", 0);
        assert_ne!(one, two);
        for name in [&one, &two] {
            assert!(
                name.len() <= 63
                    && name.starts_with("pl-20261203t090900z-51a019-lab-baseline-swift"),
                "{name}"
            );
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(!name.contains("--"), "{name}");
        }
        assert_eq!(one, bucket_name(run, "swift[workload=put]@client1", 0));
    }
}
