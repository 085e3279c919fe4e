//! The buckets a run works in: created (each in the run's ledger before it
//! exists), or the suite's pre-existing one; and afterwards, whatever
//! happened, what the run wrote removed.

use std::time::Duration;

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
            .list_keys(bucket, &t.prefix)
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

/// Deletes every key under `prefix` in `bucket` (a missing key is fine).
pub(super) async fn empty_bucket(
    client: &Store,
    bucket: &str,
    prefix: &str,
    config: &LoadConfig,
    problems: &mut Vec<String>,
) {
    let keys = match client.list_keys(bucket, prefix).await {
        Ok(keys) => keys,
        Err(e) => {
            problems.push(format!("listing bucket `{bucket}` to empty it failed: {e}"));
            return;
        }
    };
    let width = (config.concurrency as usize).max(1);
    for chunk in keys.chunks(width) {
        let deletes = chunk.iter().map(|key| client.delete_object(bucket, key));
        for (key, result) in chunk.iter().zip(join_all(deletes).await) {
            if let Err(e) = result
                && !matches!(e, OpError::Status { status: 404, .. })
            {
                problems.push(format!("deleting `{bucket}/{key}` failed: {e}"));
            }
        }
    }
}

/// Removes what this stage wrote: every key under its prefix, then the
/// buckets it created. Runs after success, failure and cancellation alike;
/// each request is bounded by the request timeout.
pub(super) async fn remove_written(
    stage: &str,
    config: &LoadConfig,
    target: &Target,
    ctx: &mut dyn LoadHost,
) -> Result<(), StageError> {
    let client = &target.client;
    let mut problems = Vec::new();
    for bucket in &target.buckets {
        // A PUT aborted on our side after it was sent can still land on the
        // gateway a moment later (after Ctrl-C or a deadline): a bucket that
        // is "not empty" once emptied is listed and emptied again, a bounded
        // number of times.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let before = problems.len();
            empty_bucket(client, bucket, &target.prefix, config, &mut problems).await;
            if config.bucket.is_some() {
                if problems.len() == before {
                    ctx.mark_removed(S3_OBJECTS, &format!("{bucket}/{}", target.prefix));
                }
                break;
            }
            match client.delete_bucket(bucket).await {
                Ok(()) => {
                    ctx.mark_removed(S3_BUCKET, bucket);
                    break;
                }
                Err(OpError::Status { status: 409, .. }) if attempt < 10 => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => {
                    problems.push(format!("deleting bucket `{bucket}` failed: {e}"));
                    break;
                }
            }
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
