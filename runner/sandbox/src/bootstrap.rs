//! The steps that create the cluster: files, monitor, manager, OSDs, gateway and its users.
//!
//! Each step runs the Ceph tools with a time limit taken from the overall `up` deadline.
//! Daemons daemonize themselves and write their pid files; nothing here keeps a child.

use std::time::Duration;

use crate::conf::{self, ConfParams};
use crate::daemons::{Daemon, MON_ID};
use crate::error::SandboxError;
use crate::keyring::{self, KeyEntry};
use crate::keys;
use crate::layout::Layout;
use crate::options::SandboxOptions;
use crate::pids::{PidFile, read_pid};
use crate::process::{self, Deadline};
use crate::release::KeyCipher;
use crate::topology::Topology;
use crate::wait::TAIL_LINES;
use crate::{ceph_cli, logs};

/// Cap for one tool invocation (the deadline may shorten it).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a daemon may take to show a live pid after its start command returned.
const PID_TIMEOUT: Duration = Duration::from_secs(10);

/// S3 user id; the Swift user is `sandbox:swift`.
pub(crate) const RGW_UID: &str = "sandbox";
pub(crate) const SWIFT_SUBUSER: &str = "sandbox:swift";

/// Identifiers and secrets generated once per `up`.
#[derive(Debug, Clone)]
pub(crate) struct Secrets {
    pub fsid: String,
    pub mon_key: String,
    pub admin_key: String,
    pub mgr_key: String,
    pub rgw_key: String,
    pub s3_access_key: String,
    pub s3_secret_key: String,
    pub swift_key: String,
    /// The cipher of every cephx key, the OSDs' too (the release decides it).
    pub cipher: KeyCipher,
}

impl Secrets {
    pub fn generate(cipher: KeyCipher) -> Result<Secrets, SandboxError> {
        Ok(Secrets {
            fsid: keys::uuid_v4()?,
            mon_key: keys::cephx_key(cipher)?,
            admin_key: keys::cephx_key(cipher)?,
            mgr_key: keys::cephx_key(cipher)?,
            rgw_key: keys::cephx_key(cipher)?,
            s3_access_key: keys::random_token(20, keys::ACCESS_KEY_ALPHABET)?,
            s3_secret_key: keys::random_token(40, keys::SECRET_ALPHABET)?,
            swift_key: keys::random_token(40, keys::SECRET_ALPHABET)?,
            cipher,
        })
    }
}

fn daemon_data_dir(layout: &Layout, daemon: &Daemon) -> std::path::PathBuf {
    layout.data_dir(daemon.data_kind(), &daemon.id)
}

fn write(path: std::path::PathBuf, text: &str) -> Result<(), SandboxError> {
    std::fs::write(&path, text).map_err(SandboxError::io("write", path))
}

fn mkdir(path: std::path::PathBuf) -> Result<(), SandboxError> {
    std::fs::create_dir_all(&path).map_err(SandboxError::io("create directory", path))
}

/// Writes `ceph.conf`, `topology.json` and the keyrings, and creates the directory tree.
pub(crate) fn write_files(
    layout: &Layout,
    topology: &Topology,
    opts: &SandboxOptions,
    secrets: &Secrets,
    osd_class_dir: Option<&str>,
) -> Result<(), SandboxError> {
    for dir in [
        layout.keys_dir(),
        layout.run_dir(),
        layout.log_dir(),
        layout.crash_dir(),
        layout.data_root("mon"),
        layout.data_root("mgr"),
        layout.data_root("osd"),
        daemon_data_dir(layout, &Daemon::rgw()),
        daemon_data_dir(layout, &Daemon::mgr()),
    ] {
        mkdir(dir)?;
    }
    write(
        layout.conf(),
        &conf::render(&ConfParams {
            layout,
            topology,
            fsid: &secrets.fsid,
            objectstore: opts.objectstore,
            memstore_bytes: opts.memstore_bytes,
            allow_pool_delete: opts.allow_pool_delete,
            rgw_port: opts.rgw_port,
            osd_class_dir,
        }),
    )?;
    topology.write(&layout.topology_json())?;
    let admin = KeyEntry::admin(secrets.admin_key.clone());
    let mgr = KeyEntry::mgr(secrets.mgr_key.clone());
    let rgw = KeyEntry::rgw(secrets.rgw_key.clone());
    // The monitor's keyring seeds the auth database at mkfs with every daemon key.
    let mon_keyring = [
        KeyEntry::mon(secrets.mon_key.clone()),
        admin.clone(),
        mgr.clone(),
        rgw.clone(),
    ];
    write(
        layout.keyring(&Daemon::mon().name()),
        &keyring::render(&mon_keyring),
    )?;
    write(layout.keyring("client.admin"), &keyring::render(&[admin]))?;
    write(
        layout.keyring(&Daemon::mgr().name()),
        &keyring::render(&[mgr]),
    )?;
    write(
        layout.keyring(&Daemon::rgw().name()),
        &keyring::render(&[rgw]),
    )?;
    Ok(())
}

/// Starts `daemon` (which daemonizes) on its host, in the host's network namespace in a
/// lab, and waits for its pid file to name a live process.
pub(crate) fn start_daemon(
    layout: &Layout,
    topology: &Topology,
    daemon: &Daemon,
    deadline: &Deadline,
) -> Result<u32, SandboxError> {
    let name = daemon.name();
    let mut cmd = match topology.place(daemon).netns {
        Some(netns) => crate::lab::in_netns(&netns, daemon.kind.binary()),
        None => process::command(daemon.kind.binary()),
    };
    cmd.arg("-c")
        .arg(layout.conf())
        .args(daemon.identity_args());
    let output = layout.start_output(&name);
    let log = layout.log_file(&name);
    let failed = |detail: String| SandboxError::DaemonStart {
        daemon: name.clone(),
        detail,
        tail: logs::tail_file(&log, TAIL_LINES),
        log: log.clone(),
    };
    process::run_daemon_start(cmd, &output, deadline.limit(STEP_TIMEOUT))
        .map_err(|e| failed(e.to_string()))?;
    let pid_path = layout.pid_file(&name);
    let waited = Deadline::after(deadline.limit(PID_TIMEOUT));
    loop {
        let pid_file = PidFile {
            daemon: daemon.clone(),
            path: pid_path.clone(),
            pid: read_pid(&pid_path),
        };
        if let Some(pid) = pid_file.live_pid(layout) {
            if let (true, Some(id)) = (topology.is_lab(), daemon.osd_id()) {
                crate::lab::disk::join(layout, id, pid)?;
            }
            return Ok(pid);
        }
        if waited.expired() {
            return Err(failed(format!(
                "no live {} process in {pid_path:?} after {:.1?}; start output: {}",
                daemon.kind.binary(),
                waited.elapsed(),
                logs::tail_file(&output, 5)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `monmaptool --create`, `ceph-mon --mkfs`, then starts `mon.a`.
pub(crate) fn create_mon(
    layout: &Layout,
    topology: &Topology,
    secrets: &Secrets,
    deadline: &Deadline,
) -> Result<u32, SandboxError> {
    let mut monmap = process::command("monmaptool");
    monmap
        .args([
            "--create",
            "--clobber",
            "--addv",
            MON_ID,
            &topology.mon_addrv(),
            "--fsid",
        ])
        .arg(&secrets.fsid)
        .arg(layout.monmap());
    process::run_ok(monmap, deadline.limit(STEP_TIMEOUT))?;

    let mon = Daemon::mon();
    let mut mkfs = process::command("ceph-mon");
    mkfs.arg("-c")
        .arg(layout.conf())
        .args(["--mkfs", "-i", MON_ID, "--monmap"])
        .arg(layout.monmap())
        .arg("--keyring")
        .arg(layout.keyring(&mon.name()));
    process::run_ok(mkfs, deadline.limit(STEP_TIMEOUT))
        .map_err(|e| e.in_step("ceph-mon --mkfs", layout.log_file(&mon.name())))?;
    start_daemon(layout, topology, &mon, deadline)
}

/// Registers OSD `id` with the monitor, formats its store and starts it.
pub(crate) fn create_osd(
    layout: &Layout,
    topology: &Topology,
    id: u32,
    cipher: KeyCipher,
    deadline: &Deadline,
) -> Result<u32, SandboxError> {
    let daemon = Daemon::osd(id);
    let log = layout.log_file(&daemon.name());
    let uuid = keys::uuid_v4()?;
    let key = keys::cephx_key(cipher)?;
    let secret_json = layout.osd_secret_json(id);
    write(
        secret_json.clone(),
        &serde_json::json!({ "cephx_secret": key }).to_string(),
    )?;
    let id_text = id.to_string();
    let secret_arg = secret_json.to_string_lossy().into_owned();
    ceph_cli::ceph(
        layout,
        &["osd", "new", &uuid, &id_text, "-i", &secret_arg],
        deadline.limit(STEP_TIMEOUT),
    )
    .map_err(|e| {
        e.in_step(
            format!("registering osd.{id}"),
            layout.log_file(&Daemon::mon().name()),
        )
    })?;
    let _ = std::fs::remove_file(&secret_json);
    write(
        layout.keyring(&daemon.name()),
        &keyring::render(&[KeyEntry::osd(id, key)]),
    )?;
    mkdir(daemon_data_dir(layout, &daemon))?;
    let mut mkfs = process::command("ceph-osd");
    mkfs.arg("-c")
        .arg(layout.conf())
        .args(["-i", &id_text, "--mkfs", "--osd-uuid", &uuid]);
    process::run_ok(mkfs, deadline.limit(STEP_TIMEOUT * 2))
        .map_err(|e| e.in_step(format!("ceph-osd -i {id} --mkfs"), log))?;
    if topology.is_lab() {
        // So that `sandbox fault slow-disk` can slow this OSD's disk.
        crate::lab::disk::attach(layout, id)?;
    }
    start_daemon(layout, topology, &daemon, deadline)
}

/// Creates the OSDs concurrently (each step waits on the monitor or the disk, not the CPU).
pub(crate) fn create_osds(
    layout: &Layout,
    topology: &Topology,
    cipher: KeyCipher,
    deadline: &Deadline,
    progress: &mut dyn FnMut(&str),
) -> Result<(), SandboxError> {
    let results: Vec<Result<u32, SandboxError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..topology.osd_count)
            .map(|id| scope.spawn(move || create_osd(layout, topology, id, cipher, deadline)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(SandboxError::Parse {
                        what: "OSD creation".into(),
                        detail: "worker thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    for (id, result) in results.into_iter().enumerate() {
        let pid = result?;
        let host = topology.place(&Daemon::osd(id as u32)).host;
        progress(&format!("osd.{id} started on {host} (pid {pid})"));
    }
    Ok(())
}

/// Creates the S3 user with fixed keys and its Swift subuser.
///
/// `radosgw-admin` blocks until the gateway's pools are usable, so a failure here is
/// usually explained by the gateway's log (pool creation) rather than by the tool.
pub(crate) fn create_rgw_users(
    layout: &Layout,
    secrets: &Secrets,
    deadline: &Deadline,
) -> Result<(), SandboxError> {
    let log = layout.log_file(&Daemon::rgw().name());
    let access = format!("--access-key={}", secrets.s3_access_key);
    let secret = format!("--secret-key={}", secrets.s3_secret_key);
    ceph_cli::radosgw_admin(
        layout,
        &[
            "user",
            "create",
            &format!("--uid={RGW_UID}"),
            "--display-name=sandbox",
            &access,
            &secret,
        ],
        deadline.limit(STEP_TIMEOUT),
    )
    .map_err(|e| e.in_step("creating the S3 user", log.clone()))?;
    let swift_secret = format!("--secret={}", secrets.swift_key);
    ceph_cli::radosgw_admin(
        layout,
        &[
            "subuser",
            "create",
            &format!("--uid={RGW_UID}"),
            &format!("--subuser={SWIFT_SUBUSER}"),
            "--access=full",
            "--key-type=swift",
            &swift_secret,
        ],
        deadline.limit(STEP_TIMEOUT),
    )
    .map_err(|e| e.in_step("creating the Swift subuser", log))?;
    Ok(())
}

/// The pools radosgw would create at the first bucket: made here, so that a run's first
/// bucket does not change the cluster's pool set (a suite compares the pools before and
/// after, and `ceph-cleanup` must not be asked about pools nobody in the run created).
pub(crate) const BUCKET_POOLS: [&str; 2] =
    ["default.rgw.buckets.index", "default.rgw.buckets.data"];

/// Creates [`BUCKET_POOLS`] with the gateway's application tag.
pub(crate) fn create_bucket_pools(
    layout: &Layout,
    deadline: &Deadline,
) -> Result<(), SandboxError> {
    let log = layout.log_file(&Daemon::mon().name());
    for pool in BUCKET_POOLS {
        // Creating an existing pool exits 0: an `up` that radosgw raced is fine.
        ceph_cli::ceph(
            layout,
            &["osd", "pool", "create", pool],
            deadline.limit(STEP_TIMEOUT),
        )
        .and_then(|_| {
            ceph_cli::ceph(
                layout,
                &["osd", "pool", "application", "enable", pool, "rgw"],
                deadline.limit(STEP_TIMEOUT),
            )
        })
        .map_err(|e| e.in_step(format!("creating the gateway pool {pool}"), log.clone()))?;
    }
    Ok(())
}
