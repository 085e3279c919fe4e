//! CPU accounting: the client's own process, the radosgw processes of this
//! machine (a gateway on loopback), and the cores the load may keep busy.

/// The CPU used since it was started: the client's own process, and the
/// radosgw processes of this machine when the gateway is on loopback.
pub(super) struct CpuMeter {
    local_gateway: bool,
    client_start: f64,
    gateway_start: Option<f64>,
}

impl CpuMeter {
    pub(super) fn start(local_gateway: bool) -> Self {
        CpuMeter {
            local_gateway,
            client_start: process_cpu_seconds(),
            gateway_start: local_gateway.then(local_gateway_cpu).flatten(),
        }
    }

    /// The same again, from now.
    pub(super) fn restart(&self) -> Self {
        CpuMeter::start(self.local_gateway)
    }

    /// User+system CPU seconds since the start: the client's, and the local
    /// gateway's when there is one.
    pub(super) fn used(&self) -> (f64, Option<f64>) {
        let client = process_cpu_seconds() - self.client_start;
        let gateway = self
            .gateway_start
            .zip(self.local_gateway.then(local_gateway_cpu).flatten())
            .map(|(start, end)| (end - start).max(0.0));
        (client, gateway)
    }
}

/// User+system CPU seconds of every `radosgw` process on this machine.
pub(super) fn local_gateway_cpu() -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let mut total = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        // By the program it runs, not by `comm`: that is the main thread's
        // name, and radosgw 18.2 renames its main thread (`notif-worker0`).
        if !runs_radosgw(&entry.path()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split at the last `)`.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(u), Some(s)) = (fields.get(11), fields.get(12))
            && let (Ok(u), Ok(s)) = (u.parse::<u64>(), s.parse::<u64>())
        {
            total += u + s;
            found = true;
        }
    }
    found.then(|| total as f64 / ticks as f64)
}

/// Whether the process at `/proc/PID` was started as `radosgw` (its argv[0],
/// which any user may read, unlike its `exe` link).
pub(super) fn runs_radosgw(proc_dir: &std::path::Path) -> bool {
    std::fs::read(proc_dir.join("cmdline")).is_ok_and(|cmdline| {
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        argv0.rsplit(|b| *b == b'/').next() == Some(b"radosgw".as_slice())
    })
}

/// This process's resource usage so far (`None` if the kernel refuses).
fn own_usage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage the pointer points to.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: rc == 0: getrusage initialized it (and it was zeroed before).
    (rc == 0).then(|| unsafe { usage.assume_init() })
}

/// User+system CPU seconds of this process so far.
pub(super) fn process_cpu_seconds() -> f64 {
    let Some(usage) = own_usage() else {
        return 0.0;
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The cores a load's runtime may keep busy: its worker threads, at most
/// the machine's.
pub(super) fn usable_cores(worker_threads: u32) -> f64 {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    (worker_threads as usize).min(online) as f64
}
