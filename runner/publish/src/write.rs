//! One run into the tables, in one transaction: all of it or nothing.

use std::path::Path;

use pipeline_engine::compare::REPETITION_LABEL;
use pipeline_engine::report::charts::SERIES_ARTIFACT;
use pipeline_engine::results::RunResults;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_postgres::types::ToSql;

use crate::{Outcome, PublishError, query_error};

/// (instance id, series name, path in the run folder, points) of each
/// series a stage saved (its `series: NAME` artifacts).
pub type SeriesFile = (String, String, String, Value);

/// The run's series files, as they are in the folder. Only files inside the
/// run folder are read (a results.json could name any path); a series whose
/// file is gone is left out, as the report notes and skips it.
pub fn series_files(dir: &Path, results: &RunResults) -> Result<Vec<SeriesFile>, PublishError> {
    let root = dir
        .canonicalize()
        .map_err(|e| PublishError::Run(format!("{}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for stage in &results.stages {
        for artifact in &stage.artifacts {
            let Some(name) = artifact.name.strip_prefix(SERIES_ARTIFACT) else {
                continue;
            };
            let Ok(path) = root.join(&artifact.path).canonicalize() else {
                continue;
            };
            if !path.starts_with(&root) {
                return Err(PublishError::Run(format!(
                    "{}: series {name:?} points outside the run folder ({})",
                    dir.display(),
                    artifact.path
                )));
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| PublishError::Run(format!("{}: {e}", path.display())))?;
            let points: Value = serde_json::from_str(&text)
                .map_err(|e| PublishError::Run(format!("{}: {e}", path.display())))?;
            out.push((
                stage.id.clone(),
                name.to_string(),
                artifact.path.clone(),
                points,
            ));
        }
    }
    Ok(out)
}

fn hex_sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub async fn publish(
    client: &mut tokio_postgres::Client,
    url: &str,
    folder: &str,
    text: &str,
    r: &RunResults,
    series: &[SeriesFile],
) -> Result<Outcome, PublishError> {
    let q = |e: tokio_postgres::Error| query_error(url, &e);
    let hash = hex_sha256(text);
    let tx = client.transaction().await.map_err(q)?;
    // Serializes publishers of the same run id (two CI jobs at once).
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&r.run_id])
        .await
        .map_err(q)?;
    if let Some(row) = tx
        .query_opt(
            "SELECT content_sha256 FROM runs WHERE run_id = $1",
            &[&r.run_id],
        )
        .await
        .map_err(q)?
    {
        let published: String = row.get(0);
        return if published == hash {
            Ok(Outcome::AlreadyPublished)
        } else {
            Err(PublishError::Conflict {
                run_id: r.run_id.clone(),
                published,
                folder: hash,
            })
        };
    }
    let document: Value =
        serde_json::from_str(text).map_err(|e| PublishError::Run(e.to_string()))?;
    let git_commit = r.pipeline.git.as_ref().map(|g| g.commit.clone());
    let git_dirty = r.pipeline.git.as_ref().map(|g| g.dirty);
    tx.execute(
        "INSERT INTO runs (run_id, folder, suite, started_at, ended_at, status, pipeline_file,
            git_commit, git_dirty, runner_version, host, content_sha256, results_text, results)
         VALUES ($1, $2, $3, $4::text::timestamptz, $5::text::timestamptz, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        &[
            &r.run_id as &(dyn ToSql + Sync),
            &folder,
            &r.pipeline.name,
            &r.started_at,
            &r.ended_at,
            &r.status.as_str(),
            &r.pipeline.file,
            &git_commit,
            &git_dirty,
            &r.runner.version,
            &r.host.hostname,
            &hash,
            &text,
            &document,
        ],
    )
    .await
    .map_err(q)?;
    for s in &r.stages {
        let not_clean = s.cluster.as_ref().is_some_and(|c| c.unhealthy.is_some());
        let limited = s.hosts.iter().any(|h| !h.limited_by.is_empty());
        tx.execute(
            "INSERT INTO stage_instances (run_id, instance_id, stage, plugin, status, started_at,
                duration_s, cluster_not_clean, host_limited)
             VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz, $7, $8, $9)",
            &[
                &r.run_id,
                &s.id,
                &s.stage,
                &s.plugin,
                &s.status.as_str(),
                &s.started_at,
                &s.duration_s,
                &not_clean,
                &limited,
            ],
        )
        .await
        .map_err(q)?;
        for m in &s.metrics {
            let mut labels = m.labels.clone();
            // A repetition index that is not a number stays a label.
            let repetition = match labels.get(REPETITION_LABEL).map(|v| v.parse::<i32>()) {
                Some(Ok(k)) => {
                    labels.remove(REPETITION_LABEL);
                    Some(k)
                }
                _ => None,
            };
            let labels =
                serde_json::to_value(&labels).map_err(|e| PublishError::Run(e.to_string()))?;
            let direction = serde_json::to_value(m.direction)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            // NaN and infinities are stored as PostgreSQL has them; history
            // skips them, as over folders.
            tx.execute(
                "INSERT INTO metrics (run_id, instance_id, stage, metric, value, unit, direction,
                    labels, repetition, headline)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &r.run_id,
                    &s.id,
                    &s.stage,
                    &m.name,
                    &m.value,
                    &m.unit,
                    &direction,
                    &labels,
                    &repetition,
                    &m.headline,
                ],
            )
            .await
            .map_err(q)?;
        }
    }
    for (instance, name, path, points) in series {
        tx.execute(
            "INSERT INTO series (run_id, instance_id, name, path, points) VALUES ($1, $2, $3, $4, $5)",
            &[&r.run_id, instance, name, path, points],
        )
        .await
        .map_err(q)?;
    }
    if let Some(c) = &r.comparison {
        for g in &c.regressions {
            let labels =
                serde_json::to_value(&g.labels).map_err(|e| PublishError::Run(e.to_string()))?;
            tx.execute(
                "INSERT INTO regressions (run_id, baseline, stage, metric, labels, unit,
                    baseline_value, value, change_percent, threshold_percent)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &r.run_id,
                    &c.baseline,
                    &g.stage,
                    &g.metric,
                    &labels,
                    &g.unit,
                    &g.baseline,
                    &g.value,
                    &g.change_percent,
                    &g.threshold_percent,
                ],
            )
            .await
            .map_err(q)?;
        }
    }
    tx.commit().await.map_err(q)?;
    Ok(Outcome::Published)
}
