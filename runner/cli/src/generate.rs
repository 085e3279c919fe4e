//! `pipeline generate man|completions`: the man pages and shell completions
//! the Debian package installs (scripts/build-deb.sh), made from the same
//! clap definition the binary parses with, so they cannot drift from it.

use std::fs;
use std::io::Write;
use std::path::Path;

use clap_complete::Shell;

use crate::error::CliError;

/// One page per command, as clap_mangen renders them: `pipeline.1`,
/// `pipeline-run.1`, `pipeline-plugins-push.1`. A single page would list
/// every subcommand's options in one long OPTIONS section without saying
/// which command takes which; per-command pages are what `man pipeline-run`
/// (and git's, cargo's convention) leads people to. Hidden commands (the
/// runner's own `worker`, `client-exec`) get no page.
///
/// Without `out` only the top page goes to stdout (a man page stream is one
/// page); with it every page is written there.
pub fn man(cmd: clap::Command, out: Option<&Path>) -> Result<(), CliError> {
    let mut cmd = cmd;
    // Gives subcommands their display names (`pipeline-run`): the page names.
    cmd.build();
    match out {
        None => {
            let mut page = Vec::new();
            render(&cmd, &mut page)?;
            write_stdout(&page)
        }
        Some(dir) => {
            fs::create_dir_all(dir)
                .map_err(|e| CliError::failed(format!("cannot create {}: {e}", dir.display())))?;
            let mut pages = Vec::new();
            collect(&cmd, &mut pages);
            for page in pages {
                let name = page.get_display_name().unwrap_or(page.get_name());
                let path = dir.join(format!("{name}.1"));
                let mut text = Vec::new();
                render(page, &mut text)?;
                fs::write(&path, text).map_err(|e| {
                    CliError::failed(format!("cannot write {}: {e}", path.display()))
                })?;
                println!("{}", path.display());
            }
            Ok(())
        }
    }
}

/// The completion script for `shell`, on stdout.
pub fn completions(mut cmd: clap::Command, shell: Shell) -> Result<(), CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "pipeline", &mut script);
    write_stdout(&script)
}

/// `cmd` and every visible subcommand below it, parents first.
fn collect<'a>(cmd: &'a clap::Command, pages: &mut Vec<&'a clap::Command>) {
    pages.push(cmd);
    for sub in cmd.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            collect(sub, pages);
        }
    }
}

fn render(cmd: &clap::Command, out: &mut Vec<u8>) -> Result<(), CliError> {
    clap_mangen::Man::new(cmd.clone())
        .render(out)
        .map_err(|e| CliError::failed(format!("cannot render the man page: {e}")))
}

fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::failed(format!("cannot write to stdout: {e}")))
}
