//! Joining a cgroup between fork and exec, for the two kinds of process Gantry moves into a
//! task's cgroups before they run: the task's own child (`executor/child.rs`) and the image
//! tools the shim runs for it (`container/tool_run.rs`).
//!
//! Owns that one async-signal-safe call. Does not own which cgroups (`executor::cgroup`) nor
//! making or removing them.

use std::ffi::CStr;
use std::io;

/// Moves the calling process into the cgroup whose `cgroup.procs` is `path` ("0" means the
/// writer itself, in v1 and v2 alike). Only async-signal-safe calls (open, write, close): it
/// runs between fork and exec.
pub fn join_cgroup(path: &CStr) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; open/write/close take plain values and a 1-byte buffer
    // that lives for the call.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(err);
        }
    }
    Ok(())
}
