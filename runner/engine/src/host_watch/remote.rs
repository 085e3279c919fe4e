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

/// An open session with a host's sampling shell.
pub struct Session {
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    /// The `ssh` client, also held by the runner to kill it at the stage's end.
    pub child: Arc<Mutex<Child>>,
    /// Link speeds and shaping the last answer gave.
    pub rates: BTreeMap<String, procfs::LinkRate>,
    pub host: String,
    /// The speeds the inventory declares for its interfaces, bits a second.
    declared: BTreeMap<String, f64>,
}

impl Session {
    pub fn open(host: &Host) -> Result<Session, String> {
        let mut argv = host.ssh_argv();
        argv.push(format!(
            "sh -c {}",
            pipeline_stage_api::exec::shell_quote(&script())
        ));
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start ssh: {e}"))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("ssh has no stdin or stdout".into());
        };
        Ok(Session {
            to,
            from: BufReader::new(from),
            child: Arc::new(Mutex::new(child)),
            rates: BTreeMap::new(),
            host: host.name.clone(),
            declared: host.link_bits.clone(),
        })
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
