//! The host watch of an inventory host: one SSH session for the stage (the
//! run's shared connection master), a shell there that answers each line
//! the runner sends with the same `/proc` files the local watch reads. The
//! runner sends a line a second and stamps each answer with its own clock
//! when the answer is complete, so every host's series is on the runner's
//! time axis (off by at most one round trip) whatever the host's clock says.
//! The shell ends when its stdin closes; a host that stops answering is
//! killed with its session at the stage's end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use pipeline_stage_api::hosts::Host;

use super::manifest::HostManifest;
use super::procfs::{self, Snapshot};

/// Answers each line it reads with the files between markers; `@@end`
/// closes an answer. A line `m` asks for the host's manifest instead, a
/// line `tp` for the processes too ([`super::procs::REMOTE_SCRIPT`]).
fn script() -> String {
    format!(
        "while read -r what; do \
if [ \"$what\" = m ]; then {}; continue; fi; \
if [ \"$what\" = tp ]; then echo @@procs; {}; fi; \
echo @@stat; cat /proc/stat; \
echo @@net-dev; cat /proc/net/dev; \
echo @@snmp; cat /proc/net/snmp; \
echo @@diskstats; cat /proc/diskstats; \
echo @@meminfo; cat /proc/meminfo; \
echo @@block; ls /sys/block; \
echo @@speed; for f in /sys/class/net/*/speed; do n=${{f%/speed}}; echo \"${{n##*/}} $(cat \"$f\" 2>/dev/null)\"; done; \
echo @@qdisc; tc -j qdisc show 2>/dev/null; echo; \
echo @@end; done",
        super::manifest::remote_script(),
        super::procs::REMOTE_SCRIPT
    )
}

/// The sections an answer may have.
const SECTIONS: [&str; 16] = [
    "stat",
    "procs",
    "net-dev",
    "snmp",
    "diskstats",
    "meminfo",
    "block",
    "speed",
    "qdisc",
    "osrelease",
    "bootid",
    "hostname",
    "cpuinfo",
    "mtu",
    "sysctl",
    "end",
];

/// Longest answer read; a longer one (a host with thousands of devices, or
/// one that answers with anything but `/proc`) ends the watch of that host.
const MAX_ANSWER: u64 = 8 << 20;

/// The `ssh` clients of one host's watch, also held by the runner: a host
/// that stops answering holds its watch's thread in a read until they are
/// killed.
#[derive(Clone, Default)]
pub struct Clients(Arc<Mutex<Vec<Child>>>);

impl Clients {
    fn add(&self, child: Child) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(child);
    }

    /// Kills every client (a read from one then ends).
    pub fn kill(&self) {
        for child in self.0.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            let _ = child.kill();
        }
    }

    /// Kills every client and reaps it.
    pub fn end(&self) {
        for mut child in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `ssh` to `host` running `command`, its stdin and stdout piped,
/// in a process group of its own; the client joins `clients`.
fn start(
    host: &Host,
    command: String,
    clients: &Clients,
) -> Result<(ChildStdin, ChildStdout), String> {
    let mut argv = host.ssh_argv();
    argv.push(command);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start ssh: {e}"))?;
    let pipes = (child.stdin.take(), child.stdout.take());
    clients.add(child);
    match pipes {
        (Some(to), Some(from)) => Ok((to, from)),
        _ => Err("ssh has no stdin or stdout".into()),
    }
}

/// An open session with a host's sampling shell.
pub struct Session {
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    /// Its `ssh` client, and the gateway session's.
    pub clients: Clients,
    /// The host's gateways, when it has any (opened with the first reading).
    pub gateways: Option<GatewaySession>,
    /// Link speeds and shaping the last answer gave.
    pub rates: BTreeMap<String, procfs::LinkRate>,
    pub host: String,
    /// The speeds the inventory declares for its interfaces, bits a second.
    declared: BTreeMap<String, f64>,
    /// How to reach it (for the gateway session).
    address: Host,
}

impl Session {
    pub fn open(host: &Host) -> Result<Session, String> {
        let clients = Clients::default();
        let command = format!("sh -c {}", pipeline_stage_api::exec::shell_quote(&script()));
        let (to, from) = start(host, command, &clients).inspect_err(|_| clients.end())?;
        Ok(Session {
            to,
            from: BufReader::new(from),
            clients,
            gateways: None,
            rates: BTreeMap::new(),
            host: host.name.clone(),
            declared: host.link_bits.clone(),
            address: host.clone(),
        })
    }

    /// Opens the host's gateway session ([`GatewaySession`]), when it has gateways.
    pub fn open_gateways(&mut self, conf: &str) {
        self.gateways = GatewaySession::open(&self.address, conf, &self.clients);
    }

    /// Asks for one reading (with the watched processes when `procs`) and
    /// waits for it. `Err` when the session ended or the answer was not one.
    pub fn read(&mut self, procs: bool) -> Result<Snapshot, String> {
        let sections = self.ask(if procs { "tp" } else { "t" })?;
        let get = |k: &str| sections.get(k).map(String::as_str).unwrap_or_default();
        if procfs::parse_stat(get("stat")).is_empty() {
            return Err("an answer without /proc/stat".into());
        }
        let mut snapshot = procfs::snapshot(
            get("stat"),
            get("net-dev"),
            get("snmp"),
            get("diskstats"),
            get("meminfo"),
        );
        let whole: Vec<&str> = get("block").lines().map(str::trim).collect();
        snapshot
            .disks
            .retain(|name, _| whole.contains(&name.as_str()));
        let mut rates = BTreeMap::new();
        procfs::parse_speeds(get("speed"), &mut rates);
        procfs::parse_tc_qdiscs(get("qdisc"), &mut rates);
        procfs::declare_speeds(&self.declared, &mut rates);
        self.rates = rates;
        if procs {
            snapshot.procs = Some(super::procs::parse(get("procs")));
        }
        Ok(snapshot)
    }

    /// The host's manifest (kernel, CPU, memory, MTUs, sysctls).
    pub fn manifest(&mut self) -> Result<HostManifest, String> {
        let sections = self.ask("m")?;
        let get = |k: &str| sections.get(k).map(String::as_str).unwrap_or_default();
        Ok(super::manifest::parse(&super::manifest::Texts {
            osrelease: get("osrelease"),
            boot_id: get("bootid"),
            hostname: get("hostname"),
            cpuinfo: get("cpuinfo"),
            meminfo: get("meminfo"),
            mtu: get("mtu"),
            speed: get("speed"),
            sysctl: get("sysctl"),
        }))
    }

    /// Sends one request line and reads the answer's sections, up to `@@end`.
    fn ask(&mut self, request: &str) -> Result<BTreeMap<&'static str, String>, String> {
        writeln!(self.to, "{request}")
            .and_then(|()| self.to.flush())
            .map_err(|_| "the SSH session closed".to_string())?;
        let mut sections: BTreeMap<&'static str, String> = BTreeMap::new();
        let mut current: Option<&'static str> = None;
        let mut limited = (&mut self.from).take(MAX_ANSWER);
        let mut line = String::new();
        loop {
            line.clear();
            match limited.read_line(&mut line) {
                Ok(0) => {
                    return Err(if limited.limit() == 0 {
                        format!("an answer of over {MAX_ANSWER} bytes")
                    } else {
                        "the SSH session closed".to_string()
                    });
                }
                Ok(_) => {}
                Err(_) => return Err("an answer that is not text".into()),
            }
            let text = line.trim_end_matches('\n');
            if let Some(marker) = text.strip_prefix("@@") {
                current = SECTIONS.iter().find(|s| **s == marker).copied();
                if current == Some("end") {
                    break;
                }
                continue;
            }
            if let Some(name) = current {
                let section = sections.entry(name).or_default();
                section.push_str(text);
                section.push('\n');
            }
        }
        Ok(sections)
    }
}

/// Longest gateway answer read (8 gateways' counters are a few KiB).
const MAX_GATEWAY_ANSWER: u64 = 1 << 20;

/// The radosgw counters of an inventory host: a second session running the
/// cluster sampler's script in its gateways-only mode (no librados) with
/// the host's Python, which answers each line the runner sends with every
/// local gateway's `perf dump`. The shell session cannot: an admin socket
/// is a Unix socket, and no shell builtin speaks to one. Started once a
/// stage (about 70 ms of CPU on the host), then about 1 ms a reading.
pub struct GatewaySession {
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    /// The script's CPU time at its latest answer (its start-up included), seconds.
    pub cpu_s: Option<f64>,
}

#[derive(serde::Deserialize)]
struct GatewayAnswer {
    #[serde(default)]
    gateways: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    cpu_s: Option<f64>,
}

impl GatewaySession {
    /// `None` when the host has no Python, or no gateway socket in the
    /// folders `conf` (the suite's ceph.conf path, read on the host) names
    /// or in /run/ceph: nothing to read there.
    fn open(host: &Host, conf: &str, clients: &Clients) -> Option<GatewaySession> {
        let quote = pipeline_stage_api::exec::shell_quote;
        let command = format!(
            "python3 -c {} gateways {}",
            quote(crate::cluster_watch::SAMPLER),
            quote(conf)
        );
        let (to, from) = start(host, command, clients).ok()?;
        let mut session = GatewaySession {
            to,
            from: BufReader::new(from),
            cpu_s: None,
        };
        match session.read() {
            Ok(found) if !found.is_empty() => Some(session),
            _ => None,
        }
    }

    /// One reading of each gateway's counters; `Err` when the session ended.
    pub fn read(
        &mut self,
    ) -> Result<BTreeMap<String, pipeline_parsers::rgw_perf::Counters>, String> {
        writeln!(self.to, "g")
            .and_then(|()| self.to.flush())
            .map_err(|_| "the gateway session closed".to_string())?;
        let mut line = Vec::new();
        let read = (&mut self.from)
            .take(MAX_GATEWAY_ANSWER)
            .read_until(b'\n', &mut line);
        match read {
            Ok(n) if n > 0 && line.ends_with(b"\n") => {}
            _ => return Err("the gateway session closed or answered over 1 MiB".into()),
        }
        let answer: GatewayAnswer = serde_json::from_slice(&line)
            .map_err(|_| "an unreadable gateway answer".to_string())?;
        if let Some(cpu) = answer.cpu_s.filter(|c| c.is_finite() && *c >= 0.0) {
            self.cpu_s = Some((cpu * 1e6).round() / 1e6);
        }
        Ok(crate::cluster_watch::gateway_counters(&answer.gateways))
    }
}
