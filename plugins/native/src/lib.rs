//! The native (compiled-in) stages. [`registry`] is the one list of them:
//! adding a stage means adding a module and a line there.

pub mod ceph;
pub mod exec;
pub mod fio;
pub mod host;
pub mod objgw;

use pipeline_stage_api::registry::Registry;
use pipeline_stage_api::remote_worker::WorkerKind;
use pipeline_stage_api::typed::Typed;

/// Every native stage.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.add_native(Typed(exec::Exec));
    r.add_native(Typed(ceph::info::CephInfo));
    r.add_native(Typed(ceph::health::CephHealth));
    r.add_native(Typed(ceph::pool::CephPool));
    r.add_native(Typed(ceph::rados_bench::RadosBench));
    r.add_native(Typed(ceph::rbd_bench::RbdBench));
    r.add_native(Typed(ceph::cleanup::CephCleanup));
    r.add_native(Typed(fio::Fio));
    r.add_native(Typed(host::drop_caches::DropCaches));
    r.add_native(Typed(host::disk_baseline::DiskBaseline));
    r.add_native(Typed(host::iperf3::Iperf3));
    r.add_native(Typed(objgw::s3_bench::S3Bench));
    r.add_native(Typed(objgw::swift_bench::SwiftBench));
    r
}

/// Every kind of load `pipeline worker` runs on a client host (the stages
/// whose `on:` hosts run their load in remote workers).
pub fn worker_kinds() -> Vec<Box<dyn WorkerKind>> {
    vec![
        Box::new(objgw::worker::LoadWorker::S3),
        Box::new(objgw::worker::LoadWorker::Swift),
    ]
}

/// The real tool outputs the parsers are tested on
/// (plugins/parsers/tests/data), for the stages' tests that what the
/// parsers make of them is what the stages declare.
#[cfg(test)]
pub(crate) fn parser_fixtures(prefix: &str) -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../parsers/tests/data");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.starts_with(prefix).then_some(name)
        })
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            (name, text)
        })
        .collect();
    found.sort();
    assert!(
        !found.is_empty(),
        "no fixture {prefix}* in {}",
        dir.display()
    );
    found
}
