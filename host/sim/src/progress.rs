//! A progress bar on stderr for long simulations: redrawn in place on a terminal,
//! a line per tenth of the work otherwise (CI logs), and silent with `--quiet`.
//!
//! Owns: drawing. Does not own what is counted.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Counts units of work and shows how far along a run is.
#[derive(Debug)]
pub struct Bar {
    label: String,
    total: u64,
    started: Instant,
    tty: bool,
    quiet: bool,
    last_decile: u64,
}

impl Bar {
    /// A bar for `total` units.
    pub fn new(label: &str, total: u64, quiet: bool) -> Self {
        Self {
            label: label.to_string(),
            total: total.max(1),
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            quiet,
            last_decile: 0,
        }
    }

    /// Shows `done` of the total, with `note` (e.g. the virtual time reached).
    pub fn set(&mut self, done: u64, note: &str) {
        if self.quiet {
            return;
        }
        let done = done.min(self.total);
        let frac = done as f64 / self.total as f64;
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = if done > 0 {
            elapsed / frac - elapsed
        } else {
            0.0
        };
        let width = 30;
        let filled = (frac * width as f64).round() as usize;
        let line = format!(
            "{} [{}{}] {done}/{} {:>3.0}% {:.0}s elapsed, ~{:.0}s left {note}",
            self.label,
            "=".repeat(filled),
            " ".repeat(width - filled),
            self.total,
            frac * 100.0,
            elapsed,
            eta
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            if done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let decile = done * 10 / self.total;
            if decile > self.last_decile {
                self.last_decile = decile;
                let _ = writeln!(err, "{line}");
            }
        }
    }
}
