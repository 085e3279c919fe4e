//! `hostile-env`: runs `argv` with the variables `env` (`NAME=value` each)
//! set, through the host's `exec`. The runner's tests use it to show that a
//! plugin sets only the variables the pipeline grants, and that a granted
//! program starts from a minimal environment, locally and over SSH.

use pipeline_plugin_sdk::v0_1::*;

struct HostileEnv;

impl Plugin for HostileEnv {
    fn describe() -> Description {
        Description::new(
            "hostile-env",
            "0.1.0",
            "Test plugin: runs a command with the environment variables it is given",
        )
        .param(ParamSpec::required(
            "argv",
            ParamType::list_of(ScalarType::Text),
            "the command",
        ))
        .param(ParamSpec::with_default(
            "env",
            ParamType::list_of(ScalarType::Text),
            Value::TextList(Vec::new()),
            "`NAME=value` for each variable to set (split at the first `=`)",
        ))
        .output("stdout", "what the command printed")
        .capability(Capability::Exec)
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        let env = params
            .strings("env")
            .into_iter()
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (pair, String::new()),
            })
            .collect();
        let out = host.exec_command(&Command {
            argv: params.strings("argv"),
            env,
            timeout: None,
            label: Some("command".into()),
        })?;
        Ok(Output::new().output("stdout", Value::Text(out.stdout)))
    }
}

export_plugin!(HostileEnv);
