//! How much disk an image will take once unpacked, known before it is unpacked: every layer
//! is streamed through its decompressor (`gzip -dc`, `zstd -dc`, run in the task's cgroups)
//! and its tar headers are read, each entry's size rounded up to a 4 KiB block (an empty file
//! or a directory still takes one) and summed. The walk stops as soon as the sum passes the
//! bound, so a few hundred KiB of gzip that would expand to gigabytes costs no more than the
//! bound to look at. Sparse entries (GNU `S`, PAX `GNU.sparse.*`) are refused: their holes
//! would hide their real size.
//!
//! Owns: the tar walk and the estimate. Does not own the bound's value (`[containers]
//! max_unpacked_mib`), the cache's total (`cache`), nor unpacking (`image_store`).

use super::layout_verify::{Blob, blob_path};
use super::tool_run::in_cgroups;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The disk block an entry is rounded up to.
const BLOCK: u64 = 4096;

/// The most a PAX or GNU long-name header's data may hold.
const MAX_META: u64 = 1 << 20;

/// Why a layer cannot be unpacked here.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("it would take more than {limit} bytes unpacked ({what})")]
    Over { limit: u64, what: String },
    #[error("layer {0} has a sparse file (refused: its size on disk cannot be bounded)")]
    Sparse(String),
    #[error("layer {layer} is not a readable tar archive: {message}")]
    Corrupt { layer: String, message: String },
    #[error("cannot read layer {layer}: {source}")]
    Io { layer: String, source: io::Error },
}

/// What the layers would take unpacked (bytes, rounded to blocks), or why they are refused;
/// `limit` bounds the total, `cgroups` are the task's `cgroup.procs` files.
pub(crate) fn unpacked_bytes(
    layout: &Path,
    layers: &[Blob],
    limit: u64,
    cgroups: &[PathBuf],
) -> Result<u64, MeasureError> {
    let mut total = 0u64;
    for layer in layers {
        let io_err = |source| MeasureError::Io {
            layer: layer.digest.clone(),
            source,
        };
        let path = blob_path(layout, &layer.digest).map_err(|e| MeasureError::Corrupt {
            layer: layer.digest.clone(),
            message: e.to_string(),
        })?;
        let mut stream = Decompressed::open(&path, cgroups).map_err(io_err)?;
        let walked = walk(&mut stream.reader(), &layer.digest, limit, &mut total);
        stream
            .finish(walked.is_ok())
            .map_err(|message| MeasureError::Corrupt {
                layer: layer.digest.clone(),
                message,
            })?;
        walked?;
    }
    Ok(total)
}

/// A layer's bytes, through a decompressor when its first bytes say it is compressed.
struct Decompressed {
    child: Option<Child>,
    file: Option<File>,
}

impl Decompressed {
    fn open(path: &Path, cgroups: &[PathBuf]) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic)?;
        let file = File::open(path)?;
        let tool = match &magic[..n] {
            [0x1f, 0x8b, ..] => "gzip",
            [0x28, 0xb5, 0x2f, 0xfd] => "zstd",
            _ => {
                return Ok(Self {
                    child: None,
                    file: Some(file),
                });
            }
        };
        let program = super::find_tool(tool).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{tool}` is not installed"),
            )
        })?;
        let mut cmd = Command::new(program);
        cmd.args(["-dc"])
            .stdin(Stdio::from(file))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        in_cgroups(&mut cmd, cgroups)?;
        Ok(Self {
            child: Some(cmd.spawn()?),
            file: None,
        })
    }

    fn reader(&mut self) -> BufReader<Box<dyn Read + '_>> {
        let inner: Box<dyn Read + '_> = match (&mut self.child, &mut self.file) {
            (Some(child), _) => match child.stdout.as_mut() {
                Some(out) => Box::new(out),
                None => Box::new(io::empty()),
            },
            (None, Some(file)) => Box::new(file),
            (None, None) => Box::new(io::empty()),
        };
        BufReader::with_capacity(1 << 16, inner)
    }

    /// Ends the decompressor: killed (the walk stopped early or ended at the archive's end
    /// marker), its failure an error only when the walk read to the end of a valid archive
    /// and it still failed.
    fn finish(mut self, walked_ok: bool) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let done = child.try_wait().ok().flatten();
        if done.is_none() {
            let _ = child.kill();
        }
        let status = match done {
            Some(s) => s,
            None => child.wait().map_err(|e| e.to_string())?,
        };
        if walked_ok && done.is_some() && !status.success() {
            return Err(format!("its decompressor failed ({status})"));
        }
        Ok(())
    }
}

/// The size field of a tar header: octal text, or base-256 when its first byte's high bit is
/// set.
fn header_size(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut value: u64 = u64::from(field[0] & 0x7f);
        for b in &field[1..] {
            value = value.checked_mul(256)?.checked_add(u64::from(*b))?;
        }
        return Some(value);
    }
    let text: String = field
        .iter()
        .map(|b| *b as char)
        .filter(|c| *c != '\0' && *c != ' ')
        .collect();
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(&text, 8).ok()
}

/// Reads `n` bytes of data and their padding to 512 (when the stream has it); `keep` says
/// whether they are returned.
fn data(reader: &mut impl Read, n: u64, keep: bool) -> io::Result<Vec<u8>> {
    let padded = n.div_ceil(512) * 512;
    let mut kept = Vec::new();
    let copied = if keep {
        reader.take(padded).read_to_end(&mut kept)? as u64
    } else {
        io::copy(&mut reader.take(padded), &mut io::sink())?
    };
    // Some writers (umoci) end the stream right after the last entry's data, without its
    // padding or the end blocks: only the data itself must be there.
    if copied < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the archive ends inside an entry",
        ));
    }
    kept.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    Ok(kept)
}

/// The PAX records of `text` (`len key=value\n`...) as (key, value).
fn pax_records(text: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .filter_map(|line| {
            let (_, kv) = line.split_once(' ')?;
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Walks one tar stream, adding each entry's blocks to `total`; stops past `limit`.
fn walk(
    reader: &mut impl Read,
    layer: &str,
    limit: u64,
    total: &mut u64,
) -> Result<(), MeasureError> {
    let corrupt = |message: String| MeasureError::Corrupt {
        layer: layer.to_string(),
        message,
    };
    let mut next_size: Option<u64> = None;
    let mut header = [0u8; 512];
    loop {
        match read_block(reader, &mut header).map_err(|e| corrupt(e.to_string()))? {
            false => return Ok(()),
            true if header.iter().all(|b| *b == 0) => return Ok(()),
            true => {}
        }
        let size = header_size(&header[124..136])
            .ok_or_else(|| corrupt("an entry's size is not a number".into()))?;
        match header[156] {
            b'S' => return Err(MeasureError::Sparse(layer.to_string())),
            kind @ (b'x' | b'g' | b'L' | b'K') => {
                if size > MAX_META {
                    return Err(corrupt(format!("a {size}-byte extended header")));
                }
                let text = data(reader, size, true).map_err(|e| corrupt(e.to_string()))?;
                if matches!(kind, b'x' | b'g') {
                    for (key, value) in pax_records(&text) {
                        if key.starts_with("GNU.sparse") {
                            return Err(MeasureError::Sparse(layer.to_string()));
                        }
                        if key == "size" && kind == b'x' {
                            next_size = Some(
                                value
                                    .trim()
                                    .parse()
                                    .map_err(|_| corrupt(format!("a PAX size of `{value}`")))?,
                            );
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        let size = next_size.take().unwrap_or(size);
        *total = total.saturating_add(size.max(1).div_ceil(BLOCK).saturating_mul(BLOCK));
        if *total > limit {
            return Err(MeasureError::Over {
                limit,
                what: format!("counting the layers up to {layer}"),
            });
        }
        data(reader, size, false).map_err(|e| corrupt(e.to_string()))?;
    }
}

/// Reads one 512-byte block; `false` at the end of the stream before any of it.
fn read_block(reader: &mut impl Read, block: &mut [u8; 512]) -> io::Result<bool> {
    let mut got = 0;
    while got < block.len() {
        match reader.read(&mut block[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the archive ends inside a header",
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
#[path = "unpack_bounds_tests.rs"]
mod tests;
