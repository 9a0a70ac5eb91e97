//! The input of an interactive task (`gantry run`, like `srun --pty`): what a client types
//! reaches task 0's stdin through a FIFO beside the task's exit file (`task-N.stdin`, the
//! daemon's, mode 0600, created at launch), which the task's shim holds open and relays to
//! the command (`shim_input.rs`). The FIFO carries small frames, each written with one
//! `write` of at most `PIPE_BUF` bytes, so frames from concurrent requests never interleave:
//!
//! ```text
//! kind (1 byte: b'd' data, b'e' end of input, b'w' window size) | length (u16, LE) | payload
//! ```
//!
//! The writer never blocks: a FIFO nobody reads (the shim has not opened it yet, or is gone)
//! is [`InputError::NotOpen`], and a full one takes what fits, the rest being the client's to
//! send again (back-pressure, not loss).
//!
//! Owns: the mode ([`TaskInput`]), the FIFO's path and creation, the frame format, and
//! writing frames. Does not own reading them in the shim (`shim_input.rs`) nor who may write
//! (the daemon's API).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use gantry_api::task::TaskInput;

/// One message to a task's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFrame<'a> {
    /// Bytes for the command's stdin.
    Data(&'a [u8]),
    /// The end of input (closes a pipe; a terminal gets its end-of-file character).
    Eof,
    /// The terminal's new size.
    Resize { rows: u16, cols: u16 },
}

/// Why input could not be written.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// No shim reads the task's input: not started yet, or ended.
    #[error("the task's input is not open (the task is starting or has ended)")]
    NotOpen,
    /// Anything else.
    #[error("cannot write the task's input {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Bytes of one frame's header.
const HEADER: usize = 3;
/// Largest payload: header and payload fit in one atomic pipe write.
pub(crate) const MAX_PAYLOAD: usize = libc::PIPE_BUF - HEADER;

/// The input FIFO of the task whose exit file is `exit_path`.
pub fn fifo_path(exit_path: &Path) -> PathBuf {
    exit_path.with_extension("stdin")
}

/// Creates the FIFO at `path` afresh (mode 0600, the daemon's).
pub(crate) fn create_fifo(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is NUL-terminated and lives for the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(kind);
    // `payload` is at most MAX_PAYLOAD bytes, which fits in a u16.
    out.extend((payload.len() as u16).to_le_bytes());
    out.extend(payload);
    out
}

/// The frames of `frame` (data is cut into pieces of at most [`MAX_PAYLOAD`] bytes).
fn frames(frame: InputFrame<'_>) -> Vec<Vec<u8>> {
    match frame {
        InputFrame::Data(bytes) => bytes.chunks(MAX_PAYLOAD).map(|c| encode(b'd', c)).collect(),
        InputFrame::Eof => vec![encode(b'e', &[])],
        InputFrame::Resize { rows, cols } => {
            let mut size = rows.to_le_bytes().to_vec();
            size.extend(cols.to_le_bytes());
            vec![encode(b'w', &size)]
        }
    }
}

/// Writes `frame` to the FIFO at `path` without blocking; returns how many data bytes were
/// taken (all of a control frame counts as 0). Never follows a link, and writes only to a FIFO.
pub fn send(path: &Path, frame: InputFrame<'_>) -> Result<usize, InputError> {
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let io_err = |source: io::Error| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path);
    let mut fifo = match opened {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENXIO) | Some(libc::ENOENT)) => {
            return Err(InputError::NotOpen);
        }
        Err(e) => return Err(io_err(e)),
    };
    if !fifo.metadata().map_err(io_err)?.file_type().is_fifo() {
        return Err(io_err(io::Error::other("not a FIFO")));
    }
    let mut taken = 0;
    for encoded in frames(frame) {
        match fifo.write(&encoded) {
            Ok(n) if n == encoded.len() => taken += n - HEADER,
            Ok(_) => return Err(io_err(io::Error::other("a frame was cut"))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => return Err(InputError::NotOpen),
            Err(e) => return Err(io_err(e)),
        }
    }
    Ok(if matches!(frame, InputFrame::Data(_)) {
        taken
    } else {
        0
    })
}

/// Writes one request to the FIFO at `path`: `data`, then (only when all of it was taken)
/// the new terminal size and the end of input. Returns the data bytes taken.
pub fn deliver(
    path: &Path,
    data: &[u8],
    resize: Option<(u16, u16)>,
    eof: bool,
) -> Result<usize, InputError> {
    let taken = if data.is_empty() {
        0
    } else {
        send(path, InputFrame::Data(data))?
    };
    if taken < data.len() {
        return Ok(taken);
    }
    if let Some((rows, cols)) = resize {
        send(path, InputFrame::Resize { rows, cols })?;
    }
    if eof {
        send(path, InputFrame::Eof)?;
    }
    Ok(taken)
}

/// A frame as the shim reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadFrame {
    Data(Vec<u8>),
    Eof,
    Resize { rows: u16, cols: u16 },
}

/// Reads the next frame; `None` at the end of the stream. An unknown kind is skipped.
pub(crate) fn read_frame(reader: &mut impl Read) -> io::Result<Option<ReadFrame>> {
    loop {
        let mut header = [0u8; HEADER];
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = usize::from(u16::from_le_bytes([header[1], header[2]]));
        let mut payload = vec![0u8; len];
        reader.read_exact(&mut payload)?;
        match (header[0], payload.as_slice()) {
            (b'd', _) => return Ok(Some(ReadFrame::Data(payload))),
            (b'e', _) => return Ok(Some(ReadFrame::Eof)),
            (b'w', [r0, r1, c0, c1]) => {
                return Ok(Some(ReadFrame::Resize {
                    rows: u16::from_le_bytes([*r0, *r1]),
                    cols: u16::from_le_bytes([*c0, *c1]),
                }));
            }
            _ => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn frames_written_to_a_fifo_read_back_in_order_and_a_full_fifo_takes_what_fits() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo_path(&dir.path().join("task-0.exit"));
        assert!(matches!(
            send(&path, InputFrame::Eof),
            Err(InputError::NotOpen)
        ));
        create_fifo(&path).unwrap();
        assert!(matches!(
            send(&path, InputFrame::Eof),
            Err(InputError::NotOpen)
        ));
        // The shim's side: read and write, so it never sees an end of file.
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        let big = vec![7u8; MAX_PAYLOAD + 10];
        assert_eq!(send(&path, InputFrame::Data(b"hi\n")).unwrap(), 3);
        assert_eq!(send(&path, InputFrame::Data(&big)).unwrap(), big.len());
        let resize = InputFrame::Resize {
            rows: 40,
            cols: 120,
        };
        assert_eq!(send(&path, resize).unwrap(), 0);
        send(&path, InputFrame::Eof).unwrap();
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(read_frame(&mut reader).unwrap().unwrap());
        }
        assert_eq!(got[0], ReadFrame::Data(b"hi\n".to_vec()));
        assert_eq!(got[1], ReadFrame::Data(vec![7; MAX_PAYLOAD]));
        assert_eq!(got[2], ReadFrame::Data(vec![7; 10]));
        assert_eq!(
            got[3],
            ReadFrame::Resize {
                rows: 40,
                cols: 120
            }
        );
        assert_eq!(got[4], ReadFrame::Eof);

        // Nobody drains it: it fills, and a write takes only whole frames that fit.
        let lots = vec![1u8; 1 << 20];
        let taken = send(&path, InputFrame::Data(&lots)).unwrap();
        assert!(taken > 0 && taken < lots.len(), "{taken}");
        assert_eq!(taken % MAX_PAYLOAD, 0);
    }

    #[test]
    fn only_a_fifo_is_written_never_a_file_or_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            send(&file, InputFrame::Data(b"x")),
            Err(InputError::Io { .. })
        ));
        assert_eq!(std::fs::read(&file).unwrap(), b"");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(send(&link, InputFrame::Data(b"x")).is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"");
    }
}
