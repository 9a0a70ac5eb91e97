//! `gantry run [--gpus N] [--time 4h] -- CMD`: an interactive job, like `srun --pty` or a Ray
//! task at a terminal. It submits the job as `interactive`, waits until it starts (showing why
//! it waits), streams its output to this terminal, sends this client's stdin to it (with a
//! terminal of its own when stdin is one, `run_input`), and exits with the job's exit code.
//! While it waits, or without a terminal, the first Ctrl-C goes to the job as SIGINT (a second
//! one cancels it); with a terminal, Ctrl-C is a key the job's terminal turns into SIGINT.
//! When this client goes away, the daemon cancels the job.
//!
//! Owns: the client side of `/v1/jobs/{id}/attach` and `/signal`. Does not own the stream's
//! format (`api::attach`) nor the input (`run_input`).

use crate::cli::Client;
use crate::run_input::{self, InputMode};
use anyhow::{Context, bail};
use gantry_api::views::AttachFrame;
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::time::Duration;

pub use crate::run_spec::{RunArgs, run_body};

/// Runs `gantry run`; returns the process exit code.
pub fn run(client: Arc<Client>, a: &RunArgs) -> anyhow::Result<i32> {
    let mode = InputMode::choose(a.no_stdin, a.no_pty);
    let mut body = run_body(a, client.has_token())?;
    mode.add_to(&mut body);
    let id = client.submit(&body)?.job.id;
    eprintln!("gantry: job {id} submitted");
    gantry_node::sys::count_interrupts();
    let tty = matches!(mode, InputMode::Tty(..));
    if tty {
        gantry_node::terminal::count_window_changes();
    }
    if mode != InputMode::None {
        let client = client.clone();
        std::thread::spawn(move || run_input::pump_stdin(&client, id, mode));
    }
    // Dropping `done` ends the forwarder at once (it waits on it between looks).
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let forwarder = {
        let client = client.clone();
        std::thread::spawn(move || forward_interrupts(&client, id, tty, &finished))
    };
    let result = follow(&client, id, tty);
    drop(done);
    let _ = forwarder.join();
    result
}

/// Sends the job SIGINT on the first Ctrl-C (or cancels it while it waits), cancels it on
/// the second; with a terminal, also sends the terminal's new size when it changes.
fn forward_interrupts(client: &Client, id: u64, tty: bool, done: &std::sync::mpsc::Receiver<()>) {
    let mut handled = 0;
    let mut resized = 0;
    loop {
        if tty {
            resized = run_input::follow_resize(client, id, resized);
        }
        let seen = gantry_node::sys::interrupts();
        if seen > handled {
            handled = seen;
            let signalled = handled == 1 && client.signal(id, "INT").is_ok();
            if signalled {
                eprintln!("\ngantry: sent SIGINT to job {id} (Ctrl-C again cancels it)");
            } else {
                eprintln!("\ngantry: cancelling job {id}");
                if let Err(e) = client.cancel(id) {
                    eprintln!("gantry: {e:#}");
                }
            }
        }
        match done.recv_timeout(Duration::from_millis(50)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// Streams the job until its last frame; returns its exit code.
fn follow(client: &Client, id: u64, tty: bool) -> anyhow::Result<i32> {
    let reader = BufReader::new(client.attach(id)?);
    let mut stdout = std::io::stdout();
    let mut last_reason = String::new();
    // This terminal, raw while the job's terminal is in use; restored when this returns.
    let mut raw = None;
    for line in reader.lines() {
        let line = line.context("the stream from the daemon broke")?;
        let frame: AttachFrame = serde_json::from_str(&line)
            .with_context(|| format!("unexpected line from the daemon: {line}"))?;
        if let Some(out) = &frame.out {
            stdout.write_all(out.as_bytes())?;
            stdout.flush()?;
            continue;
        }
        match frame.state.as_deref() {
            Some("pending") => {
                let reason = frame.reason.unwrap_or_else(|| "waiting".into());
                if reason != last_reason {
                    eprintln!("gantry: job {id} waits: {reason}");
                    last_reason = reason;
                }
            }
            Some("running") if frame.notice.is_some() => {
                // The terminal may be raw: a line of its own, from its first column.
                let notice = frame.notice.as_deref().unwrap_or_default();
                eprint!("\r\ngantry: job {id}: {notice}\r\n");
            }
            Some("running") => {
                let node = frame.node.as_deref().unwrap_or("?");
                eprintln!("gantry: job {id} running on {node}");
                if tty && raw.is_none() {
                    raw = Some(
                        gantry_node::terminal::RawMode::enter(0)
                            .context("cannot put this terminal in raw mode")?,
                    );
                }
            }
            Some(state) => {
                drop(raw.take());
                let code = frame.exit_code.unwrap_or(1);
                if state != "succeeded" {
                    let why = frame.reason.as_deref().unwrap_or(state);
                    eprintln!("gantry: job {id} {state}: {why}");
                }
                return Ok(exit_status(state, code));
            }
            None => {}
        }
    }
    bail!("the daemon closed the stream before job {id} ended")
}

/// The client's exit code: the job's (shell style, 0..=255), 1 if it ended without one.
fn exit_status(state: &str, code: i64) -> i32 {
    match (state, code) {
        ("succeeded", _) => 0,
        (_, c) if (1..=255).contains(&c) => c as i32,
        _ => 1,
    }
}
