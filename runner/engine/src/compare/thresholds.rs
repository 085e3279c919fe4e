//! How large a change must be before a comparison calls it better or worse:
//! a default, and per-metric overrides (`bandwidth=-5%`, `latency_*=+10%`).

use serde::Serialize;

/// The default: a change under 5% is not reported as better or worse.
pub const DEFAULT_PERCENT: f64 = 5.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    pub default_percent: f64,
    /// `(pattern, percent)`; the first pattern that matches a metric's name
    /// wins. `*` matches any run of characters.
    pub rules: Vec<(String, f64)>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            default_percent: DEFAULT_PERCENT,
            rules: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("`{0}`: expected METRIC=PERCENT, e.g. `bandwidth=-5%` or `latency_*=+10%`")]
    Shape(String),
    #[error("`{0}`: `{1}` is not a percentage (e.g. `5%`, `-5%`, `+10%`)")]
    Percent(String, String),
}

impl Thresholds {
    /// Adds `METRIC=PERCENT` (`default=PERCENT` sets the default). The
    /// sign only documents which way is bad: each metric's direction
    /// already says that, so `-5%` and `5%` mean the same.
    pub fn add(&mut self, spec: &str) -> Result<(), ThresholdError> {
        let (pattern, percent) = spec
            .split_once('=')
            .filter(|(p, _)| !p.trim().is_empty())
            .ok_or_else(|| ThresholdError::Shape(spec.to_string()))?;
        let number = percent.trim().trim_end_matches('%');
        let value: f64 = number
            .trim_start_matches('+')
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| ThresholdError::Percent(spec.to_string(), percent.to_string()))?;
        let value = value.abs();
        if pattern.trim() == "default" {
            self.default_percent = value;
        } else {
            self.rules.push((pattern.trim().to_string(), value));
        }
        Ok(())
    }

    /// Whether a rule (not the default) names metric `name`.
    pub fn names(&self, name: &str) -> bool {
        self.rules.iter().any(|(pattern, _)| glob(pattern, name))
    }

    /// The threshold, in percent, for metric `name`.
    pub fn for_metric(&self, name: &str) -> f64 {
        self.rules
            .iter()
            .find(|(pattern, _)| glob(pattern, name))
            .map_or(self.default_percent, |(_, v)| *v)
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_percentages() {
        let mut t = Thresholds::default();
        t.add("bandwidth=-5%").unwrap();
        t.add("latency_*=+10%").unwrap();
        t.add("*_p99=20").unwrap();
        t.add("default=3%").unwrap();
        assert_eq!(t.for_metric("bandwidth"), 5.0);
        assert_eq!(t.for_metric("latency_avg"), 10.0);
        assert_eq!(t.for_metric("read_clat_p99"), 20.0);
        assert_eq!(t.for_metric("iops"), 3.0);
        assert_eq!(t.for_metric("bandwidth_max"), 3.0);
        assert!(t.add("bandwidth").is_err());
        assert!(t.add("=5%").is_err());
        assert_eq!(
            t.add("x=fast").unwrap_err().to_string(),
            "`x=fast`: `fast` is not a percentage (e.g. `5%`, `-5%`, `+10%`)"
        );
    }

    #[test]
    fn globs() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "acb"));
        assert!(glob("*", ""));
        assert!(glob("*x*", "axb"));
        assert!(!glob("abc", "abcd"));
    }
}
