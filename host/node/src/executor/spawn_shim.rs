//! Starting a task's shim with `posix_spawn`, and waiting for its end.
//!
//! glibc's `posix_spawn` starts the child with `clone(CLONE_VM | CLONE_VFORK)`: the daemon's
//! page tables are shared until the `execve`, not copied. A `fork` (what `Command` does as soon
//! as a `pre_exec` hook is set) copied, then unmapped, every page table of the daemon once per
//! task: under a burst of short jobs that was the largest single cost of a launch.
//!
//! The child is set up by attributes `posix_spawn` applies between the clone and the
//! `execve`, the same the old hook applied:
//! - a new session (`POSIX_SPAWN_SETSID`): no controlling terminal, and a process group led by
//!   the shim, which exists when this returns (the group `terminate` signals);
//! - the signals of `shim_signals` blocked (`POSIX_SPAWN_SETSIGMASK`), so one sent before the
//!   shim has installed its handlers waits for them; SIGPIPE back to its default;
//! - stdin, stdout and stderr on `/dev/null`, and every descriptor above 2 closed
//!   (`posix_spawn_file_actions_addclosefrom_np`); the shim marks what it may still hold
//!   close-on-exec again before it starts the command;
//! - exactly the environment given.
//!
//! The end is waited for through a pidfd polled by tokio (no thread per running task).
//!
//! Owns: these `unsafe` calls. Does not own what the shim is given (`shim_args`) nor what its
//! end means (`ending`).

use super::shim_signals;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

/// A shim started by [`spawn`]: its pid and a pidfd to wait for it with.
#[derive(Debug)]
pub(crate) struct SpawnedShim {
    pub pid: u32,
    pidfd: OwnedFd,
}

/// Starts `exe` with `args` (after argv\[0\] = `exe`) and the environment `env` only.
pub(crate) fn spawn(
    exe: &Path,
    args: &[String],
    env: &[(&str, String)],
) -> io::Result<SpawnedShim> {
    let exe_c = c_string(exe.as_os_str().as_bytes())?;
    let mut argv_c = vec![exe_c.clone()];
    for a in args {
        argv_c.push(c_string(a.as_bytes())?);
    }
    let envp_c: Vec<CString> = env
        .iter()
        .map(|(k, v)| c_string(format!("{k}={v}").as_bytes()))
        .collect::<io::Result<_>>()?;
    let argv = null_terminated(&argv_c);
    let envp = null_terminated(&envp_c);
    let dev_null = c_string(b"/dev/null")?;
    let mut pid: libc::pid_t = 0;
    // SAFETY: the attribute and file-action objects are initialised before use and destroyed
    // on every path; every pointer handed over (paths, argv, envp, sets) points into values
    // that outlive the `posix_spawn` call, and argv/envp end with a null pointer.
    let rc = unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        check(libc::posix_spawnattr_init(&mut attr))?;
        if let Err(e) = check(libc::posix_spawn_file_actions_init(&mut actions)) {
            libc::posix_spawnattr_destroy(&mut attr);
            return Err(e);
        }
        let blocked = shim_signals::shielded_set();
        let mut default = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut default);
        libc::sigaddset(&mut default, libc::SIGPIPE);
        let flags = libc::POSIX_SPAWN_SETSID
            | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short
            | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short;
        let mut rc = libc::posix_spawnattr_setflags(&mut attr, flags);
        if rc == 0 {
            rc = libc::posix_spawnattr_setsigmask(&mut attr, &blocked);
        }
        if rc == 0 {
            rc = libc::posix_spawnattr_setsigdefault(&mut attr, &default);
        }
        for (fd, mode) in [
            (0, libc::O_RDONLY),
            (1, libc::O_WRONLY),
            (2, libc::O_WRONLY),
        ] {
            if rc == 0 {
                rc = libc::posix_spawn_file_actions_addopen(
                    &mut actions,
                    fd,
                    dev_null.as_ptr(),
                    mode,
                    0,
                );
            }
        }
        if rc == 0 {
            rc = libc::posix_spawn_file_actions_addclosefrom_np(&mut actions, 3);
        }
        if rc == 0 {
            rc = libc::posix_spawn(
                &mut pid,
                exe_c.as_ptr(),
                &actions,
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            );
        }
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        rc
    };
    check(rc)?;
    let pid = u32::try_from(pid).map_err(|_| io::Error::other("posix_spawn gave no pid"))?;
    let pidfd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            // Not waited for otherwise: kill and reap it rather than leave it unwatched.
            reap_now(pid);
            return Err(e);
        }
    };
    Ok(SpawnedShim { pid, pidfd })
}

impl SpawnedShim {
    /// Waits (without a thread) until the shim has exited, and reaps it.
    pub(crate) async fn wait(self) -> io::Result<ExitStatus> {
        use tokio::io::unix::AsyncFd;
        // SAFETY: the pidfd is owned by the AsyncFd from here on and stays open, the same
        // descriptor, until it is dropped.
        let fd =
            unsafe { AsyncFd::register_with_interest(self.pidfd, tokio::io::Interest::READABLE) }?;
        loop {
            let mut guard = fd.readable().await?;
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid on our own child with a valid status pointer; WNOHANG never blocks.
            let rc = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, libc::WNOHANG) };
            match rc {
                0 => guard.clear_ready(),
                r if r > 0 => return Ok(ExitStatus::from_raw(status)),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// A pidfd for `pid` (Linux 5.3+); readable once the process has exited.
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else; pidfds are
    // created close-on-exec.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    debug_assert!(owned.as_raw_fd() >= 0);
    Ok(owned)
}

/// SIGKILL and reap a child that cannot be watched.
fn reap_now(pid: u32) {
    // SAFETY: kill and waitpid on our own child's pid, with a valid status pointer.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(pid as libc::pid_t, &mut status, 0);
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} holds a NUL byte", OsStr::from_bytes(bytes)),
        )
    })
}

/// The pointers `posix_spawn` takes (it does not write through them).
fn null_terminated(strings: &[CString]) -> Vec<*mut libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}
