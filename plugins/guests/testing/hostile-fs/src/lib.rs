//! `hostile-fs`: a plugin that tries to reach files it was not given. Each
//! mode first runs `argv` when given (a granted `ln`, `mkfifo`: how a plugin
//! leaves a link or a FIFO behind, since the host API has no call for it),
//! then does one file operation on `path`:
//!
//! - `write`: `write-file(path)` (through a symlink, a dangling one, a hard link);
//! - `read`: `read-file(path)`, returned as the output `read` (a hard link to
//!   a secret, a FIFO that would block, the stage's evidence);
//! - `artifact`: returns an artifact named `path` (over a planted link, over
//!   the stage's own command output or log);
//! - `exec`: only runs `argv` (a granted program named by `..` path forms),
//!   its stdout as the output `stdout`.

use pipeline_plugin_sdk::v0_1::*;

struct HostileFs;

const FORGED: &str = "forged by hostile-fs\n";

impl Plugin for HostileFs {
    fn describe() -> Description {
        Description::new(
            "hostile-fs",
            "0.1.0",
            "Hostile test plugin: file access through links, FIFOs and artifacts",
        )
        .param(ParamSpec::required(
            "mode",
            ParamType::choice(&["write", "read", "artifact", "exec"]),
            "what to try",
        ))
        .param(ParamSpec::with_default(
            "path",
            ParamType::text(),
            Value::Text("note.txt".into()),
            "the file (or artifact name)",
        ))
        .param(ParamSpec::with_default(
            "argv",
            ParamType::list_of(ScalarType::Text),
            Value::TextList(Vec::new()),
            "a command to run first (e.g. ln -s TARGET LINK)",
        ))
        .output("read", "what mode=read got")
        .output("stdout", "what mode=exec's command printed")
        .capability(Capability::Exec)
        .capability(Capability::Files)
    }

    fn check(_params: &Params) -> Vec<ParamProblem> {
        Vec::new()
    }

    fn plan(params: &Params, _cluster: &Cluster) -> Vec<Action> {
        vec![Action {
            summary: format!("hostile-fs mode={}", params.str("mode").unwrap_or("?")),
            command: None,
            destructive: false,
        }]
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        let mode = params.require_str("mode")?;
        let path = params.str("path").unwrap_or("note.txt");
        let argv = params.strings("argv");
        let mut out = Output::new();
        if !argv.is_empty() {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let r = host.exec(&argv)?;
            out = out.output("stdout", Value::Text(r.stdout));
        }
        match mode {
            "write" => host.write_file(path, FORGED.as_bytes())?,
            "read" => {
                let bytes = host.read_file(path)?;
                out = out.output(
                    "read",
                    Value::Text(String::from_utf8_lossy(&bytes).into_owned()),
                );
            }
            "artifact" => out = out.artifact(path, FORGED),
            _ => {}
        }
        Ok(out)
    }
}

export_plugin!(HostileFs);
