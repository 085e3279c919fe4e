//! Unit spellings used by the native stages and parsers. Binary prefixes
//! (KiB, MiB) are 2^10, 2^20; decimal (kB, MB) are 10^3, 10^6. rados bench
//! prints "MB/sec" but means 2^20 bytes per second: its figures are `MIB_PER_S`.

pub const BYTES: &str = "B";
pub const BYTES_PER_S: &str = "B/s";
pub const MIB_PER_S: &str = "MiB/s";
pub const BITS_PER_S: &str = "bit/s";
pub const OPS_PER_S: &str = "IOPS";
pub const SECONDS: &str = "s";
pub const MILLISECONDS: &str = "ms";
pub const MICROSECONDS: &str = "us";
pub const NANOSECONDS: &str = "ns";
pub const COUNT: &str = "count";
pub const PERCENT: &str = "%";
