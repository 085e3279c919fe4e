//! The lab's network, made with `ip` and `tc`: one bridge in the machine's namespace, one
//! namespace per host with a veth on the bridge, an address from 198.18.0.0/24, no default
//! route, forwarding off, IPv6 off, and the link shaped in both directions.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::link::LinkShape;
use super::plan::{BRIDGE, BRIDGE_ADDRESS, LabHost, NAME_PREFIX, PREFIX_LEN};
use crate::error::SandboxError;
use crate::process;

const STEP: Duration = Duration::from_secs(10);

fn ip(args: &[&str]) -> Result<(), SandboxError> {
    let mut cmd = process::command("ip");
    cmd.args(args);
    process::run_ok(cmd, STEP).map(drop)
}

fn tc(args: &[&str]) -> Result<(), SandboxError> {
    let mut cmd = process::command("tc");
    cmd.args(args);
    process::run_ok(cmd, STEP).map(drop)
}

/// `ip netns exec NS program …`: a command that runs inside host `netns`.
pub(crate) fn in_netns(netns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = process::command("ip");
    cmd.args(["netns", "exec", netns]).arg(program);
    cmd
}

/// The bridge and its address: the machine's own way into the lab.
pub(crate) fn create_bridge() -> Result<(), SandboxError> {
    ip(&["link", "add", BRIDGE, "type", "bridge"])?;
    // Bridged frames skip iptables: a FORWARD policy of DROP (Docker sets one) would
    // otherwise cut the hosts off from each other.
    let _ = ip(&[
        "link",
        "set",
        BRIDGE,
        "type",
        "bridge",
        "nf_call_iptables",
        "0",
    ]);
    ip(&[
        "addr",
        "add",
        &format!("{BRIDGE_ADDRESS}/{PREFIX_LEN}"),
        "dev",
        BRIDGE,
    ])?;
    ip(&["link", "set", BRIDGE, "up"])
}

/// Namespace, veth pair (`pl-NAME` on the bridge, `eth0` inside), address, loopback.
pub(crate) fn create_host(host: &LabHost) -> Result<(), SandboxError> {
    let ns = host.netns.as_str();
    ip(&["netns", "add", ns])?;
    ip(&[
        "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ])?;
    ip(&["link", "set", ns, "master", BRIDGE, "up"])?;
    let address = format!("{}/{PREFIX_LEN}", host.address);
    ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"])?;
    ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    // No forwarding: a host never routes for another. IPv6 off: no link-local
    // addresses, no router solicitations leaving through the bridge.
    let mut sysctl = in_netns(ns, "sysctl");
    sysctl.args([
        "-qw",
        "net.ipv4.ip_forward=0",
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ]);
    process::run_ok(sysctl, STEP).map(drop)
}

/// Whether this kernel has `sch_netem` (the delay qdisc); some (6.18 here) are built
/// without it. Probed on the bridge, then removed again.
pub(crate) fn netem_available() -> bool {
    let ok = tc(&[
        "qdisc", "add", "dev", BRIDGE, "root", "netem", "delay", "1us",
    ])
    .is_ok();
    if ok {
        let _ = tc(&["qdisc", "del", "dev", BRIDGE, "root"]);
    }
    ok
}

/// Shapes both ends of `host`'s link: its egress (`eth0` in the namespace) and its ingress
/// (the bridge-side veth's egress). With `delay`, netem first and the token bucket under it.
pub(crate) fn shape(host: &LabHost, link: &LinkShape, delay: bool) -> Result<(), SandboxError> {
    let rate = link.tc_rate();
    let burst = link.tbf_burst_bytes().to_string();
    let ns = host.netns.as_str();
    for side in [vec![], vec!["-n", ns]] {
        let dev = if side.is_empty() { ns } else { "eth0" };
        let with = |rest: &[&str]| {
            let mut args: Vec<&str> = side.clone();
            args.extend_from_slice(rest);
            tc(&args)
        };
        let tbf = ["tbf", "rate", &rate, "burst", &burst, "latency", "20ms"];
        match link.tc_delay().filter(|_| delay) {
            Some(d) => {
                with(&[
                    "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem", "delay", &d,
                ])?;
                let mut args = vec!["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"];
                args.extend_from_slice(&tbf);
                with(&args)?;
            }
            None => {
                let mut args = vec!["qdisc", "replace", "dev", dev, "root"];
                args.extend_from_slice(&tbf);
                with(&args)?;
            }
        }
    }
    Ok(())
}

/// Processes in `netns` (`ip netns pids`).
pub(crate) fn pids_in(netns: &str) -> Vec<u32> {
    let mut cmd = process::command("ip");
    cmd.args(["netns", "pids", netns]);
    match process::run(cmd, STEP) {
        Ok(out) => out
            .stdout
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Stops everything still running in `netns` (SIGTERM, SIGKILL after `grace`), deletes the
/// namespace and waits until its veth is gone. Returns the processes it had to signal.
pub(crate) fn remove_host(netns: &str, grace: Duration) -> Result<usize, SandboxError> {
    let pids = pids_in(netns);
    for &pid in &pids {
        let _ = crate::pids::send_signal(pid, libc::SIGTERM);
    }
    let start = Instant::now();
    while !pids_in(netns).is_empty() && start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids_in(netns) {
        let _ = crate::pids::send_signal(pid, libc::SIGKILL);
    }
    if namespaces().iter().any(|n| n == netns) {
        ip(&["netns", "del", netns])?;
    }
    // The kernel destroys the pair with the namespace, asynchronously: wait, then
    // delete it ourselves if it is still there (its peer held by a late process).
    let link = Path::new("/sys/class/net").join(netns);
    let start = Instant::now();
    while link.exists() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if link.exists() {
        ip(&["link", "del", netns])?;
    }
    Ok(pids.len())
}

/// Sets the bridge-side end of a host's link up or down (a cut cable).
pub(crate) fn set_link(netns: &str, up: bool) -> Result<(), SandboxError> {
    ip(&["link", "set", netns, if up { "up" } else { "down" }])
}

pub(crate) fn remove_bridge() -> Result<(), SandboxError> {
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        ip(&["link", "del", BRIDGE])?;
    }
    Ok(())
}

/// Network namespaces whose name starts with the lab's prefix.
pub(crate) fn namespaces() -> Vec<String> {
    lab_names_in(Path::new("/run/netns"))
}

/// Interfaces of the machine's namespace whose name starts with the lab's prefix.
pub(crate) fn links() -> Vec<String> {
    lab_names_in(Path::new("/sys/class/net"))
}

/// Sorted names of `dir`'s entries that start with the lab's prefix.
fn lab_names_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(NAME_PREFIX))
        .collect();
    names.sort();
    names
}

/// Whether `address:port` accepts a TCP connection within `timeout`.
pub(crate) fn accepts(address: Ipv4Addr, port: u16, timeout: Duration) -> bool {
    std::net::TcpStream::connect_timeout(&(address, port).into(), timeout).is_ok()
}
