//! The buckets a run works in: created (each in the run's ledger before it
//! exists), or the suite's pre-existing one; and afterwards, whatever
//! happened, what the run wrote removed.

use std::time::{Duration, Instant};

use pipeline_stage_api::stage::StageError;

use super::super::client::OpError;
use super::super::store::Store;
use super::super::{S3_BUCKET, S3_OBJECTS, bucket_name};
use super::config::LoadConfig;
use super::engine::Target;
use super::host::LoadHost;

pub(super) async fn set_up(
    config: &LoadConfig,
    ctx: &mut dyn LoadHost,
    t: &mut Target,
) -> Result<(), StageError> {
    // The first request tells whether the gateway takes the credentials:
    // one clear message instead of a wall of 401s or 403s.
    t.client
        .connect()
        .await
        .map_err(|e| t.client.first_request_error(&e))?;
    if let Some(bucket) = &config.bucket {
        // Recorded first: a run stopped halfway still has keys to remove.
        ctx.record_created(S3_OBJECTS, &format!("{bucket}/{}", t.prefix));
        t.client
            .list_page(bucket, &t.prefix)
            .await
            .map_err(|e| t.client.first_request_error(&e))?;
        t.buckets.push(bucket.clone());
        return Ok(());
    }
    for index in 0..config.buckets {
        let name = bucket_name(ctx.run_id(), ctx.load_name(), index);
        // In the ledger first: a process killed while the request is out
        // (a worker on a lost host) still has its bucket removed by cleanup.
        ctx.record_created(S3_BUCKET, &name);
        match t.client.create_bucket(&name).await {
            Ok(()) => {}
            Err(e) => {
                ctx.mark_removed(S3_BUCKET, &name);
                return Err(if index == 0 {
                    t.client.first_request_error(&e)
                } else {
                    StageError::failed(format!("creating bucket `{name}` failed: {e}"))
                });
            }
        }
        t.buckets.push(name);
    }
    Ok(())
}

/// Cleanup's time when the stage's deadline leaves it less: the load ran
/// into its timeout, and what it wrote is still removed, within this.
pub(super) const CLEANUP_AT_LEAST: Duration = Duration::from_secs(30);
/// Cleanup's time for a stage without a `timeout:`.
pub(super) const CLEANUP_WITHOUT_TIMEOUT: Duration = Duration::from_secs(600);

/// When cleanup must have ended: the stage's `deadline` (its `timeout:`
/// bounds its cleanup too), unless less than [`CLEANUP_AT_LEAST`] of it is
/// left; without one, [`CLEANUP_WITHOUT_TIMEOUT`] from `now`.
pub(super) fn cleanup_deadline(deadline: Option<Instant>, now: Instant) -> Instant {
    match deadline {
        Some(d) => d.max(now + CLEANUP_AT_LEAST),
        None => now + CLEANUP_WITHOUT_TIMEOUT,
    }
}

/// Deletes every key under `prefix` in `bucket` (a missing key is fine),
/// page by page: each page's keys are deleted before the next page is
/// asked for, so what is held is one page whatever the bucket holds.
/// Whether it emptied it.
pub(super) async fn empty_bucket(
    client: &Store,
    bucket: &str,
    prefix: &str,
    config: &LoadConfig,
    problems: &mut Vec<String>,
) -> bool {
    let mut listing = client.listing(bucket, prefix);
    let width = (config.concurrency as usize).max(1);
    let mut emptied = true;
    loop {
        let keys = match client.next_page(&mut listing).await {
            Ok(Some(keys)) => keys,
            Ok(None) => return emptied,
            Err(e) => {
                problems.push(format!("listing bucket `{bucket}` to empty it failed: {e}"));
                return false;
            }
        };
        for chunk in keys.chunks(width) {
            let deletes = chunk.iter().map(|key| client.delete_object(bucket, key));
            for (key, result) in chunk.iter().zip(join_all(deletes).await) {
                if let Err(e) = result
                    && !matches!(e, OpError::Status { status: 404, .. })
                {
                    emptied = false;
                    problems.push(format!("deleting `{bucket}/{key}` failed: {e}"));
                }
            }
        }
    }
}

/// Removes what this stage wrote: every key under its prefix, then the
/// buckets it created. Runs after success, failure and cancellation alike,
/// until `by` ([`cleanup_deadline`]); each request is bounded by the
/// request timeout. What it could not remove stays in the run's ledger,
/// where `pipeline cleanup` finds it.
pub(super) async fn remove_written(
    stage: &str,
    config: &LoadConfig,
    target: &Target,
    ctx: &mut dyn LoadHost,
    by: Instant,
) -> Result<(), StageError> {
    let mut problems = Vec::new();
    for (i, bucket) in target.buckets.iter().enumerate() {
        let removal = remove_bucket(config, target, ctx, bucket, &mut problems);
        if tokio::time::timeout_at(by.into(), removal).await.is_err() {
            let left: Vec<String> = target.buckets[i..]
                .iter()
                .map(|b| format!("`{b}`"))
                .collect();
            problems.push(format!(
                "its cleanup ran out of time (the stage's timeout, or {} s past the load's end) with bucket(s) {} not yet removed: they stay in the run's ledger, and `pipeline cleanup` removes them",
                CLEANUP_AT_LEAST.as_secs(),
                left.join(", ")
            ));
            break;
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StageError::failed(format!(
            "{stage} could not remove what it wrote: {}",
            problems.join("; ")
        )))
    }
}

/// Empties `bucket` and deletes it when this run created it; in the
/// ledger as removed only once it is.
async fn remove_bucket(
    config: &LoadConfig,
    target: &Target,
    ctx: &mut dyn LoadHost,
    bucket: &str,
    problems: &mut Vec<String>,
) {
    let client = &target.client;
    // A PUT aborted on our side after it was sent can still land on the
    // gateway a moment later (after Ctrl-C or a deadline): a bucket that
    // is "not empty" once emptied is listed and emptied again, a bounded
    // number of times.
    let mut attempt = 0;
    loop {
        attempt += 1;
        let emptied = empty_bucket(client, bucket, &target.prefix, config, problems).await;
        if config.bucket.is_some() {
            if emptied {
                ctx.mark_removed(S3_OBJECTS, &format!("{bucket}/{}", target.prefix));
            }
            return;
        }
        if !emptied {
            // Left as it is, in the ledger: a delete would only fail.
            return;
        }
        match client.delete_bucket(bucket).await {
            Ok(()) => {
                ctx.mark_removed(S3_BUCKET, bucket);
                return;
            }
            Err(OpError::Status { status: 409, .. }) if attempt < 10 => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => {
                problems.push(format!("deleting bucket `{bucket}` failed: {e}"));
                return;
            }
        }
    }
}

/// Awaits futures concurrently on the current task (no extra crate).
pub(super) async fn join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in pinned.iter_mut().zip(results.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}
