//! What a process Gantry starts for a user must not inherit from root: the daemon's session
//! (and through it a controlling terminal, where `ioctl(TIOCSTI)` types into root's shell, or
//! a process group of another task a command could move into), and file descriptors above 2
//! (the daemon may have been started as `gantry serve 8<secret`). `docs/security.md`
//! (attacks R1 and R2) says what each rule stops.
//!
//! - [`mark_inherited_fds_cloexec`]: called once at the start of `gantry serve`, `gantry
//!   agent` and the task shim, marks every descriptor above 2 close-on-exec, so nothing the
//!   process was started with reaches a program it executes.
//! - [`new_session_for_child`]: for a `pre_exec` hook (between `fork` and `exec`): a new
//!   session without a controlling terminal (`setsid`, which also makes a new process group),
//!   and every descriptor above 2 close-on-exec again. Async-signal-safe.
//!
//! Owns these raw calls. It does not decide which processes get them (the executor: the shim
//! and a service's check command start in a session of their own; a task's command runs in
//! its shim's session, which has no terminal and nothing else in it).

use std::io;

/// `close_range`'s flag that marks instead of closing (Linux 5.11).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Marks every file descriptor above 2 close-on-exec. Uses `close_range` and falls back to
/// walking the descriptor table up to the process's limit on kernels without it.
pub fn mark_inherited_fds_cloexec() -> io::Result<()> {
    if close_range_cloexec() == 0 {
        return Ok(());
    }
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let top = i32::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
    for fd in 3..top {
        set_cloexec(fd);
    }
    Ok(())
}

/// For a `pre_exec` hook: starts a new session (no controlling terminal, a new process group
/// led by the child) and marks every descriptor above 2 close-on-exec. Only async-signal-safe
/// system calls; on a kernel without `close_range` it walks the first 65,536 descriptors.
pub fn new_session_for_child() -> io::Result<()> {
    // SAFETY: setsid takes no arguments; it is async-signal-safe.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    if close_range_cloexec() != 0 {
        for fd in 3..65_536 {
            set_cloexec(fd);
        }
    }
    Ok(())
}

/// Makes `command` start its child through [`new_session_for_child`] (for callers that may
/// not write `unsafe`, such as the daemon's tests standing in for a shim).
pub fn in_new_session(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: new_session_for_child makes only async-signal-safe calls.
    unsafe { command.pre_exec(new_session_for_child) }
}

/// `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`: 0 on success, -1 when the kernel lacks it.
fn close_range_cloexec() -> libc::c_long {
    // SAFETY: close_range takes plain integers and only changes descriptor flags; a kernel
    // without it answers ENOSYS (or EINVAL for the flag) and changes nothing.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    }
}

/// Sets FD_CLOEXEC on `fd` if it is open (a closed descriptor answers EBADF, ignored).
fn set_cloexec(fd: libc::c_int) {
    // SAFETY: fcntl on a plain integer descriptor only reads and sets its flags; async-signal-safe.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn clear_cloexec(fd: libc::c_int) {
        // SAFETY: plain flag calls on a descriptor this test owns.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
        }
    }

    #[test]
    fn a_child_sees_no_descriptor_above_2_and_has_its_own_session() {
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        clear_cloexec(fd);
        let script = format!(
            "if [ -e /proc/self/fd/{fd} ]; then echo leaked; fi; \
             cut -d' ' -f5,6 /proc/$$/stat; echo $$; \
             if ( : < /dev/tty ) 2>/dev/null; then echo has-tty; fi"
        );
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", &script]);
        // SAFETY: new_session_for_child makes only async-signal-safe calls.
        unsafe {
            cmd.pre_exec(new_session_for_child);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("leaked"), "{text}");
        assert!(!text.contains("has-tty"), "{text}");
        let numbers: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(numbers.len(), 3, "{text}");
        assert!(
            numbers.iter().all(|n| *n == numbers[2]),
            "session and group led by the child: {text}"
        );
    }

    #[test]
    fn inherited_descriptors_are_marked_close_on_exec() {
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        clear_cloexec(fd);
        mark_inherited_fds_cloexec().unwrap();
        // SAFETY: reading the flags of a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
    }
}
