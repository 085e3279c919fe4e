//! `oci://HOST[:PORT]/NAMESPACE/NAME:TAG` and `…@sha256:HEX`: a plugin in an
//! OCI registry, as a suite's `uses:` names it.
//!
//! Stricter than `docker pull`: the registry host is always written (no
//! implicit docker.io), and a tag or a digest is required (no implicit
//! `latest`), so a suite says exactly what it runs.

use std::fmt;

pub const SCHEME: &str = "oci://";

/// Whether `uses` is meant as a registry reference (and must parse as one).
pub fn is_oci(uses: &str) -> bool {
    uses.starts_with(SCHEME)
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OciReference {
    /// `host` or `host:port`.
    pub registry: String,
    /// `namespace/name` (one or more path components).
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:` and 64 lower-case hex digits: the manifest's digest.
    pub digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid registry reference `{text}`: {problem}")]
pub struct ReferenceError {
    pub text: String,
    pub problem: String,
    pub hint: &'static str,
}

impl OciReference {
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        let fail = |problem: String, hint: &'static str| ReferenceError {
            text: text.chars().take(300).collect(),
            problem,
            hint,
        };
        const SHAPE: &str = "write oci://HOST[:PORT]/NAMESPACE/NAME:TAG or oci://HOST[:PORT]/NAMESPACE/NAME@sha256:DIGEST";
        let Some(rest) = text.strip_prefix(SCHEME) else {
            return Err(fail("it does not start with `oci://`".into(), SHAPE));
        };
        if text.len() > 512 {
            return Err(fail(
                format!("it is {} bytes long; at most 512", text.len()),
                SHAPE,
            ));
        }
        if let Some(c) = rest
            .chars()
            .find(|c| c.is_control() || c.is_whitespace() || !c.is_ascii())
        {
            return Err(fail(
                format!("it contains {c:?}; references are printable ASCII"),
                SHAPE,
            ));
        }
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(fail(
                "it names no repository after the registry".into(),
                SHAPE,
            ));
        };
        check_registry(registry).map_err(|p| fail(p, SHAPE))?;
        let (name_tag, digest) = match path.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (path, None),
        };
        if let Some(d) = digest
            && !is_digest(d)
        {
            return Err(fail(
                format!("the digest `{d}` is not `sha256:` and 64 lower-case hex digits"),
                "copy the digest `pipeline plugins push` or `pipeline lock` printed",
            ));
        }
        let (repository, tag) = match name_tag.rsplit_once(':') {
            Some((r, t)) => (r, Some(t)),
            None => (name_tag, None),
        };
        if let Some(problem) = check_repository(repository) {
            return Err(fail(problem, SHAPE));
        }
        if let Some(t) = tag
            && !is_tag(t)
        {
            return Err(fail(
                format!("the tag `{t}` is not a valid tag"),
                "a tag is up to 128 letters, digits, `_`, `.` and `-`, and does not start with `.` or `-`",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(fail(
                "it has neither a tag nor a digest".into(),
                "add a tag (`:1.0`) or a digest (`@sha256:…`): there is no implicit `latest`",
            ));
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
        })
    }

    /// The registry's host name or address, without the port.
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// The same plugin pinned to a manifest digest (the tag kept for people).
    pub fn pinned(&self, digest: &str) -> Self {
        OciReference {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// The reference without the scheme, as registries and `skopeo` write it.
    pub fn without_scheme(&self) -> String {
        let mut s = format!("{}/{}", self.registry, self.repository);
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.without_scheme())
    }
}

pub(crate) fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// `sha256:` and 64 lower-case hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn check_registry(registry: &str) -> Result<(), String> {
    if registry.is_empty() {
        return Err("it names no registry host".into());
    }
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err(format!("the registry `{registry}` has an unclosed `[`"));
        };
        (h, after.strip_prefix(':'))
    } else {
        match registry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (registry, None),
        }
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':')
        && !host.starts_with(['-', '.']);
    if !host_ok {
        return Err(format!(
            "the registry host `{host}` is not a host name or address"
        ));
    }
    if let Some(p) = port
        && !p.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(format!("the registry port `{p}` is not a port (1-65535)"));
    }
    Ok(())
}

/// The OCI distribution spec's repository name: lower-case components
/// separated by `/`, each `[a-z0-9]+` joined by `.`, `_`, `__` or dashes.
fn check_repository(repository: &str) -> Option<String> {
    if repository.is_empty() {
        return Some("it names no repository".into());
    }
    if repository.len() > 255 {
        return Some("the repository name is longer than 255 characters".into());
    }
    for component in repository.split('/') {
        let ok = !component.is_empty()
            && component
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && component
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && component
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && !component.contains("..")
            && !component.contains("._")
            && !component.contains("_.")
            && !component.contains("___");
        if !ok {
            return Some(format!(
                "the repository component `{component}` is not valid: use lower-case letters and digits, joined by `.`, `_` or `-`"
            ));
        }
    }
    None
}

fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_digests_parse_and_print_back() {
        let r = OciReference::parse("oci://127.0.0.1:5000/team/testkit:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.host(), "127.0.0.1");
        assert_eq!(r.repository, "team/testkit");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team/testkit:1.0");
        let d = format!("sha256:{}", "ab".repeat(32));
        let p = OciReference::parse(&format!("oci://registry.example/a/b@{d}")).unwrap();
        assert_eq!(p.digest.as_deref(), Some(d.as_str()));
        assert_eq!(p.tag, None);
        assert_eq!(
            r.pinned(&d).to_string(),
            format!("oci://127.0.0.1:5000/team/testkit:1.0@{d}")
        );
        assert_eq!(
            OciReference::parse("oci://[::1]:5000/x:1").unwrap().host(),
            "::1"
        );
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        let problem = |t: &str| OciReference::parse(t).unwrap_err().problem;
        assert!(
            problem("oci://127.0.0.1:5000/team/testkit").contains("neither a tag nor a digest")
        );
        assert!(problem("oci://127.0.0.1:99999/a:1").contains("not a port"));
        assert!(problem("oci://127.0.0.1/Team/a:1").contains("`Team`"));
        assert!(problem("oci://127.0.0.1/a:-x").contains("not a valid tag"));
        assert!(problem("oci://127.0.0.1/a@sha256:12").contains("64 lower-case hex"));
        assert!(problem("oci://host").contains("no repository"));
        assert!(problem("oci:///a:1").contains("no registry"));
        assert!(problem("oci://h/a:1\nb").contains("printable"));
        assert!(problem("oci://h/a//b:1").contains("component ``"));
    }
}
