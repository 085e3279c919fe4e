//! `s3-bench` and `swift-bench` as kinds of [remote
//! worker](pipeline_stage_api::remote_worker): on a client host, the job's
//! config makes the stage's client, and the same load engine as a local
//! stage ([`super::load`]) runs with the worker's link to the runner as its
//! [`LoadHost`]: its ledger and progress go to the runner as messages,
//! cancellation is the end of stdin. The runner's half is [`super::clients`].

use std::time::Instant;

use pipeline_stage_api::remote_worker::protocol::Job;
use pipeline_stage_api::remote_worker::{WorkerKind, WorkerLink};
use pipeline_stage_api::stage::{StageError, StageOutput};

use super::load::{self, LoadConfig, LoadHost};
use super::store::Store;
use super::{s3_bench, swift_bench};

/// The load of `s3-bench` or `swift-bench` on a client host.
pub enum LoadWorker {
    S3,
    Swift,
}

impl WorkerKind for LoadWorker {
    fn stage(&self) -> &'static str {
        match self {
            LoadWorker::S3 => "s3-bench",
            LoadWorker::Swift => "swift-bench",
        }
    }

    fn run(
        &self,
        job: &Job,
        link: &mut WorkerLink,
    ) -> Result<(StageOutput, serde_json::Value), StageError> {
        let (config, store) = self.store_for(job)?;
        let (output, window) = load::run_with_window(&job.stage, &config, link, store)?;
        let window = serde_json::to_value(window)
            .map_err(|e| StageError::failed(format!("cannot encode the measured window: {e}")))?;
        Ok((output, window))
    }
}

impl LoadWorker {
    /// The stage's load parameters and its client, from the job's config.
    fn store_for(&self, job: &Job) -> Result<(LoadConfig, Store), StageError> {
        let bad = |e: serde_json::Error| {
            StageError::failed(format!("the job's {} config is not valid: {e}", job.stage))
        };
        match self {
            LoadWorker::S3 => {
                let config: s3_bench::Config =
                    serde_json::from_value(job.config.clone()).map_err(bad)?;
                let store = s3_bench::store(&config)?;
                Ok((config.load, store))
            }
            LoadWorker::Swift => {
                let config: swift_bench::Config =
                    serde_json::from_value(job.config.clone()).map_err(bad)?;
                let store = swift_bench::store(&config)?;
                Ok((config.load, store))
            }
        }
    }
}

impl LoadHost for WorkerLink {
    fn run_id(&self) -> &str {
        WorkerLink::run_id(self)
    }
    fn load_name(&self) -> &str {
        WorkerLink::load_name(self)
    }
    fn progress(&self, message: &str) {
        WorkerLink::progress(self, message);
    }
    fn is_cancelled(&self) -> bool {
        WorkerLink::is_cancelled(self)
    }
    fn deadline(&self) -> Option<Instant> {
        WorkerLink::deadline(self)
    }
    fn record_created(&mut self, kind: &str, name: &str) {
        WorkerLink::record_created(self, kind, name);
    }
    fn mark_removed(&mut self, kind: &str, name: &str) {
        WorkerLink::mark_removed(self, kind, name);
    }
    fn wait_for_start(&self) -> Result<(), StageError> {
        WorkerLink::wait_for_start(self)
    }
    fn measured_seconds(&self, ops_per_second: &[f64]) {
        WorkerLink::measured_seconds(self, ops_per_second);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use pipeline_stage_api::remote_worker::protocol::{self, FromWorker, PROTOCOL, ToWorker};
    use pipeline_stage_api::remote_worker::serve;

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn failure(stage: &str) -> (i32, Option<String>) {
        let job = protocol::line(&ToWorker::Job(Job {
            protocol: PROTOCOL,
            stage: stage.into(),
            run_id: "r".into(),
            load_name: "s@h".into(),
            host: "h".into(),
            config: serde_json::json!({"endpoint": "ftp://x", "access_key": "a", "secret_key": "b"}),
            deadline_s: Some(5.0),
        }));
        let out = Captured::default();
        let code = serve(
            &crate::worker_kinds(),
            Box::new(std::io::Cursor::new(job)),
            Box::new(out.clone()),
        );
        let bytes = out.0.lock().unwrap().clone();
        let failed = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice::<FromWorker>(l).unwrap())
            .find_map(|m| match m {
                FromWorker::Failed { error, .. } => Some(error),
                _ => None,
            });
        (code, failed)
    }

    #[test]
    fn a_job_that_cannot_start_fails_with_the_stage_error() {
        let (code, failed) = failure("s3-bench");
        assert_eq!(code, 1);
        assert!(failed.unwrap().contains("plain HTTP only"));
        let (_, failed) = failure("rados-bench");
        let failed = failed.unwrap();
        assert!(
            failed.contains("runs s3-bench and swift-bench, not `rados-bench`"),
            "{failed}"
        );
    }

    /// What two real workers sent (multi_client's clients example against
    /// the 16.2.15 sandbox): every line is the protocol, and each `done`
    /// passes the checks a worker's figures pass.
    #[test]
    fn captured_worker_outputs_are_the_protocol_and_their_figures_pass() {
        for name in ["s3-get-client1.jsonl", "swift-get-client1.jsonl"] {
            let path = format!("{}/tests/data/worker/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read(&path).unwrap();
            let mut done = 0;
            for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let message = protocol::decode::<super::super::load::Window>(line)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                if let FromWorker::Done {
                    output,
                    max_rss_kib,
                    ..
                } = message
                {
                    let stage = name.split("-client").next().unwrap();
                    let problem = pipeline_stage_api::remote_worker::done_check::problem(
                        stage,
                        &super::super::load::metrics(),
                        &output,
                        max_rss_kib,
                    );
                    assert_eq!(problem, None, "{name}");
                    assert!(!output.metrics.is_empty(), "{name}");
                    done += 1;
                }
            }
            assert_eq!(done, 1, "{name}");
        }
    }
}
