//! Unit spellings used by the native stages and parsers. Binary prefixes
//! (KiB, MiB) are 2^10, 2^20; decimal (kB, MB) are 10^3, 10^6. rados bench
//! prints "MB/sec" but means 2^20 bytes per second: its figures are `MIB_PER_S`.

pub const BYTES: &str = "B";
pub const BYTES_PER_S: &str = "B/s";
pub const MIB_PER_S: &str = "MiB/s";
pub const BITS_PER_S: &str = "bit/s";
/// Block and RADOS I/O operations per second (rados bench, rbd bench, fio).
pub const IOPS: &str = "IOPS";
/// Object-gateway requests per second (S3, Swift): a request is not an I/O
/// of the block device's kind, so its rate is not called IOPS.
pub const OPS_PER_S: &str = "ops/s";
pub const SECONDS: &str = "s";
pub const MILLISECONDS: &str = "ms";
pub const MICROSECONDS: &str = "us";
pub const NANOSECONDS: &str = "ns";
pub const COUNT: &str = "count";
pub const PERCENT: &str = "%";

/// Nanoseconds in one of a time unit (whole numbers, so that the factors
/// between units are exact).
fn nanoseconds(unit: &str) -> Option<f64> {
    match unit {
        SECONDS => Some(1e9),
        MILLISECONDS => Some(1e6),
        MICROSECONDS => Some(1e3),
        NANOSECONDS => Some(1.0),
        _ => None,
    }
}

/// The factor that turns a value in `from` into one in `to`: 1 for the same
/// unit, a power of ten between the time units; `None` for anything else.
pub fn factor(from: &str, to: &str) -> Option<f64> {
    if from == to {
        return Some(1.0);
    }
    Some(nanoseconds(from)? / nanoseconds(to)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_factors() {
        assert_eq!(factor(NANOSECONDS, MICROSECONDS), Some(1e-3));
        assert_eq!(factor(SECONDS, MILLISECONDS), Some(1e3));
        assert_eq!(factor("B/s", "B/s"), Some(1.0));
        assert_eq!(factor(NANOSECONDS, BYTES), None);
    }
}
