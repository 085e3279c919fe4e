//! `pipeline publish RUN_DIR... --to URL` and the database side of
//! `pipeline history --db URL` (pipeline_publish).

use std::path::PathBuf;

use pipeline_publish::{Db, Outcome, PublishError};

use crate::commands::CliResult;
use crate::error::CliError;

/// A bad connection string or a run that is not one is invalid input (2);
/// an unreachable server, a refused login or a conflicting run is a
/// failure (1).
fn cli_error(e: PublishError) -> CliError {
    match e {
        PublishError::BadUrl { .. } | PublishError::Run(_) => CliError::invalid(e.to_string()),
        _ => CliError::failed(e.to_string()),
    }
}

pub fn publish(run_dirs: &[PathBuf], url: &str) -> CliResult {
    let mut db = Db::connect(url).map_err(cli_error)?;
    let mut failed = Vec::new();
    // Each run is its own transaction: one bad folder does not keep the
    // others out, and is named at the end.
    for dir in run_dirs {
        match db.publish(dir) {
            Ok(Outcome::Published) => println!("published {}", dir.display()),
            Ok(Outcome::AlreadyPublished) => println!("already published {}", dir.display()),
            Err(e) => {
                eprintln!("error: {}: {e}", dir.display());
                failed.push(dir.display().to_string());
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::failed(format!(
            "not published: {}",
            failed.join(", ")
        )))
    }
}

pub fn entries(url: &str) -> Result<Vec<pipeline_engine::history::RunEntry>, CliError> {
    let db = Db::connect(url).map_err(cli_error)?;
    db.entries().map_err(cli_error)
}
