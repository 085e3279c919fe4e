//! Registry credentials, by the docker/podman conventions:
//!
//! 1. `PIPELINE_REGISTRY_USER` and `PIPELINE_REGISTRY_PASSWORD` (for every registry),
//! 2. `auths` of `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`),
//! 3. `auths` of `$REGISTRY_AUTH_FILE` or `$XDG_RUNTIME_DIR/containers/auth.json` (podman),
//!
//! else anonymous. Credential helpers (`credsStore`, `credHelpers`) are not
//! run: the error on a 401 says so. The password is never printed; only
//! where the credentials came from is.

use std::path::PathBuf;

use base64::Engine as _;

/// What a registry is asked with.
#[derive(Clone)]
pub enum RegistryAuth {
    Anonymous,
    /// User and password (sent as Basic, or to a Bearer token realm).
    Basic(String, String),
}

pub struct Credentials {
    pub auth: RegistryAuth,
    /// Where they came from, for messages: `anonymous`,
    /// `PIPELINE_REGISTRY_USER`, or the config file's path.
    pub source: String,
    /// The config file names a credential helper for this registry, which is not run.
    pub helper_skipped: bool,
}

pub fn for_registry(registry: &str, env: &dyn Fn(&str) -> Option<String>) -> Credentials {
    if let (Some(user), Some(password)) = (
        env("PIPELINE_REGISTRY_USER").filter(|v| !v.is_empty()),
        env("PIPELINE_REGISTRY_PASSWORD"),
    ) {
        return Credentials {
            auth: RegistryAuth::Basic(user, password),
            source: "PIPELINE_REGISTRY_USER/PIPELINE_REGISTRY_PASSWORD".into(),
            helper_skipped: false,
        };
    }
    let mut helper_skipped = false;
    for file in config_files(env) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(auth) = json
            .get("auths")
            .and_then(|a| a.as_object())
            .and_then(|auths| {
                auths
                    .iter()
                    .find(|(key, _)| registry_key(key) == registry)
                    .map(|(_, v)| v)
            })
            .and_then(basic_auth)
        {
            return Credentials {
                auth,
                source: file.display().to_string(),
                helper_skipped: false,
            };
        }
        helper_skipped |= json.get("credsStore").is_some()
            || json
                .get("credHelpers")
                .and_then(|h| h.get(registry))
                .is_some();
    }
    Credentials {
        auth: RegistryAuth::Anonymous,
        source: "anonymous".into(),
        helper_skipped,
    }
}

fn config_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut files = Vec::new();
    if let Some(dir) = env("DOCKER_CONFIG") {
        files.push(PathBuf::from(dir).join("config.json"));
    } else if let Some(home) = env("HOME") {
        files.push(PathBuf::from(home).join(".docker").join("config.json"));
    }
    if let Some(file) = env("REGISTRY_AUTH_FILE") {
        files.push(PathBuf::from(file));
    } else if let Some(dir) = env("XDG_RUNTIME_DIR") {
        files.push(PathBuf::from(dir).join("containers").join("auth.json"));
    }
    files
}

/// `https://host:5000/v1/` -> `host:5000`: docker writes keys in several forms.
fn registry_key(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// `{"auth": base64("user:password")}` or `{"username": …, "password": …}`.
fn basic_auth(entry: &serde_json::Value) -> Option<RegistryAuth> {
    if let Some(encoded) = entry.get("auth").and_then(|a| a.as_str()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (user, password) = text.split_once(':')?;
        return Some(RegistryAuth::Basic(user.to_string(), password.to_string()));
    }
    let user = entry.get("username")?.as_str()?;
    let password = entry.get("password")?.as_str()?;
    Some(RegistryAuth::Basic(user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn docker_config_auths_match_any_key_form() {
        let dir = std::env::temp_dir().join(format!("oci-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // base64("alice:s3cret")
        std::fs::write(
            dir.join("config.json"),
            r#"{"auths":{"https://127.0.0.1:5000/v1/":{"auth":"YWxpY2U6czNjcmV0"}},"credHelpers":{"other:1":"pass"}}"#,
        )
        .unwrap();
        let env = env_with(&[("DOCKER_CONFIG", dir.display().to_string())]);
        let c = for_registry("127.0.0.1:5000", &env);
        assert!(
            matches!(c.auth, RegistryAuth::Basic(ref u, ref p) if u == "alice" && p == "s3cret")
        );
        assert!(c.source.ends_with("config.json"));
        let other = for_registry("other:1", &env);
        assert!(matches!(other.auth, RegistryAuth::Anonymous));
        assert!(other.helper_skipped);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn environment_variables_come_first() {
        let env = env_with(&[
            ("PIPELINE_REGISTRY_USER", "bob".into()),
            ("PIPELINE_REGISTRY_PASSWORD", "pw".into()),
        ]);
        let c = for_registry("127.0.0.1:5000", &env);
        assert!(matches!(c.auth, RegistryAuth::Basic(ref u, _) if u == "bob"));
        assert!(!c.source.contains("pw"));
    }
}
