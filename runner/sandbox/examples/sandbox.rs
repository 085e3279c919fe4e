//! Minimal front end for trying the sandbox by hand and for leaving one running:
//!
//! ```text
//! cargo run -p pipeline-sandbox --example sandbox -- up [--dir DIR] [--no-pool-delete]
//!     [--bluestore] [--memstore-bytes N] [--rgw-port P] [--timeout SECS]
//! cargo run -p pipeline-sandbox --example sandbox -- down [--dir DIR] [--keep]
//! cargo run -p pipeline-sandbox --example sandbox -- status [--dir DIR]
//! cargo run -p pipeline-sandbox --example sandbox -- env [--dir DIR]
//! ```
//!
//! The real CLI is `pipeline sandbox …`; this exists so the crate can be used on its own.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pipeline_sandbox::{DEFAULT_BLUESTORE_BYTES, ObjectStore, SandboxOptions};

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let (command, rest) = args
        .split_first()
        .ok_or("usage: sandbox up|down|status|env [options]")?;
    let mut opts = SandboxOptions::default();
    let mut keep = false;
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--dir" => opts.dir = PathBuf::from(value()?),
            "--no-pool-delete" => opts.allow_pool_delete = false,
            "--bluestore" => {
                opts.objectstore = ObjectStore::Bluestore {
                    size: DEFAULT_BLUESTORE_BYTES,
                }
            }
            "--memstore-bytes" => {
                opts.memstore_bytes = value()?.parse().map_err(|e| format!("{arg}: {e}"))?
            }
            "--rgw-port" => opts.rgw_port = value()?.parse().map_err(|e| format!("{arg}: {e}"))?,
            "--timeout" => {
                let secs: u64 = value()?.parse().map_err(|e| format!("{arg}: {e}"))?;
                opts.ready_timeout = Duration::from_secs(secs);
            }
            "--keep" => keep = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    match command.as_str() {
        "up" => {
            let env = pipeline_sandbox::up(&opts, &mut |line| eprintln!("{line}"))
                .map_err(|e| e.to_string())?;
            print!("{}", env.to_shell());
        }
        "down" => {
            let start = Instant::now();
            let report = pipeline_sandbox::down(&opts.dir, keep).map_err(|e| e.to_string())?;
            eprintln!("{report} ({:.1} s)", start.elapsed().as_secs_f64());
        }
        "status" => {
            let status = pipeline_sandbox::status(&opts.dir).map_err(|e| e.to_string())?;
            println!("{status}");
        }
        "env" => {
            let env = pipeline_sandbox::env(&opts.dir).map_err(|e| e.to_string())?;
            print!("{}", env.to_shell());
        }
        other => return Err(format!("unknown command {other} (up|down|status|env)")),
    }
    Ok(())
}
