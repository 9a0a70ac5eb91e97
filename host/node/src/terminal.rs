//! The client's terminal for `gantry run` (like `srun --pty` or `ssh -t`): its size, raw mode
//! while a job's terminal is in use (every key goes to the job, which echoes it; the local
//! terminal is given back as it was, whatever way the client ends), and counting window-size
//! changes (SIGWINCH) so the job's terminal can follow.
//!
//! Owns these `unsafe` blocks. Does not own sending anything (`gantry-cli`'s `run_cli`).

use std::sync::atomic::{AtomicU32, Ordering};

/// The size (lines, columns) of the terminal on `fd`, if it is one.
pub fn size(fd: i32) -> Option<(u16, u16)> {
    // SAFETY: all-zero is a valid `winsize`.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one `winsize` into `ws`, which lives for the call.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// The terminal on `fd` in raw mode until this is dropped.
pub struct RawMode {
    fd: i32,
    saved: libc::termios,
}

impl RawMode {
    /// Puts the terminal on `fd` in raw mode (no echo, no line editing, no signals from
    /// keys; output untouched).
    pub fn enter(fd: i32) -> std::io::Result<Self> {
        // SAFETY: all-zero is a valid `termios` for tcgetattr to fill.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `saved`, which lives for the call.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut raw = saved;
        // SAFETY: cfmakeraw only edits the struct it is given.
        unsafe { libc::cfmakeraw(&mut raw) };
        // Keep the output's newline translation: the client's own messages stay readable.
        raw.c_oflag |= libc::OPOST | libc::ONLCR;
        // SAFETY: tcsetattr reads `raw`, which lives for the call.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: tcsetattr reads `saved`, which lives for the call.
        unsafe {
            libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved);
        }
    }
}

static WINDOW_CHANGES: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_window_change(_: libc::c_int) {
    WINDOW_CHANGES.fetch_add(1, Ordering::SeqCst);
}

/// From now on, SIGWINCH only counts: see [`window_changes`].
pub fn count_window_changes() {
    // SAFETY: the handler only increments an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGWINCH,
            count_window_change as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// How many window-size changes arrived since [`count_window_changes`].
pub fn window_changes() -> u32 {
    WINDOW_CHANGES.load(Ordering::SeqCst)
}
