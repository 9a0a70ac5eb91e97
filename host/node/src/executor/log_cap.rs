//! The size limit of a task's log (`limits.max_log_mib`), kept by the shim: the command's
//! stdout and stderr go to a pipe, and a thread of the shim copies the pipe into the log
//! until the log holds the limit, then writes one line saying so
//! (`gantry: log cut at N MiB; further output discarded`) and reads on without writing, so
//! the command never blocks on a full pipe. A failed write (a full disk) is dropped the same
//! way: the task goes on and its end is still recorded.
//!
//! The copy ends at the pipe's end of file: when the command and every process that
//! inherited its output have closed it. A process the command left behind may hold it open
//! for ever, so once the command is reaped the shim waits at most [`DRAIN_GRACE`] more and
//! then stops copying (what such a process writes later is lost, and its writes fail with
//! `EPIPE` once the shim is gone).
//!
//! Owns: the pipe, the copying thread and the cut line. Does not own opening the log
//! (`shim.rs`) or the setting (`config_limits`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the copy may go on after the command was reaped, for output still in the pipe
/// or written by processes it left behind.
pub(crate) const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How often the copying thread looks whether it was told to stop.
const POLL_MS: libc::c_int = 100;

/// A pipe whose ends are closed on exec (the command gets the write end as its stdout and
/// stderr, which clears that flag on the copies).
pub(crate) fn pipe() -> io::Result<(File, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are new and owned by nobody else.
    let (read, write) = unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((read, write))
}

/// The log with its remaining room.
struct Capped {
    log: File,
    limit: u64,
    left: u64,
    /// The log's last byte, if it has one (read at the start when the log is readable).
    last: Option<u8>,
    cut: bool,
}

impl Capped {
    fn new(log: File, limit: u64) -> Self {
        use std::os::unix::fs::FileExt;
        let used = log.metadata().map_or(0, |m| m.len());
        let mut byte = [0u8; 1];
        let last = used
            .checked_sub(1)
            .and_then(|at| log.read_at(&mut byte, at).ok())
            .filter(|n| *n == 1)
            .map(|_| byte[0]);
        Self {
            log,
            limit,
            left: limit.saturating_sub(used),
            last,
            cut: false,
        }
    }

    fn write(&mut self, mut data: &[u8]) {
        if self.left > 0 && !data.is_empty() {
            let n = data
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX));
            // A failed write (ENOSPC, EIO) is dropped: the command must not block on it.
            let _ = self.log.write_all(&data[..n]);
            self.left -= n as u64;
            self.last = data[..n].last().copied();
            data = &data[n..];
        }
        if !data.is_empty() && !self.cut {
            self.cut = true;
            let newline = if self.last.is_some_and(|b| b != b'\n') {
                "\n"
            } else {
                ""
            };
            let _ = writeln!(self.log, "{newline}{}", cut_line(self.limit));
        }
    }
}

/// The line that ends a log cut at `limit` bytes.
pub(crate) fn cut_line(limit: u64) -> String {
    let size = if limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    };
    format!("gantry: log cut at {size} (limits.max_log_mib); further output discarded")
}

/// A command's output pipe with its copy running: give the command [`Piped::stdio`], then
/// close the shim's own write end with [`Piped::into_copier`].
pub(crate) struct Piped {
    write: OwnedFd,
    copier: Copier,
}

impl Piped {
    /// A pipe whose output is copied into `log` (at most `limit` bytes in the log as a
    /// whole) by a thread started now, before the command is forked.
    pub(crate) fn start(log: &File, limit: u64) -> io::Result<Self> {
        let (read, write) = pipe()?;
        let copier = Copier::start(read, log.try_clone()?, limit)?;
        Ok(Self { write, copier })
    }

    /// The command's stdout and stderr: both the pipe's write end.
    pub(crate) fn stdio(&self) -> io::Result<(Stdio, Stdio)> {
        Ok((
            Stdio::from(self.write.try_clone()?),
            Stdio::from(self.write.try_clone()?),
        ))
    }

    /// Closes the shim's write end (so the copy sees the end of file once the command's
    /// processes have closed theirs) and returns the copy.
    pub(crate) fn into_copier(self) -> Copier {
        self.copier
    }
}

/// The copying thread of one command.
pub(crate) struct Copier {
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    thread: JoinHandle<()>,
}

impl Copier {
    /// Starts copying `pipe` into `log`, at most `limit` bytes in the log as a whole.
    pub(crate) fn start(pipe: File, log: File, limit: u64) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let told = stop.clone();
        let thread = std::thread::Builder::new()
            .name("log-copy".into())
            .spawn(move || {
                copy(&pipe, &mut Capped::new(log, limit), &told);
                let _ = tx.send(());
            })?;
        Ok(Self { stop, done, thread })
    }

    /// Once the command was reaped: lets the copy reach the pipe's end for at most `grace`,
    /// then stops it and waits for the thread.
    pub(crate) fn finish(self, grace: Duration) {
        if self.done.recv_timeout(grace).is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        let _ = self.thread.join();
    }
}

fn copy(mut pipe: &File, log: &mut Capped, stop: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        let mut fd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut fd, 1, POLL_MS) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if ready == 0 {
            continue;
        }
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => log.write(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn capped(dir: &std::path::Path, before: &str, limit: u64) -> (Capped, std::path::PathBuf) {
        let path = dir.join("log");
        std::fs::write(&path, before).unwrap();
        let log = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .unwrap();
        (Capped::new(log, limit), path)
    }

    #[test]
    fn the_log_keeps_its_limit_then_one_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, path) = capped(dir.path(), "ab\n", 10);
        log.write(b"cdef");
        log.write(b"ghijkl");
        log.write(b"more and more");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("ab\ncdefghi\n{}\n", cut_line(10)));
        assert!(cut_line(10).contains("10 bytes"));
        assert!(cut_line(1 << 30).contains("1024 MiB"));
    }

    #[test]
    fn a_log_already_full_gets_only_the_cut_line_and_no_output_adds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, path) = capped(dir.path(), "0123456789", 10);
        log.write(b"");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0123456789");
        log.write(b"x");
        log.write(b"y");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("0123456789\n{}\n", cut_line(10)));
    }

    #[test]
    fn the_copy_ends_at_eof_or_when_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let (read, write) = pipe().unwrap();
        let (log, path) = capped(dir.path(), "", 1 << 20);
        let copier = Copier::start(read, log.log, 1 << 20).unwrap();
        let mut w = File::from(write);
        w.write_all(b"hello\n").unwrap();
        drop(w);
        copier.finish(Duration::from_secs(10));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");

        // A writer that never closes: the copy stops after the grace.
        let (read, write) = pipe().unwrap();
        let (log, _) = capped(dir.path(), "", 1 << 20);
        let copier = Copier::start(read, log.log, 1 << 20).unwrap();
        let t = std::time::Instant::now();
        copier.finish(Duration::from_millis(200));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        drop(write);
    }
}
