//! `iperf3`: network throughput between the hosts of `on:`. The stage
//! orchestrates the hosts itself (`per_host: false`): for each measured link
//! it starts a one-off server (`iperf3 -s -1`) on the server host, waits
//! until it listens, runs the client (`iperf3 -c ... -J`) on the client host,
//! and reaps the server. Links are measured one after the other, so they do
//! not share the hosts' bandwidth or CPU.
//!
//! Patterns: `pair` (the server and the first other host), `all-to-one`
//! (every other host to the server), `mesh` (every ordered pair of hosts;
//! each host serves on its own port, `port + its index in on:`).
//!
//! iperf3 -J exits 0 on "Connection refused" and reports it in an `error`
//! field: that is a failure naming both hosts, never a zero measurement.

use std::time::Duration;

use pipeline_model::{Aggregate, Direction, Metric, Series, unit};
use pipeline_stage_api::context::{Background, StageContext};
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::hosts::Host;
use pipeline_stage_api::metric::{MetricDecl, adopt_all};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{command_error, ensure_ok, shell, slug};

pub struct Iperf3;

/// What iperf3 -J reports of a TCP test (labels `client`, `server`).
pub const METRICS: [MetricDecl; 2] = [
    MetricDecl::rate(
        "bits_per_second",
        unit::BITS_PER_S,
        "Throughput, labels client, server and side (receiver is the headline, sender).",
    )
    .headline(),
    MetricDecl::declare(
        "retransmits",
        unit::COUNT,
        Direction::Lower,
        Aggregate::Sum,
        "TCP retransmits (sender).",
    ),
];

/// One measured link.
#[derive(Debug, Clone, PartialEq)]
struct Link {
    client: Host,
    server: Host,
    /// The address the server binds to and the client connects to.
    bind: String,
    port: u16,
}

/// `with:` of an `iperf3` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// pair: the server and the first other host; all-to-one: every other host to the server; mesh: every ordered pair of hosts.
    #[serde(default)]
    pub pattern: Pattern,
    /// The server host (a name from `on:`); default the first one (pair, all-to-one).
    #[serde(default)]
    pub server: Option<String>,
    /// Address the server binds to and clients connect to (e.g. the cluster network address); default the server's inventory address, 127.0.0.1 for this machine. Not with mesh.
    #[serde(default)]
    pub bind: Option<String>,
    /// Duration of each test (iperf3 -t).
    #[serde(default = "five")]
    pub seconds: i64,
    /// Parallel streams (iperf3 -P).
    #[serde(default = "one")]
    pub parallel: i64,
    /// Server port; in a mesh host i serves on port + i.
    #[serde(default = "default_port")]
    pub port: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    #[default]
    Pair,
    AllToOne,
    Mesh,
}

impl Pattern {
    fn as_str(self) -> &'static str {
        match self {
            Pattern::Pair => "pair",
            Pattern::AllToOne => "all-to-one",
            Pattern::Mesh => "mesh",
        }
    }
}

fn five() -> i64 {
    5
}

fn one() -> i64 {
    1
}

fn default_port() -> i64 {
    5201
}

impl Config {
    fn server(&self, link: &Link, pid_file: &str) -> CommandSpec {
        CommandSpec::new(vec![
            "iperf3".into(),
            "-s".into(),
            "-B".into(),
            link.bind.clone(),
            "-p".into(),
            link.port.to_string(),
            "-1".into(),
            "-I".into(),
            pid_file.into(),
        ])
        // A server whose client never comes must not stay behind.
        .timeout(Duration::from_secs(self.seconds as u64 + 60))
    }

    fn client(&self, link: &Link) -> CommandSpec {
        CommandSpec::new(vec![
            "iperf3".into(),
            "-c".into(),
            link.bind.clone(),
            "-p".into(),
            link.port.to_string(),
            "-t".into(),
            self.seconds.to_string(),
            "-P".into(),
            self.parallel.to_string(),
            "-J".into(),
            "--connect-timeout".into(),
            "5000".into(),
        ])
        .timeout(Duration::from_secs(self.seconds as u64 + 60))
    }
}

/// Where a host's server binds by default: its inventory address, or
/// 127.0.0.1 for this machine.
fn default_bind(host: &Host) -> String {
    host.address.clone().unwrap_or_else(|| "127.0.0.1".into())
}

/// The links a pattern measures, in order.
fn links(config: &Config, targets: &[Host]) -> Result<Vec<Link>, String> {
    let names = || {
        targets
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let base = config.port;
    let port =
        |i: usize| u16::try_from(base + i as i64).map_err(|_| "port out of range".to_string());
    // One host (the default, this machine): client and server both on it,
    // over its address (loopback locally) — the host's own network stack.
    if let [only] = targets {
        return Ok(vec![Link {
            client: only.clone(),
            server: only.clone(),
            bind: config.bind.clone().unwrap_or_else(|| default_bind(only)),
            port: port(0)?,
        }]);
    }
    if targets.is_empty() {
        return Err(format!("iperf3 needs hosts in `on:` (got: {})", names()));
    }
    if config.pattern == Pattern::Mesh {
        let mut out = Vec::new();
        for (i, server) in targets.iter().enumerate() {
            for client in targets.iter().filter(|c| c.name != server.name) {
                out.push(Link {
                    client: client.clone(),
                    server: server.clone(),
                    bind: default_bind(server),
                    port: port(i)?,
                });
            }
        }
        return Ok(out);
    }
    let server = match config.server.as_deref() {
        Some(name) => targets.iter().find(|h| h.name == name).ok_or_else(|| {
            format!(
                "server `{name}` is not one of the stage's hosts ({})",
                names()
            )
        })?,
        None => &targets[0],
    };
    let bind = config.bind.clone().unwrap_or_else(|| default_bind(server));
    let clients = targets.iter().filter(|c| c.name != server.name);
    let clients: Vec<&Host> = if config.pattern == Pattern::Pair {
        clients.take(1).collect()
    } else {
        clients.collect()
    };
    clients
        .into_iter()
        .map(|client| {
            Ok(Link {
                client: client.clone(),
                server: server.clone(),
                bind: bind.clone(),
                port: port(0)?,
            })
        })
        .collect()
}

/// Waits until something listens on TCP port `$1` (from /proc/net/tcp and
/// tcp6, so it needs no ss/netstat), up to 10 s.
const WAIT_LISTENING: &str = "p=$(printf '%04X' \"$1\"); i=0; while [ $i -lt 100 ]; do \
     if grep -qE \"^ *[0-9]+: [0-9A-F]+:$p [0-9A-F]+:0000 0A \" /proc/net/tcp /proc/net/tcp6 2>/dev/null; \
     then exit 0; fi; i=$((i+1)); sleep 0.1; done; \
     echo \"nothing listens on port $1 after 10 s\" >&2; exit 1";

/// Kills the server of this run by its pid file (iperf3 removes it on exit).
const KILL_BY_PIDFILE: &str =
    "if [ -f \"$1\" ]; then kill \"$(cat \"$1\")\" 2>/dev/null; rm -f -- \"$1\"; fi; true";

impl TypedStage for Iperf3 {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "iperf3",
            summary: "iperf3 TCP throughput between the hosts of `on:` (pair, all-to-one or mesh), one link at a time.",
            per_host: false,
            requires: vec!["iperf3"],
            outputs: Vec::new(),
            metrics: METRICS.to_vec(),
        }
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if config.seconds < 1 {
            p.push(("seconds".into(), "must be at least 1".into()));
        }
        if !(1..=128).contains(&config.parallel) {
            p.push(("parallel".into(), "must be between 1 and 128".into()));
        }
        if !(1..=65000).contains(&config.port) {
            p.push(("port".into(), "must be between 1 and 65000".into()));
        }
        if config.pattern == Pattern::Mesh {
            for (name, given) in [("bind", &config.bind), ("server", &config.server)] {
                if given.is_some() {
                    p.push((
                        name.into(),
                        "does not apply to a mesh: every host serves, on its own address".into(),
                    ));
                }
            }
        }
        p
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        let server = config.server.as_deref().unwrap_or("<first host of on:>");
        let bind = config.bind.as_deref().unwrap_or("<server address>");
        let link = Link {
            client: Host::local(),
            server: Host::local(),
            bind: bind.into(),
            port: config.port as u16,
        };
        let pattern = config.pattern.as_str();
        vec![
            Action::note(format!(
                "{pattern}: one link at a time{}",
                if pattern == "mesh" {
                    "; every host serves on its own address, port + its index".to_string()
                } else {
                    format!("; server {server}")
                }
            )),
            Action::command(
                "server (one-off, on the server host)",
                config
                    .server(&link, "/tmp/pipeline-iperf3-<run id>-<port>.pid")
                    .argv,
            ),
            Action::command("client (on each client host)", config.client(&link).argv),
        ]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let links = links(config, &ctx.targets).map_err(StageError::failed)?;
        let mut output = StageOutput::default();
        for link in &links {
            let (metrics, series) = measure(ctx, config, link)?;
            output.metrics.extend(metrics);
            output.series.extend(series);
        }
        Ok(output)
    }
}

/// One link: server up, client run, server reaped (killed on any failure).
fn measure(
    ctx: &mut StageContext,
    config: &Config,
    link: &Link,
) -> Result<(Vec<Metric>, Vec<Series>), StageError> {
    let what = format!(
        "iperf3 from {} to {} ({}:{})",
        link.client.name, link.server.name, link.bind, link.port
    );
    let pid_file = format!(
        "/tmp/pipeline-iperf3-{}-{}.pid",
        slug(&ctx.run_id),
        link.port
    );
    let server_spec = config.server(link, &pid_file);
    let server = ctx.spawn_on(
        &link.server,
        &format!("iperf3-server-{}", slug(&link.server.name)),
        &server_spec,
    )?;
    let ran = client_run(ctx, config, link, &what);
    let (metrics, series) = match ran {
        Ok(found) => found,
        Err(e) => {
            stop_server(ctx, link, server, &pid_file);
            return Err(e);
        }
    };
    let out = ctx
        .wait(server)
        .map_err(|e| StageError::failed(format!("{what}: the server did not finish: {e}")))?;
    if !out.success() {
        return Err(StageError::failed(format!(
            "{what}: the server on {} failed: {}",
            link.server.name,
            command_error(&link.server, &server_spec, &out)
        )));
    }
    Ok((metrics, series))
}

fn client_run(
    ctx: &mut StageContext,
    config: &Config,
    link: &Link,
    what: &str,
) -> Result<(Vec<Metric>, Vec<Series>), StageError> {
    let wait = shell(WAIT_LISTENING, &[&link.port.to_string()]).timeout(Duration::from_secs(30));
    let out = ctx.run_on(
        &link.server,
        &format!("wait-listening-{}", link.port),
        &wait,
    )?;
    if !out.success() {
        return Err(StageError::failed(format!(
            "{what}: the server on {} is not listening: {}",
            link.server.name,
            out.tail()
        )));
    }
    let spec = config.client(link);
    let label = format!(
        "iperf3-{}-to-{}",
        slug(&link.client.name),
        slug(&link.server.name)
    );
    let out = ctx.run_on(&link.client, &label, &spec)?;
    // -J: a refused connection is exit 0 with an `error` field; the parser
    // turns it into an error. A non-zero exit without JSON is an error too.
    let measured = pipeline_parsers::iperf3::parse_json(out.whole_stdout(&spec.display())?);
    let measurement = match measured {
        Ok(m) if out.success() => m,
        Ok(_) => return Err(command_error(&link.client, &spec, &out)),
        Err(e) if out.success() || out.stdout.contains('{') => {
            return Err(StageError::failed(format!("{what} failed: {e}")));
        }
        Err(_) => {
            let out = ensure_ok(&link.client, &spec, out)?;
            return Err(StageError::failed(format!(
                "{what}: no iperf3 result: {}",
                out.tail()
            )));
        }
    };
    let label_link = |m: Metric| {
        m.label("client", link.client.name.as_str())
            .label("server", link.server.name.as_str())
    };
    let metrics = adopt_all("iperf3", &METRICS, measurement.metrics)?
        .into_iter()
        .map(label_link)
        .collect();
    let series = measurement
        .series
        .into_iter()
        .map(|mut series| {
            series.name = format!(
                "{}-{}-to-{}",
                series.name, link.client.name, link.server.name
            );
            series
                .labels
                .insert("client".into(), link.client.name.clone());
            series
                .labels
                .insert("server".into(), link.server.name.clone());
            series
        })
        .collect();
    Ok((metrics, series))
}

/// Stops the local end (the process or its ssh) and, on a remote host, the
/// server itself by its pid file: killing ssh does not kill the remote process.
fn stop_server(ctx: &mut StageContext, link: &Link, server: Background, pid_file: &str) {
    let _ = ctx.stop(server);
    if !link.server.is_local() {
        let kill = shell(KILL_BY_PIDFILE, &[pid_file]).timeout(Duration::from_secs(30));
        let _ = ctx.run_tidy_on(&link.server, &format!("stop-server-{}", link.port), &kill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_stage_api::stage::Stage;
    use pipeline_stage_api::typed::Typed;
    use serde_json::json;

    fn host(name: &str, address: &str) -> Host {
        Host {
            name: name.into(),
            address: Some(address.into()),
            ..Host::local()
        }
    }

    fn params(v: serde_json::Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    fn shape(links: &[Link]) -> Vec<String> {
        links
            .iter()
            .map(|l| format!("{}->{}@{}:{}", l.client.name, l.server.name, l.bind, l.port))
            .collect()
    }

    /// What iperf3 -J prints of real TCP tests (one and two streams) is
    /// what the stage declares.
    #[test]
    fn what_iperf3_prints_is_declared() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, text) in crate::parser_fixtures("iperf3-3.12-tcp") {
            if !name.ends_with(".json") {
                continue;
            }
            let m = pipeline_parsers::iperf3::parse_json(&text).unwrap();
            let adopted = adopt_all("iperf3", &METRICS, m.metrics.clone()).unwrap();
            assert_eq!(adopted, m.metrics, "{name}");
            seen.extend(adopted.into_iter().map(|m| m.name));
        }
        assert!(METRICS.iter().all(|d| seen.contains(&*d.name)));
    }

    #[test]
    fn patterns() {
        let hosts = [
            host("n1", "10.0.0.1"),
            host("n2", "10.0.0.2"),
            host("n3", "10.0.0.3"),
        ];
        let pair = links(&params(json!({})), &hosts).unwrap();
        assert_eq!(shape(&pair), ["n2->n1@10.0.0.1:5201"]);
        let to_one = links(
            &params(json!({"pattern": "all-to-one", "server": "n2", "bind": "192.168.1.2"})),
            &hosts,
        )
        .unwrap();
        assert_eq!(
            shape(&to_one),
            ["n1->n2@192.168.1.2:5201", "n3->n2@192.168.1.2:5201"]
        );
        let mesh = links(
            &params(json!({"pattern": "mesh", "port": 6000})),
            &hosts[..2],
        )
        .unwrap();
        assert_eq!(
            shape(&mesh),
            ["n2->n1@10.0.0.1:6000", "n1->n2@10.0.0.2:6001"]
        );
        let local = links(&params(json!({})), &[Host::local(), host("n2", "10.0.0.2")]).unwrap();
        assert_eq!(shape(&local), ["n2->local@127.0.0.1:5201"]);
        let one = links(&params(json!({})), &hosts[..1]).unwrap();
        assert_eq!(shape(&one), ["n1->n1@10.0.0.1:5201"]);
        let lo = links(&params(json!({})), &[Host::local()]).unwrap();
        assert_eq!(shape(&lo), ["local->local@127.0.0.1:5201"]);
        let e = links(&params(json!({"server": "n9"})), &hosts).unwrap_err();
        assert!(
            e.contains("server `n9` is not one of the stage's hosts (n1, n2, n3)"),
            "{e}"
        );
    }

    #[test]
    fn commands() {
        let s = params(json!({"seconds": 3, "parallel": 2}));
        let link = Link {
            client: host("a", "x"),
            server: host("b", "y"),
            bind: "y".into(),
            port: 5202,
        };
        assert_eq!(
            s.server(&link, "/tmp/p.pid").argv.join(" "),
            "iperf3 -s -B y -p 5202 -1 -I /tmp/p.pid"
        );
        assert_eq!(
            s.client(&link).argv.join(" "),
            "iperf3 -c y -p 5202 -t 3 -P 2 -J --connect-timeout 5000"
        );
        assert!(!Typed(Iperf3).describe().per_host);
        assert!(
            Iperf3
                .check(&params(json!({"pattern": "mesh", "bind": "1.2.3.4"})))
                .iter()
                .any(|(n, _)| n == "bind")
        );
    }

    #[test]
    fn waits_for_a_real_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let ok = std::process::Command::new("sh")
            .args(["-c", WAIT_LISTENING, "sh", &port])
            .status()
            .unwrap();
        assert!(ok.success());
        drop(l);
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port().to_string();
        drop(free);
        let script = WAIT_LISTENING.replace("-lt 100", "-lt 2");
        let out = std::process::Command::new("sh")
            .args(["-c", &script, "sh", &port])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("nothing listens on port"));
    }
}
