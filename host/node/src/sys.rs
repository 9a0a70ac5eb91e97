//! Safe wrappers of the few process-level system calls the rest of Gantry needs, so that
//! every daemon-side crate but this one can `#![forbid(unsafe_code)]`: the name of an
//! account, the process's effective uid, and counting Ctrl-C in the CLI.
//!
//! Owns these `unsafe` blocks. The executor's own raw calls stay with their purpose
//! (`executor/signals.rs`, `child.rs`, `identity.rs`, `bpf.rs`, `shim_signals.rs`).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};

/// The name of the account with `uid`, if it has one.
pub fn account_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    loop {
        // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids).
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; `buf` is writable for `buf.len()`
        // bytes; on success `pwd.pw_name` points into `buf`, read before `buf` is dropped.
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name is a NUL-terminated string inside `buf`.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

static INTERRUPTS: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_interrupt(_: libc::c_int) {
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
}

/// From now on, SIGINT (Ctrl-C) only counts: see [`interrupts`].
pub fn count_interrupts() {
    // SAFETY: the handler only increments an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            count_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// From now on, the signals a job's process group is sent (TERM, INT, HUP, QUIT, USR1,
/// USR2, ALRM) do nothing to this process: it outlasts them and waits for its children,
/// which get them too (they are in the same group) and whose dispositions are their own (a
/// handler, unlike an ignored signal, does not pass through `exec`). `srun` inside a job.
pub fn outlast_group_signals() {
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
    ] {
        // SAFETY: the handler does nothing, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                ignore_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// How many SIGINTs arrived since [`count_interrupts`].
pub fn interrupts() -> u32 {
    INTERRUPTS.load(Ordering::SeqCst)
}

/// Sends SIGKILL to the process group `pgid` (pids 0 and 1 are refused); for tests and
/// clean-up of a group this process started.
pub fn kill_group(pgid: u32) {
    let _ = crate::executor::signals::signal_group(pgid, libc::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names_of_uids() {
        assert_eq!(account_name(0).as_deref(), Some("root"));
        assert_eq!(account_name(65534).as_deref(), Some("nobody"));
        assert_eq!(account_name(3_999_999_999), None);
    }
}
