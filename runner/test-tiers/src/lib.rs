//! Test tiers. Plain `cargo test --workspace` runs the self-contained tests
//! (unit tests, data cases, goldens, WASM sandbox tests) on any machine; the
//! live tests, which need a running sandbox cluster, sshd hosts, an OCI
//! registry or Debian roots with other Ceph releases, are listed as ignored,
//! each naming what it needs, and one line per test binary says why.
//! `scripts/test.sh` turns the live tiers on: `PIPELINE_TEST_TIERS=all`, or a
//! list such as `cluster,hosts`.
//!
//! A live test binary has `harness = false` and one `main`:
//!
//! ```ignore
//! fn main() {
//!     pipeline_test_tiers::run(vec![
//!         live("pool_is_created_and_removed", &[Tier::Cluster], pool_is_created_and_removed),
//!     ]);
//! }
//! ```
//!
//! Every test is a trial of its own (libtest-mimic), so a filter runs one:
//! `cargo test -p pipeline --test ceph -- pool_is_created`.

use std::fmt;

pub mod guests;

use libtest_mimic::Arguments;
pub use libtest_mimic::{Failed, Trial};

/// The variable that turns live tiers on.
pub const TIERS_VAR: &str = "PIPELINE_TEST_TIERS";

/// What a live test needs besides this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// A running Ceph cluster: the sandbox `scripts/test.sh` starts (CEPH_CONF).
    Cluster,
    /// sshd hosts the test starts itself on loopback addresses (root, openssh-server).
    Hosts,
    /// A Debian `docker-registry` the test starts on 127.0.0.1.
    Registry,
    /// Debian roots with other Ceph releases (PIPELINE_CLIENT_ROOTS).
    Roots,
    /// A lab of network namespaces the test builds (`pipeline sandbox up --hosts`):
    /// root, iproute2, openssh-server, the Ceph packages.
    Lab,
    /// The README's "Using it" block run as it stands (scripts/readme-using-it.sh):
    /// root, its prerequisites in place (it runs offline), a release build.
    Readme,
    /// The real components results go to, started or used by the tests
    /// (scripts/install-deps.sh installs them): the JUnit XSD and xmllint,
    /// PostgreSQL, Prometheus and its Pushgateway.
    Integrations,
    /// The .deb (scripts/build-deb.sh, over a release build) installed into a
    /// Debian root of the release matrix: root, the roots, tmux.
    Package,
}

impl Tier {
    pub const ALL: [Tier; 8] = [
        Tier::Cluster,
        Tier::Hosts,
        Tier::Registry,
        Tier::Roots,
        Tier::Lab,
        Tier::Readme,
        Tier::Integrations,
        Tier::Package,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Cluster => "cluster",
            Tier::Hosts => "hosts",
            Tier::Registry => "registry",
            Tier::Roots => "roots",
            Tier::Lab => "lab",
            Tier::Readme => "readme",
            Tier::Integrations => "integrations",
            Tier::Package => "package",
        }
    }

    fn needs(self) -> &'static str {
        match self {
            Tier::Cluster => "a running sandbox cluster (CEPH_CONF)",
            Tier::Hosts => "sshd hosts on loopback (root, openssh-server)",
            Tier::Registry => "a docker-registry on 127.0.0.1",
            Tier::Roots => "Debian roots with Ceph 18.2/20.2 (PIPELINE_CLIENT_ROOTS)",
            Tier::Lab => {
                "root, iproute2 and openssh-server: a lab of network namespaces the test builds"
            }
            Tier::Readme => {
                "root and the README's prerequisites in place (the block runs offline: scripts/readme-using-it.sh)"
            }
            Tier::Integrations => {
                "the JUnit XSD, xmllint, PostgreSQL, Prometheus and its Pushgateway that scripts/install-deps.sh installs"
            }
            Tier::Package => {
                "root, a release build, the Debian roots and tmux: the .deb installed into a root"
            }
        }
    }

    /// Whether this run turned the tier on.
    pub fn is_on(self) -> bool {
        tiers_on(std::env::var(TIERS_VAR).ok().as_deref()).contains(&self)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tiers a value of [`TIERS_VAR`] turns on (`all`, or names separated by
/// commas; an unknown name turns nothing on and is reported by [`run`]).
fn tiers_on(value: Option<&str>) -> Vec<Tier> {
    let Some(value) = value else {
        return Vec::new();
    };
    let mut on = Vec::new();
    for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word == "all" {
            return Tier::ALL.to_vec();
        }
        on.extend(Tier::ALL.iter().copied().filter(|t| t.name() == word));
    }
    on
}

fn unknown_tiers(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty() && *w != "all" && !Tier::ALL.iter().any(|t| t.name() == *w))
        .collect()
}

/// The tiers that the trials made so far need and this run has off (for [`run`]'s line).
static OFF_AND_NEEDED: std::sync::Mutex<Vec<Tier>> = std::sync::Mutex::new(Vec::new());

/// Whether a trial needing `needs` is skipped; remembers what was off.
fn skipped(needs: &[Tier]) -> bool {
    let off: Vec<Tier> = needs.iter().copied().filter(|t| !t.is_on()).collect();
    let mut seen = OFF_AND_NEEDED.lock().unwrap_or_else(|e| e.into_inner());
    for tier in &off {
        if !seen.contains(tier) {
            seen.push(*tier);
        }
    }
    !off.is_empty()
}

/// One live test: its name, what it needs, and the function (which panics to fail).
pub fn live(name: &str, needs: &[Tier], test: fn()) -> Trial {
    let kind = needs.iter().map(|t| t.name()).collect::<Vec<_>>().join("+");
    Trial::test(name, move || {
        test();
        Ok::<(), Failed>(())
    })
    .with_kind(kind)
    .with_ignored_flag(skipped(needs))
}

/// One live case of a data folder (a closure over its file), which fails
/// with the message it returns.
pub fn live_case(
    name: &str,
    needs: &[Tier],
    test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    let ignored = skipped(needs);
    let kind = needs.iter().map(|t| t.name()).collect::<Vec<_>>().join("+");
    Trial::test(name, test)
        .with_kind(kind)
        .with_ignored_flag(ignored)
}

/// Runs the trials (libtest-mimic's arguments: filters, `--list`,
/// `--include-ignored`), first saying which tiers are off and what they need.
pub fn run(trials: Vec<Trial>) -> ! {
    let args = Arguments::from_args();
    if let Ok(value) = std::env::var(TIERS_VAR) {
        let unknown = unknown_tiers(&value);
        if !unknown.is_empty() {
            eprintln!(
                "error: {TIERS_VAR}={value:?}: unknown tier(s) {}; known: all, {}",
                unknown.join(", "),
                Tier::ALL.map(Tier::name).join(", ")
            );
            std::process::exit(101);
        }
    }
    let skipped = trials.iter().filter(|t| t.has_ignored_flag()).count();
    if skipped > 0 && !args.list {
        let off: Vec<String> = OFF_AND_NEEDED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|t| format!("{} needs {}", t.name(), t.needs()))
            .collect();
        eprintln!(
            "skipped: {skipped} live test(s) here, their tiers are off: {}; \
             scripts/test.sh turns them on ({TIERS_VAR}=all)",
            off.join("; ")
        );
    }
    libtest_mimic::run(&args, trials).exit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_turns_every_tier_on() {
        assert_eq!(tiers_on(Some("all")), Tier::ALL.to_vec());
    }

    #[test]
    fn a_list_turns_on_what_it_names() {
        assert_eq!(
            tiers_on(Some("cluster, roots")),
            vec![Tier::Cluster, Tier::Roots]
        );
        assert_eq!(tiers_on(Some("readme")), vec![Tier::Readme]);
        assert!(tiers_on(None).is_empty());
        assert!(tiers_on(Some("")).is_empty());
    }

    #[test]
    fn unknown_names_are_reported() {
        assert_eq!(unknown_tiers("cluster,clutser,all"), vec!["clutser"]);
        assert!(unknown_tiers("all").is_empty());
    }
}
