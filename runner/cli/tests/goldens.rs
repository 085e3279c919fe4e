//! Every golden file still has the input it was made from: a golden whose
//! case was deleted would otherwise sit there, checked by nothing.

mod common;

/// (folder, golden suffix, the input's suffixes: any one must exist).
const PAIRS: &[(&str, &str, &[&str])] = &[
    ("tests/runs", ".expect.json", &[".yaml"]),
    ("tests/hosts", ".expect.json", &[".yaml"]),
    ("tests/invalid", ".stderr", &[".yaml"]),
    ("tests/plan", ".stdout", &[".yaml"]),
    // A report golden comes from a results.json, or a folder holding one.
    (
        "tests/report",
        ".report.md",
        &[".results.json", "/results.json"],
    ),
];

#[test]
fn every_golden_file_has_its_input() {
    let mut orphans = Vec::new();
    let mut goldens = 0;
    for (folder, golden, inputs) in PAIRS {
        let dir = common::root().join(folder);
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(golden) else {
                continue;
            };
            goldens += 1;
            if !inputs
                .iter()
                .any(|suffix| dir.join(format!("{stem}{suffix}")).exists())
            {
                orphans.push(format!(
                    "{folder}/{name}: no {} beside it (delete the golden, or restore its case)",
                    inputs
                        .iter()
                        .map(|s| format!("{stem}{s}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
        }
    }
    assert!(
        goldens > 50,
        "only {goldens} golden files found: wrong folders?"
    );
    assert!(orphans.is_empty(), "{}", orphans.join("\n"));
}
