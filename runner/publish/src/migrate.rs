//! Versioned schema: numbered SQL files applied in order, each in its own
//! transaction, recorded in `schema_migrations`.

use crate::{PublishError, query_error};

/// (version, name, SQL), in order. Append only: a published database has
/// run the earlier ones.
pub const MIGRATIONS: &[(i32, &str, &str)] =
    &[(1, "initial", include_str!("../migrations/0001_initial.sql"))];

pub fn known_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())";

pub async fn current(client: &tokio_postgres::Client, url: &str) -> Result<i32, PublishError> {
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .map_err(|e| query_error(url, &e))?;
    Ok(row.get(0))
}

pub async fn apply(client: &mut tokio_postgres::Client, url: &str) -> Result<(), PublishError> {
    client
        .batch_execute(BOOKKEEPING)
        .await
        .map_err(|e| query_error(url, &e))?;
    for &(version, name, sql) in MIGRATIONS {
        let tx = client
            .transaction()
            .await
            .map_err(|e| query_error(url, &e))?;
        // Two publishers migrating at once: the lock makes the second wait
        // and then see the first one's row.
        tx.batch_execute("LOCK TABLE schema_migrations IN EXCLUSIVE MODE")
            .await
            .map_err(|e| query_error(url, &e))?;
        let found: i32 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) FROM schema_migrations",
                &[],
            )
            .await
            .map_err(|e| query_error(url, &e))?
            .get(0);
        if found > known_version() {
            return Err(PublishError::NewerSchema {
                url: url.to_string(),
                found,
                known: known_version(),
            });
        }
        if found >= version {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .map_err(|e| query_error(url, &e))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&version, &name],
        )
        .await
        .map_err(|e| query_error(url, &e))?;
        tx.commit().await.map_err(|e| query_error(url, &e))?;
    }
    // No migration to run (or none known): still refuse a newer database.
    let found = current(client, url).await?;
    if found > known_version() {
        return Err(PublishError::NewerSchema {
            url: url.to_string(),
            found,
            known: known_version(),
        });
    }
    Ok(())
}
