//! The CLI's one error edge. Every command returns `Result<(), CliError>`;
//! `main` alone prints the error (to stderr, after whatever the command
//! printed on stdout) and turns it into the exit code:
//!
//! | exit | meaning                                                         |
//! |------|-----------------------------------------------------------------|
//! | 0    | success                                                         |
//! | 1    | the work failed: a run, a cleanup, the sandbox, a registry, a regression |
//! | 2    | invalid input: a suite, an argument, a results file             |
//! | 130  | interrupted                                                     |

use pipeline_engine::diagnostic::Diagnostics;

pub const EXIT_RUN_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a command did not succeed, and what to print about it.
#[derive(Debug)]
pub enum CliError {
    /// Input that is wrong, with where (`file:line:col`) and a hint for each
    /// problem, all of them at once. `context` is one line printed before them.
    Diagnostics {
        context: Option<String>,
        diagnostics: Diagnostics,
    },
    /// Input that is wrong, in one message.
    Invalid(Problem),
    /// Several inputs that are wrong (arguments, files), one message each, all at once.
    InvalidEach(Vec<String>),
    /// The work failed, in one message.
    Failed(Problem),
    /// The work failed, said as diagnostics with their hints (a registry's answer).
    FailedDiagnostics(Diagnostics),
    /// The work failed and its output so far says how (the run's stages,
    /// `sandbox status`); `notes` are printed after it (a regression, a
    /// comparison that could not be made).
    Ended {
        notes: Vec<String>,
        interrupted: bool,
    },
    /// A program this process became ended with `code` (`pipeline worker`,
    /// `pipeline client-exec`); `message`, if any, says why.
    Exited { code: u8, message: Option<String> },
}

/// One error message and its hints (`= help: ...` lines).
#[derive(Debug)]
pub struct Problem {
    pub message: String,
    pub help: Vec<String>,
}

impl CliError {
    pub fn invalid(message: impl Into<String>) -> CliError {
        CliError::Invalid(Problem::new(message))
    }

    pub fn failed(message: impl Into<String>) -> CliError {
        CliError::Failed(Problem::new(message))
    }

    /// The run ended without success; nothing more to say than it did.
    pub fn ended() -> CliError {
        CliError::Ended {
            notes: Vec::new(),
            interrupted: false,
        }
    }

    /// The same error with a hint printed under it (for the one-message kinds).
    pub fn with_help(mut self, help: impl Into<String>) -> CliError {
        if let CliError::Invalid(p) | CliError::Failed(p) = &mut self {
            p.help.push(help.into());
        }
        self
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Diagnostics { .. } | CliError::Invalid(_) | CliError::InvalidEach(_) => {
                EXIT_INVALID
            }
            CliError::Failed(_) | CliError::FailedDiagnostics(_) => EXIT_RUN_FAILED,
            CliError::Ended { interrupted, .. } => {
                if *interrupted {
                    EXIT_INTERRUPTED
                } else {
                    EXIT_RUN_FAILED
                }
            }
            CliError::Exited { code, .. } => *code,
        }
    }

    /// What `main` prints on stderr.
    pub fn render(&self) -> String {
        match self {
            CliError::Diagnostics {
                context,
                diagnostics,
            } => {
                let mut s = context
                    .as_ref()
                    .map(|c| format!("error: {c}\n"))
                    .unwrap_or_default();
                s.push_str(&render_diagnostics(diagnostics));
                s
            }
            CliError::Invalid(p) | CliError::Failed(p) => p.render(),
            CliError::FailedDiagnostics(d) => render_diagnostics(d),
            CliError::InvalidEach(messages) => {
                messages.iter().map(|m| format!("error: {m}\n")).collect()
            }
            CliError::Ended { notes, .. } => notes.iter().map(|n| format!("{n}\n")).collect(),
            CliError::Exited { message, .. } => message
                .as_ref()
                .map(|m| format!("error: {m}\n"))
                .unwrap_or_default(),
        }
    }
}

impl Problem {
    fn new(message: impl Into<String>) -> Problem {
        Problem {
            message: message.into(),
            help: Vec::new(),
        }
    }

    fn render(&self) -> String {
        let mut s = format!("error: {}\n", self.message);
        for h in &self.help {
            s.push_str(&format!("  = help: {h}\n"));
        }
        s
    }
}

impl From<Diagnostics> for CliError {
    fn from(diagnostics: Diagnostics) -> CliError {
        CliError::Diagnostics {
            context: None,
            diagnostics,
        }
    }
}

/// Diagnostics for the terminal, with their count. They quote plugins (a
/// `check` problem) and suites: no escape sequence reaches the terminal.
pub fn render_diagnostics(d: &Diagnostics) -> String {
    let n = d.len();
    format!(
        "{}\n{n} error{} found\n",
        pipeline_engine::terminal::text(&d.to_string()),
        if n == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_engine::diagnostic::Diagnostic;

    #[test]
    fn each_kind_has_its_exit_code() {
        assert_eq!(CliError::invalid("x").exit_code(), 2);
        assert_eq!(CliError::failed("x").exit_code(), 1);
        assert_eq!(CliError::ended().exit_code(), 1);
        let interrupted = CliError::Ended {
            notes: vec![],
            interrupted: true,
        };
        assert_eq!(interrupted.exit_code(), 130);
        let d: CliError = Diagnostics::from(Diagnostic::error("bad")).into();
        assert_eq!(d.exit_code(), 2);
        let exited = CliError::Exited {
            code: 127,
            message: None,
        };
        assert_eq!(exited.exit_code(), 127);
    }

    #[test]
    fn a_message_is_printed_with_its_hints() {
        let e = CliError::failed("no sandbox in /tmp/x")
            .with_help("start one with `pipeline sandbox up`");
        assert_eq!(
            e.render(),
            "error: no sandbox in /tmp/x\n  = help: start one with `pipeline sandbox up`\n"
        );
    }

    #[test]
    fn escape_sequences_in_diagnostics_do_not_reach_the_terminal() {
        let d: CliError = Diagnostics::from(Diagnostic::error("bad \x1b[31mred")).into();
        let text = d.render();
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(text.ends_with("1 error found\n"), "{text:?}");
    }
}
