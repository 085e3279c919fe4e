//! The worker protocol, version 1: how the runner drives a load generator
//! on a client host (`pipeline worker`, started over SSH), one JSON object
//! per line each way. Written down in docs/worker-protocol.md; a change
//! that an older peer would misread gets a new [`PROTOCOL`] number, and
//! each side refuses a peer of another version by name.
//!
//! Runner → worker, on the worker's stdin: one [`ToWorker::Job`], then any
//! number of `ping`s, one `start` (the instant, in the worker's own clock,
//! at which its warm-up and measured phase begin). The measured phase ends
//! by itself (`duration` or `operations`, counted from the common start);
//! the end of stdin means "abort": the worker stops its requests, removes
//! what it wrote and exits. That is also what happens when the SSH session dies,
//! so a worker never outlives the runner that started it.
//!
//! Worker → runner, on its stdout: `hello` first, `pong`s, the ledger
//! (`created` before a bucket exists, `removed` after it is gone),
//! `ready` once prefilled, `started`, a `second` per finished second of the
//! measured phase, `alive` every second whatever it is doing, and last
//! `done` (figures, serialized HDR histograms, the measured window) or
//! `failed`.

use pipeline_model::{Histogram, Metric, Series};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The version of this protocol; a peer of another version is refused.
pub const PROTOCOL: u32 = 1;

/// The longest line either side accepts (a `done` with its histograms is
/// the largest message; 64 MiB is far beyond a day's run).
pub const MAX_LINE: usize = 64 << 20;

/// What the runner sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ToWorker {
    Job(Job),
    /// Answered at once by a `pong` with the worker's clock.
    Ping {
        id: u64,
    },
    /// Start the warm-up and measured phase at this instant of the worker's clock.
    Start {
        at_unix_ns: i64,
    },
}

/// The load a worker runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub protocol: u32,
    /// The stage whose load it is (`s3-bench`, `swift-bench`): the worker
    /// runs it by the [`WorkerKind`](super::WorkerKind) of that name.
    pub stage: String,
    pub run_id: String,
    /// Names the worker's buckets and keys: the stage instance and the host.
    pub load_name: String,
    /// The inventory name of the worker's host (for its messages).
    pub host: String,
    /// The stage's `with:`, endpoint and credentials resolved by the runner
    /// (the worker reads no credentials of its own host).
    pub config: serde_json::Value,
    /// Seconds the worker may take in all (the stage's time left).
    #[serde(default)]
    pub deadline_s: Option<f64>,
}

/// What a worker sends. `W` is a `done`'s `window`: the kind's account of
/// when it measured, which the session carries without reading it (the
/// worker sends it as JSON; the runner's side of the kind reads it as its
/// own type, so that a window it cannot read is a line that is not the
/// protocol, as any other).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FromWorker<W = serde_json::Value> {
    Hello {
        protocol: u32,
        version: String,
        /// The worker's process id on its host (a stalled worker is killed by it).
        pid: u32,
    },
    Pong {
        id: u64,
        clock_unix_ns: i64,
    },
    Progress {
        message: String,
    },
    Created {
        kind: String,
        name: String,
    },
    Removed {
        kind: String,
        name: String,
    },
    /// Prefilled; waiting for `start`.
    Ready,
    /// The warm-up began, at this instant of the worker's clock.
    Started {
        at_unix_ns: i64,
    },
    /// Operations completed in a finished second of the measured phase.
    Second {
        second: u64,
        ops: f64,
    },
    Alive,
    Done {
        output: WorkerOutput,
        window: W,
        /// The worker's peak resident memory.
        max_rss_kib: u64,
    },
    Failed {
        error: String,
        /// Ended because the runner closed its stdin (not a failure of its own).
        #[serde(default)]
        aborted: bool,
    },
}

/// A worker's figures: the stage output of its host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerOutput {
    pub metrics: Vec<Metric>,
    pub histograms: Vec<Histogram>,
    pub series: Vec<Series>,
    pub notes: Vec<String>,
}

/// One line a worker sent (its newline included or not), read as the
/// protocol; else why not, with the start of the line shown cleaned (the
/// error reaches the terminal).
pub fn decode<W: DeserializeOwned>(line: &[u8]) -> Result<FromWorker<W>, String> {
    serde_json::from_slice::<FromWorker<W>>(line).map_err(|e| {
        let shown: String = String::from_utf8_lossy(line)
            .chars()
            .take(120)
            .filter(|c| !c.is_control())
            .collect();
        let reason: String = e.to_string().chars().filter(|c| !c.is_control()).collect();
        format!("its worker sent a line that is not protocol {PROTOCOL} ({reason}): `{shown}`")
    })
}

/// One line of the protocol: the message and a newline.
pub fn line<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_else(|e| {
        // Only non-string map keys fail, and the messages have none.
        format!("{{\"type\":\"failed\",\"error\":\"cannot encode a message: {e}\"}}").into_bytes()
    });
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json_lines() {
        let start = line(&ToWorker::Start { at_unix_ns: 5 });
        assert_eq!(start, b"{\"type\":\"start\",\"at_unix_ns\":5}\n");
        let back: ToWorker = serde_json::from_slice(&start).unwrap();
        assert_eq!(back, ToWorker::Start { at_unix_ns: 5 });
        assert_eq!(
            line(&FromWorker::<serde_json::Value>::Ready),
            b"{\"type\":\"ready\"}\n"
        );
        let err = serde_json::from_str::<FromWorker>(
            "{\"type\":\"pong\",\"id\":1,\"clock_unix_ns\":2,\"x\":1}",
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        assert!(serde_json::from_str::<ToWorker>("{\"type\":\"rm -rf\"}").is_err());
    }
}
