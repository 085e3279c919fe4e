//! Live progress: a spinner per stage with elapsed time on a terminal, plain
//! timestamped lines otherwise (CI logs, pipes). Everything shown passes
//! through [`crate::terminal`]: stages and plugins write these texts, and
//! an escape sequence in one could erase or forge lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

pub enum Progress {
    Terminal(MultiProgress),
    Lines,
    Quiet,
}

pub enum StageProgress {
    Spinner(ProgressBar),
    Lines(String),
    Quiet,
}

impl Progress {
    /// Spinners when stdout is a terminal, lines otherwise.
    pub fn auto() -> Self {
        if std::io::stdout().is_terminal() {
            Progress::Terminal(MultiProgress::new())
        } else {
            Progress::Lines
        }
    }

    pub fn line(&self, text: &str) {
        let text = crate::terminal::text(text);
        match self {
            Progress::Terminal(mp) => mp.suspend(|| println!("{text}")),
            Progress::Lines => println!("{} {text}", timestamp()),
            Progress::Quiet => {}
        }
    }

    pub fn start(&self, id: &str, plugin: &str) -> StageProgress {
        let (id, plugin) = (crate::terminal::line(id), crate::terminal::line(plugin));
        match self {
            Progress::Terminal(mp) => {
                let bar = mp.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {prefix} {wide_msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_prefix(format!("{id} ({plugin})"));
                bar.enable_steady_tick(Duration::from_millis(120));
                StageProgress::Spinner(bar)
            }
            Progress::Lines => {
                println!("{} start {id} ({plugin})", timestamp());
                StageProgress::Lines(id)
            }
            Progress::Quiet => StageProgress::Quiet,
        }
    }
}

impl StageProgress {
    pub fn message(&self, text: &str) {
        let text = crate::terminal::line(text);
        match self {
            StageProgress::Spinner(bar) => bar.set_message(text),
            StageProgress::Lines(id) => println!("{}   {id}: {text}", timestamp()),
            StageProgress::Quiet => {}
        }
    }

    pub fn finish(&self, line: &str) {
        let line = crate::terminal::text(line);
        match self {
            StageProgress::Spinner(bar) => {
                bar.finish_and_clear();
                println!("{line}");
            }
            StageProgress::Lines(_) => println!("{} {line}", timestamp()),
            StageProgress::Quiet => {}
        }
    }
}

fn timestamp() -> String {
    chrono::Utc::now().format("%H:%M:%S").to_string()
}
