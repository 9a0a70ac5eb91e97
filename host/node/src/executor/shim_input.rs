//! The shim's side of an interactive task's input (`task_input.rs` has the daemon's): the
//! shim opens the task's input FIFO before the command starts (read and write, so writers'
//! frames are kept while it starts and it never sees an end of file between requests), gives
//! the command a pipe or a terminal as its stdin, and a thread relays the frames to it.
//!
//! With a terminal, the shim allocates a pseudo-terminal (`posix_openpt`): the command gets
//! the terminal (owned by its user) as stdin, stdout and stderr, and as its controlling
//! terminal: the shim leads the task's session and process group, so the terminal's
//! foreground group is the one `terminate` and `gantry signal` reach, and a Ctrl-C typed by
//! the client (a byte through the terminal) interrupts the command as it would at a local
//! terminal. What the terminal shows is copied into the task's log (with its size limit, like
//! captured output, `log_cap.rs`), where `gantry run` reads it.
//!
//! Owns: the pipe, the terminal and the relay thread. Does not own the frame format or the
//! FIFO's creation (`task_input.rs`), nor the command's start (`shim.rs`).

use super::child::Ids;
use super::task_input::{self, ReadFrame, TaskInput};
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

/// The end-of-file character a terminal in its default mode turns into an end of input.
const VEOF_BYTE: u8 = 0x04;

/// What the command's input is, and where the relay writes.
pub(crate) enum Input {
    /// `/dev/null`.
    Null,
    /// A pipe: the command reads `read`; the relay writes `write` and closes it at the end.
    Pipe {
        fifo: File,
        read: OwnedFd,
        write: File,
    },
    /// A terminal: the command gets `slave`; the relay writes `master`, the log copy reads it.
    Tty {
        fifo: File,
        master: File,
        slave: OwnedFd,
    },
}

impl Input {
    /// Opens the input for `mode`, reading frames from `fifo` (required unless `mode` is
    /// `None`); a terminal's device is handed to `ids`' user.
    pub(crate) fn open(
        mode: TaskInput,
        fifo: Option<&Path>,
        ids: Option<&Ids>,
    ) -> io::Result<Self> {
        if mode == TaskInput::None {
            return Ok(Self::Null);
        }
        let path =
            fifo.ok_or_else(|| io::Error::other("an interactive task needs --input-fifo"))?;
        let fifo = open_fifo(path)?;
        match mode {
            TaskInput::None => Ok(Self::Null),
            TaskInput::Pipe => {
                let (read, write) = super::log_cap::pipe()?;
                // The command reads the pipe; the relay writes its other end.
                Ok(Self::Pipe {
                    fifo,
                    read: read.into(),
                    write: File::from(write),
                })
            }
            TaskInput::Tty { rows, cols } => {
                let (master, slave) = open_terminal(rows, cols, ids)?;
                Ok(Self::Tty {
                    fifo,
                    master,
                    slave,
                })
            }
        }
    }

    /// The command's stdin.
    pub(crate) fn stdin(&self) -> io::Result<Stdio> {
        Ok(match self {
            Self::Null => Stdio::null(),
            Self::Pipe { read, .. } => Stdio::from(read.try_clone()?),
            Self::Tty { slave, .. } => Stdio::from(slave.try_clone()?),
        })
    }

    /// With a terminal: the command's stdout and stderr (the terminal), and the master side
    /// the log copy reads.
    pub(crate) fn terminal_output(&self) -> Option<io::Result<(Stdio, Stdio, File)>> {
        let Self::Tty { master, slave, .. } = self else {
            return None;
        };
        Some((|| {
            Ok((
                Stdio::from(slave.try_clone()?),
                Stdio::from(slave.try_clone()?),
                master.try_clone()?,
            ))
        })())
    }

    /// Once the command runs: drops the shim's copy of the command's end (so a terminal
    /// hangs up when the command's processes are gone) and relays frames in a thread.
    pub(crate) fn start_relay(self) -> io::Result<()> {
        let (fifo, sink) = match self {
            Self::Null => return Ok(()),
            Self::Pipe { fifo, write, .. } => (fifo, Sink::Pipe(Some(write))),
            Self::Tty { fifo, master, .. } => (fifo, Sink::Tty(master)),
        };
        std::thread::Builder::new()
            .name("task-input".into())
            .spawn(move || relay(fifo, sink))?;
        Ok(())
    }
}

enum Sink {
    Pipe(Option<File>),
    Tty(File),
}

/// Relays frames until the FIFO fails; a command that stopped reading loses what follows.
fn relay(fifo: File, mut sink: Sink) {
    let mut reader = BufReader::new(fifo);
    while let Ok(Some(frame)) = task_input::read_frame(&mut reader) {
        match (&mut sink, frame) {
            (Sink::Pipe(write), ReadFrame::Data(bytes)) => {
                if let Some(w) = write
                    && w.write_all(&bytes).is_err()
                {
                    *write = None;
                }
            }
            (Sink::Pipe(write), ReadFrame::Eof) => *write = None,
            (Sink::Pipe(_), ReadFrame::Resize { .. }) => {}
            (Sink::Tty(master), ReadFrame::Data(bytes)) => {
                let _ = master.write_all(&bytes);
            }
            (Sink::Tty(master), ReadFrame::Eof) => {
                let _ = master.write_all(&[VEOF_BYTE]);
            }
            (Sink::Tty(master), ReadFrame::Resize { rows, cols }) => {
                let _ = set_size(master, rows, cols);
            }
        }
    }
}

/// The FIFO, opened for reading and writing (never blocks on open, never ends), never
/// through a link, close-on-exec.
fn open_fifo(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    if !fifo.metadata()?.file_type().is_fifo() {
        return Err(io::Error::other(format!(
            "{} is not a FIFO",
            path.display()
        )));
    }
    Ok(fifo)
}

/// A new pseudo-terminal of `rows` × `cols`: its master and its slave (owned by `ids`' user),
/// the slave made the controlling terminal of the calling process when it leads a session.
fn open_terminal(rows: u16, cols: u16, ids: Option<&Ids>) -> io::Result<(File, OwnedFd)> {
    // SAFETY: posix_openpt takes flags and returns a new descriptor or -1.
    let raw = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor owned by nobody else.
    let master = unsafe { File::from_raw_fd(raw) };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: the calls take the master's descriptor, and `name` has the room given.
    unsafe {
        if libc::grantpt(raw) != 0
            || libc::unlockpt(raw) != 0
            || libc::ptsname_r(raw, name.as_mut_ptr(), name.len()) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: ptsname_r wrote a NUL-terminated name into `name`.
    let slave_raw = unsafe {
        libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if slave_raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `slave_raw` is a new descriptor owned by nobody else.
    let slave = unsafe { OwnedFd::from_raw_fd(slave_raw) };
    if let Some(ids) = ids {
        std::os::unix::fs::fchown(&slave, Some(ids.uid), None)?;
    }
    set_size(&master, rows, cols)?;
    // SAFETY: getsid/getpid take no pointers; TIOCSCTTY takes an integer argument.
    unsafe {
        if libc::getsid(0) == libc::getpid()
            && libc::ioctl(slave.as_raw_fd(), libc::TIOCSCTTY, 0) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((master, slave))
}

fn set_size(master: &File, rows: u16, cols: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` that lives for the call.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
