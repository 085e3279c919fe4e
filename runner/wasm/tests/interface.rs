//! Released interface versions are frozen: plugins built against them must
//! keep working, so their WIT files never change. A change belongs in a new
//! version (`plugins/wit/pipeline-stage@0.2.0/`) with its own bindings in
//! `runner/wasm/src/versions/`.

use std::path::Path;

const RELEASED: &[(&str, &str)] = &[(
    "pipeline-stage@0.1.0/stage.wit",
    "faa7eccaa6ba7add18f35dec26f659d05c76a8b6cb85a4bbf422804e8f3845ba",
)];

#[test]
fn released_wit_files_are_unchanged() {
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/wit");
    for (file, sha) in RELEASED {
        let bytes = std::fs::read(wit.join(file)).unwrap();
        assert_eq!(
            pipeline_wasm::cache::sha256_hex(&bytes),
            *sha,
            "plugins/wit/{file} is a released interface and must not be edited; \
             add a new version instead (docs/writing-a-plugin.md, \"Versions of the interface\")"
        );
    }
}

#[test]
fn every_released_version_has_bindings() {
    for (file, _) in RELEASED {
        let version = file
            .split_once('@')
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(v, _)| v)
            .unwrap();
        assert!(
            pipeline_wasm::SUPPORTED_INTERFACES.contains(&version),
            "the runner must keep running plugins built against {version}"
        );
    }
}
