//! The shim's signal dispositions: how the shim outlives the signals a job is sent while
//! making sure none of them is lost on the way to the command.
//!
//! A stop or a user signal goes to the task's whole process group (`signals::signal_group`).
//! The shim must survive it to record the command's end, so it catches TERM, INT, HUP, QUIT,
//! USR1, USR2 and ALRM with a handler that only remembers the signal. The command gets the
//! signal directly once it runs; but one that arrives before the command has been exec'd
//! (while the shim starts, or in the forked child while it joins its cgroups and switches to
//! the job's user) would be swallowed by that handler, and a stop would then wait for SIGKILL
//! after the grace. So:
//!
//! 1. the daemon starts the shim with these signals blocked (`spawn_shim`), so one sent
//!    before the shim has its handlers stays pending instead of killing the shim;
//! 2. the shim installs its handlers, then unblocks them (`shield_shim`);
//! 3. the forked child, just before `execve`, restores the default dispositions and raises
//!    again every signal the shim (or the child itself) caught so far
//!    (`pass_caught_signals_to_command`): the command starts with the signal delivered, as if it
//!    had arrived a moment later.
//!
//! Owns these `unsafe` blocks. It does not send signals (`signals.rs`) nor decide when to.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Every signal a job may be sent (`job_options::SIGNALS`) besides KILL and STOP, which no
/// process can catch.
const SHIELDED: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// Bit `n` set: signal `n` was caught by the shim's handler (in this process, or in the
/// parent before the fork that made it).
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// Whether `shield_shim` ran in this process: only then do the child's dispositions need
/// restoring (tests run the shim's `execute` in-process without it).
static INSTALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn remember_signal(sig: libc::c_int) {
    if let Ok(bit) = u32::try_from(sig)
        && bit < 64
    {
        // A lock-free atomic is async-signal-safe.
        CAUGHT.fetch_or(1 << bit, Ordering::SeqCst);
    }
}

/// The shielded signals as a `sigset_t`.
pub(crate) fn shielded_set() -> libc::sigset_t {
    // SAFETY: all-zero is a valid sigset_t to hand to sigemptyset, which initialises it;
    // sigaddset only writes into it. Both are async-signal-safe.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in SHIELDED {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Changes the calling thread's mask for the shielded signals (`SIG_BLOCK`/`SIG_UNBLOCK`).
fn mask(how: libc::c_int) -> io::Result<()> {
    let set = shielded_set();
    // SAFETY: `set` lives for the call and the old-mask pointer is null; sigprocmask is
    // async-signal-safe.
    if unsafe { libc::sigprocmask(how, &set, std::ptr::null_mut()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the shim outlive the signals a job may be sent, remembering each one for the
/// command (see the module header); SIGKILL still kills it. Then unblocks them, so any that
/// arrived while the shim started are caught now.
pub(crate) fn shield_shim() {
    let handler = remember_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in SHIELDED {
        // SAFETY: the handler only does an atomic fetch_or, so it is async-signal-safe; glibc
        // and musl give signal() BSD semantics (persistent, SA_RESTART).
        let previous = unsafe { libc::signal(sig, handler) };
        if previous == libc::SIG_ERR {
            tracing::warn!(sig, "task-shim: cannot install signal handler");
        }
    }
    INSTALLED.store(true, Ordering::SeqCst);
    if let Err(e) = mask(libc::SIG_UNBLOCK) {
        tracing::warn!(error = %e, "task-shim: cannot unblock the job's signals");
    }
}

/// For the shim's `pre_exec` of the command, last before `execve`: restores the default
/// dispositions and raises every signal caught so far, so the command gets it (a stop ends
/// the child here, recorded as that signal). Does nothing outside a shielded shim.
/// Async-signal-safe.
pub(crate) fn pass_caught_signals_to_command() -> io::Result<()> {
    if !INSTALLED.load(Ordering::SeqCst) {
        return Ok(());
    }
    mask(libc::SIG_BLOCK)?;
    for sig in SHIELDED {
        // SAFETY: restoring the default disposition; signal() is async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    let caught = CAUGHT.load(Ordering::SeqCst);
    for sig in SHIELDED {
        if caught & (1 << sig) != 0 {
            // SAFETY: raise() is async-signal-safe; the signal stays pending while blocked.
            unsafe {
                libc::raise(sig);
            }
        }
    }
    // A pending signal is delivered here with its default action.
    mask(libc::SIG_UNBLOCK)
}
