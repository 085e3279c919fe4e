//! Run folders into PostgreSQL (`pipeline publish`) and back
//! (`pipeline history --db`). A folder stays the source of truth: the
//! database holds a copy of each run's results.json (byte for byte, and as
//! JSONB) plus tables a dashboard can query (runs, stage instances,
//! metrics, series, the comparison gate's regressions).
//!
//! tokio-postgres is async; this crate hides a current-thread runtime and
//! offers a blocking API, as the rest of the CLI is synchronous.

mod error;
mod migrate;
mod write;

use std::path::{Path, PathBuf};

pub use error::{PublishError, redact};
pub use migrate::{MIGRATIONS, known_version};
use pipeline_engine::history::{RunEntry, entry};
use pipeline_engine::results::RunResults;

/// What `publish` did with one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Published,
    /// The same run, with the same content, was there: nothing changed.
    AlreadyPublished,
}

/// A connection to the history database, its schema brought up to date.
pub struct Db {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
    url: String,
}

impl Db {
    /// Connects and applies the migrations this binary has and the database
    /// lacks; refuses a database at a newer version.
    pub fn connect(url: &str) -> Result<Db, PublishError> {
        let shown = redact(url);
        let config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| PublishError::BadUrl {
                    url: shown.clone(),
                    message: e.to_string(),
                })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(PublishError::Runtime)?;
        let mut client = rt.block_on(async {
            let (client, connection) = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                config.connect(tokio_postgres::NoTls),
            )
            .await
            .map_err(|_| PublishError::Connect {
                url: shown.clone(),
                message: "timed out after 10 s".into(),
            })?
            .map_err(|e| PublishError::Connect {
                url: shown.clone(),
                message: describe(&e),
            })?;
            // The connection task runs while the runtime is driven by block_on.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, PublishError>(client)
        })?;
        rt.block_on(migrate::apply(&mut client, &shown))?;
        Ok(Db {
            rt,
            client,
            url: shown,
        })
    }

    /// Publishes the run in `dir` in one transaction.
    pub fn publish(&mut self, dir: &Path) -> Result<Outcome, PublishError> {
        let file = dir.join(pipeline_engine::results::RESULTS_FILE);
        let text = std::fs::read_to_string(&file)
            .map_err(|e| PublishError::Run(format!("{}: {e}", file.display())))?;
        let results =
            RunResults::parse(&text, &file).map_err(|e| PublishError::Run(e.to_string()))?;
        let folder = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_path_buf())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| results.run_id.clone());
        let series = write::series_files(dir, &results)?;
        let url = self.url.clone();
        self.rt.block_on(write::publish(
            &mut self.client,
            &url,
            &folder,
            &text,
            &results,
            &series,
        ))
    }

    /// Every published run, as `history` reads a runs folder: named by the
    /// folder it came from, parsed from its results.json text.
    pub fn entries(&self) -> Result<Vec<RunEntry>, PublishError> {
        let rows = self
            .rt
            .block_on(
                self.client
                    .query("SELECT folder, results_text FROM runs", &[]),
            )
            .map_err(|e| query_error(&self.url, &e))?;
        let mut entries: Vec<RunEntry> = rows
            .iter()
            .map(|row| {
                let folder: String = row.get(0);
                let text: String = row.get(1);
                let path = PathBuf::from(&folder);
                let run = RunResults::parse(&text, &path).map_err(|e| e.to_string());
                entry(path, run)
            })
            .collect();
        pipeline_engine::history::sort_entries(&mut entries);
        Ok(entries)
    }
}

/// The server's own message when it sent one (wrong password, missing
/// database), else the client's.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(inner) = src {
                s.push_str(&format!(": {inner}"));
                src = inner.source();
            }
            s
        }
    }
}

pub(crate) fn query_error(url: &str, e: &tokio_postgres::Error) -> PublishError {
    PublishError::Query {
        url: url.to_string(),
        message: describe(e),
    }
}
