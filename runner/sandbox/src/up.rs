//! `up`: from an empty (or stale) directory to a cluster that answers S3 and Swift.

use std::time::{Duration, Instant};

use crate::bootstrap::{self, SWIFT_SUBUSER, Secrets};
use crate::ceph_cli::ceph_json;
use crate::conf::MON_PORTS;
use crate::daemons::{Daemon, MON_ID};
use crate::env::SandboxEnv;
use crate::error::SandboxError;
use crate::http_probe;
use crate::known_warnings;
use crate::lab::{self, Lab, LabPlan};
use crate::layout::{Layout, MARKER};
use crate::options::SandboxOptions;
use crate::pids;
use crate::ports;
use crate::process::{Deadline, find_program};
use crate::readiness::{OsdDump, PgReadiness, PgStat, mgr_available, quorum_names};
use crate::release;
use crate::topology::Topology;
use crate::wait::{Poll, wait_until};

/// Programs `up` runs.
pub const REQUIRED_PROGRAMS: [&str; 8] = [
    "ceph",
    "ceph-mon",
    "ceph-mgr",
    "ceph-osd",
    "radosgw",
    "radosgw-admin",
    "monmaptool",
    "ceph-conf",
];

/// Limit for one readiness query (the deadline may shorten it); short, because the loop retries.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// What a lab needs besides [`REQUIRED_PROGRAMS`]: iproute2 and OpenSSH.
pub const LAB_PROGRAMS: [&str; 4] = ["ip", "tc", "ssh-keygen", lab::SSHD];

/// Required programs that are not on `PATH`.
pub fn missing_programs() -> Vec<&'static str> {
    REQUIRED_PROGRAMS
        .into_iter()
        .filter(|p| find_program(p).is_none())
        .collect()
}

fn missing_lab_programs() -> Vec<&'static str> {
    LAB_PROGRAMS
        .into_iter()
        .filter(|p| {
            if p.starts_with('/') {
                !std::path::Path::new(p).exists()
            } else {
                find_program(p).is_none()
            }
        })
        .collect()
}

/// See [`crate::up`].
pub(crate) fn up(
    opts: &SandboxOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<SandboxEnv, SandboxError> {
    opts.validate()?;
    // A lab needs root before anything else: no other answer helps a non-root user.
    if opts.lab.is_some() {
        lab::require_root()?;
    }
    let layout = Layout::new(&opts.dir)?;
    let mut missing = missing_programs();
    if opts.lab.is_some() {
        missing.extend(missing_lab_programs());
    }
    if let Some(program) = missing.first() {
        return Err(SandboxError::MissingProgram {
            program: program.to_string(),
        });
    }
    let plan = opts.lab.clone().map(LabPlan::new).transpose()?;
    let topology = plan.as_ref().map_or_else(Topology::single, Topology::lab);
    let deadline = Deadline::after(opts.ready_timeout);
    let mut say = |msg: &str| {
        progress(&format!(
            "[{:5.1}s] {msg}",
            deadline.elapsed().as_secs_f64()
        ))
    };

    ensure_not_running(&layout)?;
    ensure_wipeable(&layout)?;
    // A stale lab of this folder goes before the folder is wiped (its record is in it);
    // another folder's lab is refused: two labs would share the bridge and addresses.
    if layout.marker().exists() {
        lab::teardown(&layout)?;
    }
    if plan.is_some() {
        let found = lab::leftovers();
        if !found.is_empty() {
            return Err(SandboxError::LabExists {
                found: found.join(", "),
            });
        }
    }
    // The release first: an unsupported install is the answer whatever holds the ports.
    let release = release::detect()?;
    release.check_supported()?;
    // A lab's daemons listen in namespaces of their own, not on this machine's ports.
    if plan.is_none() {
        ports::ensure_free(&[
            (MON_PORTS[0], "monitor msgr2"),
            (MON_PORTS[1], "monitor msgr1"),
            (opts.rgw_port, "radosgw S3/Swift"),
        ])?;
    }
    let registry_port_free =
        ports::ensure_free(&[(crate::registry::REGISTRY_PORT, "plugin registry")]);
    // Why there is no registry, when there is none (said once the cluster is up).
    let without_registry: Option<String> = if !crate::registry::available() {
        Some("docker-registry is not installed".into())
    } else {
        match registry_port_free {
            Ok(()) => None,
            // The lab is the second sandbox on a machine whose first holds the registry.
            Err(e) if plan.is_some() => Some(e.to_string()),
            Err(e) => return Err(e),
        }
    };
    if release.is_tested() {
        say(&format!("Ceph {}", release.describe()));
    } else {
        say(&format!(
            "Ceph {}: not a release the sandbox is tested with ({}); starting it anyway",
            release.describe(),
            release::TESTED.join(", ")
        ));
    }
    let osd_class_dir = release::osd_class_dir()?;
    recreate(&layout)?;

    let secrets = Secrets::generate(release.key_cipher())?;
    bootstrap::write_files(&layout, &topology, opts, &secrets, osd_class_dir.as_deref())?;

    // From here on daemons may run: stop them again if `up` fails, so a failed `up` does
    // not leave half a cluster holding the ports, nor a lab's network. The directory
    // stays for its logs.
    let result = plan
        .as_ref()
        .map(|plan| lab::create(&layout, plan, &topology, &mut say))
        .transpose()
        .and_then(|lab| {
            start_and_wait(
                &layout,
                &topology,
                lab.as_ref(),
                opts,
                &secrets,
                &deadline,
                &mut say,
            )
        })
        .and_then(|mut env| {
            if without_registry.is_none() {
                let pid = crate::registry::start(&layout, &deadline)?;
                env.registry = Some(crate::registry::address());
                say(&format!(
                    "plugin registry on {} (pid {pid})",
                    crate::registry::address()
                ));
            } else if let Some(why) = &without_registry {
                say(&format!("no plugin registry: {why}"));
            }
            Ok(env)
        });
    if result.is_err() {
        crate::down::stop_daemons(&layout);
        let _ = lab::teardown(&layout);
    }
    let env = result?;
    env.write(&layout.env_json())?;
    say(&format!(
        "sandbox ready in {:.1} s; CEPH_CONF={}",
        deadline.elapsed().as_secs_f64(),
        env.ceph_conf.display()
    ));
    Ok(env)
}

fn start_and_wait(
    layout: &Layout,
    topology: &Topology,
    lab: Option<&Lab>,
    opts: &SandboxOptions,
    secrets: &Secrets,
    deadline: &Deadline,
    say: &mut dyn FnMut(&str),
) -> Result<SandboxEnv, SandboxError> {
    let mon = Daemon::mon();
    let pid = bootstrap::create_mon(layout, topology, secrets, deadline)?;
    say(&format!(
        "mon {MON_ID} started on {} (pid {pid})",
        topology.place(&mon).host
    ));
    wait_until(
        layout,
        "monitor quorum",
        deadline,
        std::slice::from_ref(&mon),
        POLL_INTERVAL,
        || match ceph_json(layout, &["quorum_status"], deadline.limit(QUERY_TIMEOUT))
            .and_then(|j| quorum_names(&j))
        {
            Ok(names) if names.iter().any(|n| n == MON_ID) => Poll::Ready(()),
            Ok(names) => not_yet(format!("quorum is {names:?}"), layout, &mon),
            Err(e) => not_yet(e.to_string(), layout, &mon),
        },
    )?;
    say(&format!("mon {MON_ID} in quorum"));

    let mgr = Daemon::mgr();
    let pid = bootstrap::start_daemon(layout, topology, &mgr, deadline)?;
    say(&format!(
        "mgr {} started on {} (pid {pid})",
        mgr.id,
        topology.place(&mgr).host
    ));

    bootstrap::create_osds(layout, topology, secrets.cipher, deadline, say)?;

    let rgw = Daemon::rgw();
    let pid = bootstrap::start_daemon(layout, topology, &rgw, deadline)?;
    say(&format!(
        "rgw started on {} (pid {pid})",
        topology.place(&rgw).host
    ));

    let all = topology.daemons();
    let osd_count = topology.osd_count;
    wait_until(
        layout,
        "OSDs up and in",
        deadline,
        &all,
        POLL_INTERVAL,
        || match ceph_json(layout, &["osd", "dump"], deadline.limit(QUERY_TIMEOUT))
            .and_then(|j| OsdDump::parse(&j))
        {
            Ok(dump) if dump.up_and_in() == osd_count as usize => Poll::Ready(()),
            Ok(dump) => {
                let missing = dump.not_up_and_in();
                let log_of = missing.first().map_or(0, |&id| id.max(0) as u32);
                not_yet(
                    format!(
                        "{}/{osd_count} osds up and in; waiting for {missing:?}",
                        dump.up_and_in()
                    ),
                    layout,
                    &Daemon::osd(log_of),
                )
            }
            Err(e) => not_yet(e.to_string(), layout, &Daemon::osd(0)),
        },
    )?;
    say(&format!("{osd_count}/{osd_count} osds up and in"));

    bootstrap::create_rgw_users(layout, secrets, deadline)?;
    say(&format!(
        "S3 user {} and Swift user {SWIFT_SUBUSER} created",
        bootstrap::RGW_UID
    ));
    bootstrap::create_bucket_pools(layout, deadline)?;
    say(&format!(
        "gateway bucket pools {} created",
        bootstrap::BUCKET_POOLS.join(", ")
    ));

    let gateway_addr = std::net::SocketAddr::from((topology.place(&rgw).address, opts.rgw_port));
    let env = sandbox_env(layout, gateway_addr, lab, secrets);
    let mut last_pgs = String::new();
    wait_until(layout, "cluster", deadline, &all, POLL_INTERVAL, || {
        let probe_timeout = Duration::from_secs(5);
        let gateway = http_probe::probe_s3(gateway_addr, probe_timeout).and_then(|()| {
            http_probe::probe_swift(gateway_addr, &env.swift_user, &env.swift_key, probe_timeout)
        });
        if let Err(e) = gateway {
            return not_yet(format!("gateway: {e}"), layout, &rgw);
        }
        match pg_readiness(layout, deadline) {
            Ok(verdict) => {
                let text = verdict.describe();
                if text != last_pgs {
                    say(&text);
                    last_pgs = text.clone();
                }
                if verdict.is_ready() {
                    Poll::Ready(())
                } else {
                    not_yet(text, layout, &Daemon::mgr())
                }
            }
            Err(e) => not_yet(e, layout, &Daemon::mgr()),
        }
    })?;
    say("rgw answering S3 and Swift");
    acknowledge_known_warnings(layout, deadline, say)?;
    settle_health(layout, deadline, say)?;
    Ok(env)
}

/// Longest `up` waits, once everything answers, for the monitor's health to catch up.
const HEALTH_SETTLE: Duration = Duration::from_secs(30);

/// Waits, bounded, for HEALTH_OK: the monitor's health trails what `up` just did by a
/// few seconds (a gateway pool whose application was enabled a moment ago still shows
/// as POOL_APP_NOT_ENABLED, seen on 18.2), and a sandbox that says it is ready should
/// not report a warning its next `ceph -s` no longer has. A check still raised after
/// [`HEALTH_SETTLE`] is said, not hidden, and `up` goes on.
fn settle_health(
    layout: &Layout,
    deadline: &Deadline,
    say: &mut dyn FnMut(&str),
) -> Result<(), SandboxError> {
    let until = Instant::now() + HEALTH_SETTLE;
    loop {
        let json = ceph_json(layout, &["health"], deadline.limit(QUERY_TIMEOUT))?;
        let health: serde_json::Value =
            serde_json::from_str(json.trim()).map_err(|e| SandboxError::Parse {
                what: "`ceph health -f json`".into(),
                detail: e.to_string(),
            })?;
        if health["status"] == "HEALTH_OK" {
            return Ok(());
        }
        if Instant::now() >= until {
            let checks: Vec<&str> = health["checks"]
                .as_object()
                .map(|c| c.keys().map(String::as_str).collect())
                .unwrap_or_default();
            say(&format!(
                "health is {} after {} s: {}",
                health["status"].as_str().unwrap_or("unknown"),
                HEALTH_SETTLE.as_secs(),
                checks.join(", ")
            ));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Mutes the health warnings a release raises on every fresh cluster of its own
/// (`known_warnings`), saying which and why; every other check stays as it is.
fn acknowledge_known_warnings(
    layout: &Layout,
    deadline: &Deadline,
    say: &mut dyn FnMut(&str),
) -> Result<(), SandboxError> {
    let json = ceph_json(layout, &["health", "detail"], deadline.limit(QUERY_TIMEOUT))?;
    let detail: serde_json::Value =
        serde_json::from_str(json.trim()).map_err(|e| SandboxError::Parse {
            what: "`ceph health detail -f json`".into(),
            detail: e.to_string(),
        })?;
    for warning in known_warnings::find(&detail) {
        // Sticky: the mute stays when the count changes (a module retried).
        ceph_json(
            layout,
            &["health", "mute", warning.code, "--sticky"],
            deadline.limit(QUERY_TIMEOUT),
        )?;
        say(&format!(
            "muted {}: {} mgr modules cannot load here (PyO3 in subinterpreters; none is used by a stage): {}",
            warning.code,
            warning.modules.len(),
            warning.modules.join(", ")
        ));
    }
    Ok(())
}

/// PG readiness from the OSD map and the manager's PG stats (the manager must be active,
/// or `ceph pg stat` would block). The error says what is missing.
fn pg_readiness(layout: &Layout, deadline: &Deadline) -> Result<PgReadiness, String> {
    let query = |args: &[&str]| {
        ceph_json(layout, args, deadline.limit(QUERY_TIMEOUT)).map_err(|e| e.to_string())
    };
    if !mgr_available(&query(&["mgr", "stat"])?).map_err(|e| e.to_string())? {
        return Err("no active manager yet".into());
    }
    let dump = OsdDump::parse(&query(&["osd", "dump"])?).map_err(|e| e.to_string())?;
    let stat = PgStat::parse(&query(&["pg", "stat"])?).map_err(|e| e.to_string())?;
    Ok(PgReadiness::new(&dump, &stat))
}

fn not_yet<T>(detail: String, layout: &Layout, daemon: &Daemon) -> Poll<T> {
    Poll::NotYet {
        detail,
        log: layout.log_file(&daemon.name()),
    }
}

fn sandbox_env(
    layout: &Layout,
    gateway: std::net::SocketAddr,
    lab: Option<&Lab>,
    secrets: &Secrets,
) -> SandboxEnv {
    let endpoint = format!("http://{gateway}");
    SandboxEnv {
        dir: layout.dir().to_path_buf(),
        ceph_conf: layout.conf(),
        keyring: layout.keyring("client.admin"),
        client_name: "client.admin".into(),
        swift_auth_url: format!("{endpoint}/auth/1.0"),
        s3_endpoint: endpoint,
        aws_access_key_id: secrets.s3_access_key.clone(),
        aws_secret_access_key: secrets.s3_secret_key.clone(),
        s3_region: "us-east-1".into(),
        swift_user: SWIFT_SUBUSER.into(),
        swift_key: secrets.swift_key.clone(),
        registry: None,
        lab: lab.map(lab::env_of),
    }
}

/// Refuses when pid files in the directory name live daemons of this sandbox.
fn ensure_not_running(layout: &Layout) -> Result<(), SandboxError> {
    let live: Vec<String> = pids::pid_files(layout)
        .iter()
        .filter_map(|f| Some(format!("{} pid {}", f.daemon.name(), f.live_pid(layout)?)))
        .collect();
    if live.is_empty() {
        Ok(())
    } else {
        Err(SandboxError::AlreadyRunning {
            dir: layout.dir().to_path_buf(),
            daemons: live.join(", "),
        })
    }
}

/// A directory may be wiped only if it is absent, empty, or carries our marker.
fn ensure_wipeable(layout: &Layout) -> Result<(), SandboxError> {
    let dir = layout.dir();
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SandboxError::Io {
            action: "read directory",
            path: dir.to_path_buf(),
            source: e,
        }),
        Ok(mut entries) => {
            if entries.next().is_none() || layout.marker().exists() {
                Ok(())
            } else {
                Err(SandboxError::NotASandboxDir {
                    dir: dir.to_path_buf(),
                    marker: MARKER,
                })
            }
        }
    }
}

/// Removes a stale sandbox and creates the directory with its marker.
fn recreate(layout: &Layout) -> Result<(), SandboxError> {
    let dir = layout.dir();
    if layout.marker().exists() {
        std::fs::remove_dir_all(dir).map_err(SandboxError::io("remove stale sandbox", dir))?;
    }
    std::fs::create_dir_all(dir).map_err(SandboxError::io("create directory", dir))?;
    std::fs::write(
        layout.marker(),
        "created by pipeline-sandbox; `pipeline sandbox down` removes this directory\n",
    )
    .map_err(SandboxError::io("write", layout.marker()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scratch(name: &str) -> Layout {
        let dir = std::env::temp_dir().join(format!("sbx-up-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Layout::new(&dir).unwrap()
    }

    #[test]
    fn foreign_directory_is_never_wiped() {
        let layout = scratch("foreign");
        std::fs::create_dir_all(layout.dir()).unwrap();
        std::fs::write(layout.dir().join("precious.txt"), "data").unwrap();
        let err = ensure_wipeable(&layout).unwrap_err();
        assert!(matches!(err, SandboxError::NotASandboxDir { .. }), "{err}");
        assert!(layout.dir().join("precious.txt").exists());
        std::fs::remove_dir_all(layout.dir()).unwrap();
    }

    #[test]
    fn stale_sandbox_is_recreated() {
        let layout = scratch("stale");
        recreate(&layout).unwrap();
        std::fs::create_dir_all(layout.run_dir()).unwrap();
        // a pid file whose process is long gone (pid 2 is never a ceph-mon of ours)
        std::fs::write(layout.pid_file("mon.a"), "2\n").unwrap();
        ensure_not_running(&layout).unwrap();
        ensure_wipeable(&layout).unwrap();
        recreate(&layout).unwrap();
        assert!(!layout.pid_file("mon.a").exists());
        assert!(layout.marker().exists());
        std::fs::remove_dir_all(layout.dir()).unwrap();
    }

    #[test]
    fn absent_directory_is_fine() {
        let layout = Layout::new(Path::new("/nonexistent/pipeline-sandbox-test")).unwrap();
        ensure_not_running(&layout).unwrap();
        ensure_wipeable(&layout).unwrap();
    }
}
