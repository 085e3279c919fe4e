//! Health warnings that a release's own packages raise on every fresh cluster, which the
//! sandbox acknowledges (mutes, visibly) instead of leaving every run to trip over them.
//!
//! Only one is known: Debian's Ceph 18.2 builds load mgr modules in Python
//! subinterpreters, and Debian's `python3-cryptography`/`python3-bcrypt` are PyO3
//! extensions, which refuse subinterpreters. Thirteen modules (balancer, crash,
//! devicehealth, iostat, nfs, orchestrator, pg_autoscaler, progress, rbd_support,
//! restful, status, telemetry, volumes) then fail to load, and the cluster reports
//! HEALTH_WARN `MGR_MODULE_DEPENDENCY` forever. No stage uses those modules (the
//! commands stages run are the monitor's and the manager's C++ ones), and installing
//! more Python packages cannot fix it. So the sandbox mutes exactly that check, and only
//! when every one of its lines names that cause: `ceph health detail` still shows it,
//! marked muted, and the `ceph-health` stage reports it as `[muted]`.

use serde_json::Value;

/// The check, and the text each of its lines must carry for the mute to apply.
pub(crate) const MGR_MODULE_DEPENDENCY: &str = "MGR_MODULE_DEPENDENCY";
const PYO3_CAUSE: &str = "PyO3 modules do not yet support subinterpreters";

/// A warning to mute, with what a person should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KnownWarning {
    pub code: &'static str,
    /// The modules that did not load, as the check names them.
    pub modules: Vec<String>,
}

/// The known warnings in `ceph health detail -f json` that are not muted yet.
pub(crate) fn find(health_detail: &Value) -> Vec<KnownWarning> {
    let Some(check) = health_detail.pointer(&format!("/checks/{MGR_MODULE_DEPENDENCY}")) else {
        return Vec::new();
    };
    if check.get("muted").and_then(Value::as_bool) == Some(true) {
        return Vec::new();
    }
    let lines: Vec<&str> = check
        .get("detail")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("message")?.as_str())
        .collect();
    if lines.is_empty() || !lines.iter().all(|l| l.contains(PYO3_CAUSE)) {
        return Vec::new();
    }
    let modules = lines
        .iter()
        .filter_map(|l| {
            l.strip_prefix("Module '")?
                .split_once('\'')
                .map(|(m, _)| m.to_string())
        })
        .collect();
    vec![KnownWarning {
        code: MGR_MODULE_DEPENDENCY,
        modules,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_pyo3_module_failures_of_18_2_are_found_once() {
        // `ceph health detail -f json` on a fresh 18.2.7 sandbox (Debian trixie), before
        // and after `ceph health mute MGR_MODULE_DEPENDENCY --sticky`.
        let found = find(&data("health_detail_mgr_pyo3_18.2.7.json"));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].code, "MGR_MODULE_DEPENDENCY");
        assert_eq!(found[0].modules.len(), 13);
        assert!(found[0].modules.iter().any(|m| m == "rbd_support"));
        assert_eq!(find(&data("health_detail_mgr_pyo3_muted_18.2.7.json")), []);
    }

    #[test]
    fn other_causes_and_other_checks_are_left_alone() {
        // Another cause of the same check must stay visible: only the text changes.
        let mut other = data("health_detail_mgr_pyo3_18.2.7.json");
        other["checks"]["MGR_MODULE_DEPENDENCY"]["detail"][0]["message"] =
            "Module 'balancer' has failed dependency: No module named 'numpy'".into();
        assert_eq!(find(&other), []);
        assert_eq!(find(&data("health_noout.json")), []);
        assert_eq!(find(&data("health_ok.json")), []);
    }
}
