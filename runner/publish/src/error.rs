//! Why publishing or reading the history database failed. Connection
//! strings in messages are always redacted (no password).

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{url}: not a PostgreSQL connection string: {message}")]
    BadUrl { url: String, message: String },
    #[error("{url}: cannot connect: {message}")]
    Connect { url: String, message: String },
    #[error("{url}: {message}")]
    Query { url: String, message: String },
    #[error(
        "{url}: the database's schema is at version {found}, newer than this pipeline knows ({known}): use a newer pipeline"
    )]
    NewerSchema { url: String, found: i32, known: i32 },
    #[error(
        "run {run_id} is already published with different content (sha256 {published} in the database, {folder} in the folder): the run folder is the source of truth; remove the run from the database to publish it again"
    )]
    Conflict {
        run_id: String,
        published: String,
        folder: String,
    },
    #[error("{0}")]
    Run(String),
    #[error("starting the database client: {0}")]
    Runtime(std::io::Error),
}

/// `url` without its password: `postgres://user:***@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // key=value form: drop any password=... word.
        return url
            .split_whitespace()
            .map(|w| {
                if w.starts_with("password=") {
                    "password=***"
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(parts) => parts,
        None => return strip_query_password(url),
    };
    let user = auth.split_once(':').map_or(auth, |(u, _)| u);
    let masked = if auth.contains(':') {
        format!("{user}:***")
    } else {
        user.to_string()
    };
    strip_query_password(&format!("{scheme}://{masked}@{host}"))
}

fn strip_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let query: Vec<&str> = query
        .split('&')
        .map(|kv| {
            if kv.starts_with("password=") {
                "password=***"
            } else {
                kv
            }
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact("postgres://u:s3cret@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(
            redact("postgres://u@h/db?password=x&a=b"),
            "postgres://u@h/db?password=***&a=b"
        );
        assert_eq!(redact("host=h password=x"), "host=h password=***");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }
}
