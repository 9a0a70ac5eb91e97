//! The input side of `gantry run` (like `srun --pty`): the client's stdin goes to the job's
//! first task through `POST /v1/jobs/{id}/input`, and when stdin is a terminal the job gets a
//! terminal of the same size that follows this one's resizes, while this one is in raw mode
//! (every key, Ctrl-C and Ctrl-D included, goes to the job, which echoes it).
//!
//! Nothing typed is dropped: input sent before the job runs, or more than its task reads at
//! once, is sent again until it is taken or the job ends.
//!
//! Owns: reading stdin, sending it, and the resize messages. Does not own the job's output
//! or the exit code (`run_cli`).

use crate::cli::Client;
use base64::Engine;
use gantry_node::terminal;
use serde_json::{Value, json};
use std::io::Read;
use std::time::Duration;

/// How long to wait before sending again what the task did not take yet.
const RETRY: Duration = Duration::from_millis(20);
/// How long to wait while the job does not run yet or its input is not open yet.
const NOT_READY: Duration = Duration::from_millis(50);

/// The size given to a job's terminal when this one does not say (lines, columns).
const DEFAULT_SIZE: (u16, u16) = (24, 80);

/// How the job reads its input, decided from this client's stdin and the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMode {
    /// Nothing is sent; the job reads `/dev/null`.
    None,
    /// Stdin is sent as bytes; its end closes the job's stdin.
    Pipe,
    /// The job gets a terminal of this size (lines, columns).
    Tty(u16, u16),
}

impl InputMode {
    /// A terminal when stdin and stdout are both terminals (unless `no_pty`); a pipe
    /// otherwise; nothing with `no_stdin`.
    pub fn choose(no_stdin: bool, no_pty: bool) -> Self {
        use std::io::IsTerminal;
        if no_stdin {
            return Self::None;
        }
        let both = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if !both || no_pty {
            return Self::Pipe;
        }
        // A terminal that does not know its size (0 × 0) gets the classic one.
        let (rows, cols) = terminal::size(0).unwrap_or(DEFAULT_SIZE);
        Self::Tty(rows, cols)
    }

    /// The job spec's fields for this mode.
    pub fn add_to(self, body: &mut Value) {
        match self {
            Self::None => {}
            Self::Pipe => body["stdin"] = json!(true),
            Self::Tty(rows, cols) => body["tty"] = json!({"rows": rows, "cols": cols}),
        }
    }
}

/// Sends this client's stdin to job `id` until stdin ends (then the end of input, for a
/// pipe) or sending fails for good.
pub fn pump_stdin(client: &Client, id: u64, mode: InputMode) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if n == 0 {
            if mode == InputMode::Pipe {
                deliver(client, id, &[], true);
            }
            return;
        }
        if !deliver(client, id, &buf[..n], false) {
            return;
        }
    }
}

/// Sends the terminal's new size to job `id` if it changed since `seen` changes; returns the
/// changes seen now.
pub fn follow_resize(client: &Client, id: u64, seen: u32) -> u32 {
    let now = terminal::window_changes();
    if now != seen
        && let Some((rows, cols)) = terminal::size(0)
    {
        let _ = client.input(id, &json!({"resize": {"rows": rows, "cols": cols}}));
    }
    now
}

/// Sends `data` (then the end of input when `eof`) until all is taken; false when the job
/// cannot take input any more.
fn deliver(client: &Client, id: u64, data: &[u8], eof: bool) -> bool {
    let mut rest = data;
    loop {
        let body = json!({
            "data": base64::engine::general_purpose::STANDARD.encode(rest),
            "eof": eof,
        });
        match client.input(id, &body) {
            Ok(n) if n >= rest.len() => return true,
            Ok(n) => {
                rest = &rest[n..];
                std::thread::sleep(RETRY);
            }
            // Not running yet (or any more: then this client ends with the job), or its
            // input opens in a moment.
            Err(e) if e.status() == Some(409) => std::thread::sleep(NOT_READY),
            Err(e) => {
                eprintln!("\ngantry: input for job {id} not delivered: {e}");
                return false;
            }
        }
    }
}
