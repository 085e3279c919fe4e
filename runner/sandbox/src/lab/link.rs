//! The shape of every lab link: a rate (`tc tbf`) and a one-way delay (`tc netem`),
//! written the way `tc` writes them: `10gbit,0.1ms`, `1gbit,0.5ms`, `200mbit`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// Rate and delay of each host's link, applied in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkShape {
    /// Bits per second.
    pub rate_bits: u64,
    /// One-way delay added on each host's egress; `None`: none.
    pub delay: Option<Duration>,
    /// The delay is the default one, not asked for: a kernel without netem drops it with a
    /// note instead of refusing the lab.
    #[serde(default)]
    pub delay_is_default: bool,
}

impl Default for LinkShape {
    /// 10 Gbit/s and 0.1 ms: a data-centre link, not loopback's 12-17 Gbit/s and 0.01 ms.
    fn default() -> Self {
        LinkShape {
            rate_bits: 10_000_000_000,
            delay: Some(Duration::from_micros(100)),
            delay_is_default: true,
        }
    }
}

const RATE_UNITS: [(&str, u64); 5] = [
    ("tbit", 1_000_000_000_000),
    ("gbit", 1_000_000_000),
    ("mbit", 1_000_000),
    ("kbit", 1_000),
    ("bit", 1),
];
/// Slowest link accepted: below this an SSH login takes longer than its timeout.
pub const MIN_RATE_BITS: u64 = 1_000_000;
/// Longest delay accepted.
pub const MAX_DELAY: Duration = Duration::from_secs(1);

impl LinkShape {
    /// Parses `RATE[,DELAY]`: rate in bit, kbit, mbit, gbit or tbit; delay in us, ms or s.
    pub fn parse(text: &str) -> Result<LinkShape, SandboxError> {
        let invalid = |why: String| SandboxError::InvalidOption {
            reason: format!(
                "--link {text:?}: {why} (expected RATE[,DELAY], e.g. 1gbit,0.5ms or 200mbit)"
            ),
        };
        let (rate, delay) = match text.split_once(',') {
            Some((r, d)) => (r.trim(), Some(d.trim())),
            None => (text.trim(), None),
        };
        let rate_bits = parse_rate(rate).ok_or_else(|| invalid(format!("bad rate {rate:?}")))?;
        if rate_bits < MIN_RATE_BITS {
            return Err(invalid(format!("rate below {MIN_RATE_BITS} bit/s")));
        }
        let delay = match delay {
            None => None,
            Some(d) => {
                let d = parse_delay(d).ok_or_else(|| invalid(format!("bad delay {d:?}")))?;
                if d > MAX_DELAY {
                    return Err(invalid(format!("delay above {MAX_DELAY:?}")));
                }
                (!d.is_zero()).then_some(d)
            }
        };
        Ok(LinkShape {
            rate_bits,
            delay,
            delay_is_default: false,
        })
    }

    /// `tc`'s spelling of the rate: `10gbit`.
    pub fn tc_rate(&self) -> String {
        format!("{}bit", self.rate_bits)
    }

    /// `tc`'s spelling of the delay: `100us`.
    pub fn tc_delay(&self) -> Option<String> {
        self.delay.map(|d| format!("{}us", d.as_micros()))
    }

    /// The token bucket's burst: 1 ms at the rate, at least 64 KiB (a 10 Gbit/s link needs
    /// ~1.25 MB per ms; a smaller bucket caps throughput below the rate at HZ=250).
    pub fn tbf_burst_bytes(&self) -> u64 {
        (self.rate_bits / 8 / 1000).max(64 << 10)
    }
}

fn parse_rate(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let (unit, scale) = RATE_UNITS.iter().find(|(u, _)| lower.ends_with(u))?;
    let number: f64 = lower[..lower.len() - unit.len()].parse().ok()?;
    (number.is_finite() && number > 0.0).then_some((number * *scale as f64) as u64)
}

fn parse_delay(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    let (number, scale) = if let Some(n) = lower.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = lower.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = lower.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    let number: f64 = number.parse().ok()?;
    (number.is_finite() && number >= 0.0).then(|| Duration::from_secs_f64(number * scale))
}

impl fmt::Display for LinkShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, unit) = RATE_UNITS
            .iter()
            .find(|(_, s)| self.rate_bits >= *s && self.rate_bits.is_multiple_of(*s))
            .map(|(u, s)| (self.rate_bits / s, *u))
            .unwrap_or((self.rate_bits, "bit"));
        write!(f, "{value}{unit}")?;
        if let Some(d) = self.delay {
            write!(f, ", {} ms delay", d.as_secs_f64() * 1e3)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_spellings() {
        let l = LinkShape::parse("1gbit,0.5ms").unwrap();
        assert_eq!(l.rate_bits, 1_000_000_000);
        assert_eq!(l.delay, Some(Duration::from_micros(500)));
        assert_eq!(l.tc_rate(), "1000000000bit");
        assert_eq!(l.tc_delay().as_deref(), Some("500us"));
        assert!(!l.delay_is_default);
        let l = LinkShape::parse("200Mbit").unwrap();
        assert_eq!((l.rate_bits, l.delay), (200_000_000, None));
        assert_eq!(l.to_string(), "200mbit");
        assert_eq!(
            LinkShape::parse("2.5gbit, 100us").unwrap().rate_bits,
            2_500_000_000
        );
        assert_eq!(LinkShape::parse("1gbit,0ms").unwrap().delay, None);
        assert_eq!(LinkShape::default().to_string(), "10gbit, 0.1 ms delay");
    }

    #[test]
    fn refuses_nonsense() {
        for bad in [
            "", "fast", "10", "10gb", "-1gbit", "1kbit", "1gbit,", "1gbit,5", "1gbit,2s", "nangbit",
        ] {
            let err = LinkShape::parse(bad).unwrap_err();
            assert!(err.to_string().contains("--link"), "{bad}: {err}");
        }
    }

    #[test]
    fn burst_is_a_millisecond_at_rate_or_64k() {
        assert_eq!(LinkShape::default().tbf_burst_bytes(), 1_250_000);
        assert_eq!(
            LinkShape::parse("100mbit").unwrap().tbf_burst_bytes(),
            64 << 10
        );
    }
}
