//! The loaded scenario of this process: NVML's init count, the file named by
//! `GANTRY_FAKE_NVML_SCENARIO` at init, and the last good scenario read from it. Every
//! call that reads state asks [`current`], which `stat`s the file and reads it again when
//! it changed (length, modification or change time, inode); a refused rewrite keeps the
//! last good scenario. Messages go to stderr once each, prefixed `fake NVML:`.
//!
//! Owns: when the file is read and what is served meanwhile. Does not own the format
//! (`scenario.rs`) or any handle (`devices.rs`).

use crate::ffi::{Answer, Code, DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, UNINITIALIZED, UNKNOWN};
use crate::scenario::{self, SCENARIO_VAR, Scenario};
use std::collections::HashSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// What tells one version of the file from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

#[derive(Default)]
struct Loaded {
    inits: u32,
    path: Option<PathBuf>,
    /// The version last read, good or refused: it is not read again until it changes.
    stamp: Option<Stamp>,
    good: Option<Arc<Scenario>>,
}

static STATE: Mutex<Option<Loaded>> = Mutex::new(None);
static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Locks `m`; a panic caught at the FFI boundary must not make the library unusable.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `message` to stderr the first time `key` is seen in this process.
fn warn_once(key: &str, message: &str) {
    if lock(&WARNED)
        .get_or_insert_with(HashSet::new)
        .insert(key.to_string())
    {
        // Not `eprintln!`, which panics when stderr fails; a lost message is no error.
        let _ = writeln!(std::io::stderr(), "fake NVML: {message}");
    }
}

/// `nvmlInit`: reads the scenario (again when it changed) and counts one more user.
/// Fails when the variable is unset (LIBRARY_NOT_FOUND), the file is missing
/// (DRIVER_NOT_LOADED) or no good scenario was ever read from it (UNKNOWN).
pub fn init() -> Answer {
    pin_library();
    let path = match std::env::var_os(SCENARIO_VAR) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let msg = format!("{SCENARIO_VAR} is not set; no scenario, no GPUs");
            warn_once(&msg, &msg);
            return Err(LIBRARY_NOT_FOUND);
        }
    };
    let mut guard = lock(&STATE);
    let loaded = guard.get_or_insert_with(Loaded::default);
    if loaded.path.as_deref() != Some(path.as_path()) {
        // Another file than at the last init: nothing read before applies to it.
        *loaded = Loaded {
            inits: loaded.inits,
            path: Some(path.clone()),
            ..Loaded::default()
        };
    }
    if !path.exists() {
        let msg = format!("the scenario {} does not exist", path.display());
        warn_once(&msg, &msg);
        if loaded.good.is_none() {
            return Err(DRIVER_NOT_LOADED);
        }
    }
    refresh(loaded);
    if loaded.good.is_none() {
        return Err(UNKNOWN);
    }
    loaded.inits = loaded.inits.saturating_add(1);
    Ok(())
}

/// `nvmlShutdown`: one user fewer; UNINITIALIZED when there was none.
pub fn shutdown() -> Answer {
    let mut guard = lock(&STATE);
    match guard.as_mut() {
        Some(l) if l.inits > 0 => {
            l.inits -= 1;
            Ok(())
        }
        _ => Err(UNINITIALIZED),
    }
}

/// The scenario to answer from, read again when the file changed; UNINITIALIZED before
/// `nvmlInit` or after the last `nvmlShutdown`.
pub fn current() -> Result<Arc<Scenario>, Code> {
    let mut guard = lock(&STATE);
    let Some(loaded) = guard.as_mut().filter(|l| l.inits > 0) else {
        return Err(UNINITIALIZED);
    };
    refresh(loaded);
    loaded.good.clone().ok_or(UNKNOWN)
}

/// Reads the file again when its stamp changed; keeps the last good scenario when the
/// new version is refused or the file cannot be read.
fn refresh(loaded: &mut Loaded) {
    let Some(path) = loaded.path.clone() else {
        return;
    };
    let stamp = match Stamp::of(&path) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("cannot stat the scenario {}: {e}", path.display());
            warn_once(&format!("{:?}{msg}", loaded.stamp), &msg);
            return;
        }
    };
    if loaded.stamp == Some(stamp) {
        return;
    }
    loaded.stamp = Some(stamp);
    match scenario::load(&path) {
        Ok(s) => loaded.good = Some(Arc::new(s)),
        Err(e) => {
            let kept = if loaded.good.is_some() {
                "; the last good scenario is still served"
            } else {
                ""
            };
            let msg = format!("{}: {e}{kept}", path.display());
            warn_once(&format!("{stamp:?}{msg}"), &msg);
        }
    }
}

/// Keeps this library loaded until the process ends (`RTLD_NODELETE`), so that what it
/// remembers (delivered Xids, handles, messages written) lives as long as the process,
/// even when the last `Nvml` closes it or a failed init makes nvml-wrapper close it.
fn pin_library() {
    static PINNED: std::sync::Once = std::sync::Once::new();
    PINNED.call_once(|| {
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        let anchor = pin_library as *const libc::c_void;
        // SAFETY: `anchor` is an address inside this library and `info` a valid,
        // writable `Dl_info`; dladdr only writes it.
        if unsafe { libc::dladdr(anchor, info.as_mut_ptr()) } == 0 {
            return;
        }
        // SAFETY: dladdr succeeded, so it filled `info`.
        let file = unsafe { info.assume_init() }.dli_fname;
        if file.is_null() {
            return;
        }
        // SAFETY: `file` is the NUL-terminated path dladdr gave for this loaded library;
        // RTLD_NOLOAD only takes another reference to it (never loads anything) and the
        // handle is kept for ever on purpose.
        let _ = unsafe {
            libc::dlopen(
                file,
                libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
            )
        };
    });
}
