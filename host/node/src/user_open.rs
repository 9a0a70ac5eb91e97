//! Opening a path a user named with that user's rights, for root: a child of the caller
//! drops to the user's supplementary groups, group and user (in that order), opens the path
//! as the user, and hands the descriptor back over a socket pair (`SCM_RIGHTS`). Root then
//! uses the descriptor, never the path: what it reads or mounts is what the user could open,
//! whatever links or renames happen around it. A file in another user's 0700 directory, or a
//! link to a root-only file, fails with the kernel's "permission denied".
//!
//! The child is forked, never exec'd, so it only makes async-signal-safe calls (everything
//! is prepared before the fork). Once it has switched users the kernel marks it not
//! dumpable, so the user can neither trace it nor read its descriptors through `/proc`; the
//! user may kill it, which only fails the open. When the caller is not root, or the user is
//! the caller itself, the path is opened directly.
//!
//! Owns: that primitive. Does not decide which user (the executor's identity) nor what is
//! done with the descriptor (`container::local_import`, `container::user_mounts`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// How long the opening child may take (a hung network file system) before it is killed.
const OPEN_DEADLINE: Duration = Duration::from_secs(120);

/// The user a path is opened as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary group included, as `getgrouplist` gives them).
    pub groups: Vec<u32>,
}

/// Why a path could not be opened as the user.
#[derive(Debug, thiserror::Error)]
pub enum UserOpenError {
    /// The kernel refused the user (`EACCES`, `ENOENT`, `ELOOP`...).
    #[error("{path}: {source} (opened as uid {uid})")]
    Refused {
        path: String,
        uid: u32,
        source: io::Error,
    },
    /// The path cannot be passed to the kernel (a NUL byte).
    #[error("{0}: not a valid path")]
    BadPath(String),
    /// The child that opens could not be made or did not answer.
    #[error("opening {path} as uid {uid}: {message}")]
    Child {
        path: String,
        uid: u32,
        message: String,
    },
}

impl UserOpenError {
    /// The kernel's error when the user was refused.
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            Self::Refused { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Opens `path` with `flags` (`O_CLOEXEC` is added) as the user `who`.
pub fn open_as(
    who: &Credentials,
    path: &Path,
    flags: libc::c_int,
) -> Result<OwnedFd, UserOpenError> {
    let shown = path.display().to_string();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| UserOpenError::BadPath(shown.clone()))?;
    let flags = flags | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me != 0 || who.uid == me {
        return open_here(&c_path, flags).map_err(|source| UserOpenError::Refused {
            path: shown,
            uid: me,
            source,
        });
    }
    let child_err = |message: String| UserOpenError::Child {
        path: shown.clone(),
        uid: who.uid,
        message,
    };
    let (ours, theirs) = socket_pair().map_err(|e| child_err(format!("socketpair: {e}")))?;
    let timeout = libc::timeval {
        tv_sec: OPEN_DEADLINE.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a valid socket and a timeval that lives for the call.
    unsafe {
        libc::setsockopt(
            ours.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    let groups: Vec<libc::gid_t> = who.groups.clone();
    // SAFETY: fork has no preconditions; the child below only makes async-signal-safe calls
    // on memory prepared before the fork, then `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(child_err(format!("fork: {}", io::Error::last_os_error())));
    }
    if pid == 0 {
        child(
            &c_path,
            flags,
            who.uid,
            who.gid,
            &groups,
            theirs.as_raw_fd(),
        );
    }
    drop(theirs);
    let answer = receive(&ours);
    let mut status = 0;
    if answer.is_err() {
        // SAFETY: `pid` is our own child; SIGKILL ends it whatever it does.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SAFETY: waits for our own child, which has answered or been killed.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match answer {
        Ok(Ok(fd)) => Ok(fd),
        Ok(Err(errno)) => Err(UserOpenError::Refused {
            path: shown,
            uid: who.uid,
            source: io::Error::from_raw_os_error(errno),
        }),
        Err(message) => Err(child_err(message)),
    }
}

fn open_here(path: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `path` is NUL-terminated and lives for the call.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live array of two ints for the kernel to fill.
    let done = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for one `cmsghdr` with one descriptor, aligned as the kernel wants.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// The forked child: becomes the user, opens, sends the descriptor (or the errno) and exits.
fn child(
    path: &CString,
    flags: libc::c_int,
    uid: u32,
    gid: u32,
    groups: &[libc::gid_t],
    sock: libc::c_int,
) -> ! {
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid, open, sendmsg, _exit)
    // on memory prepared before the fork (the stack here is the child's own copy).
    unsafe {
        let mut errno: i32 = 0;
        let mut fd = -1;
        if libc::setgroups(groups.len(), groups.as_ptr()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            errno = *libc::__errno_location();
            // Never open anything with root's rights.
            errno = if errno == 0 { libc::EPERM } else { errno };
        } else {
            fd = libc::open(path.as_ptr(), flags, 0);
            if fd < 0 {
                errno = *libc::__errno_location();
            }
        }
        let mut data = errno;
        let mut iov = libc::iovec {
            iov_base: (&raw mut data).cast(),
            iov_len: std::mem::size_of::<i32>(),
        };
        let mut control = ControlBuffer([0; 64]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if fd >= 0 {
            let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
            msg.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        }
        let sent = libc::sendmsg(sock, &raw const msg, libc::MSG_NOSIGNAL);
        libc::_exit(if sent < 0 { 1 } else { 0 });
    }
}

/// The child's answer: a descriptor, or the errno of its refusal; `Err` when it gave none.
fn receive(sock: &OwnedFd) -> Result<Result<OwnedFd, i32>, String> {
    let mut data: i32 = 0;
    let mut iov = libc::iovec {
        iov_base: (&raw mut data).cast(),
        iov_len: std::mem::size_of::<i32>(),
    };
    let mut control = ControlBuffer([0; 64]);
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: `msg` points at live buffers of the sizes it gives.
    let got = unsafe { libc::recvmsg(sock.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
    if got < 0 {
        return Err(format!("no answer: {}", io::Error::last_os_error()));
    }
    if got as usize != std::mem::size_of::<i32>() {
        return Err("the child ended without an answer".into());
    }
    // SAFETY: the kernel filled `msg`; CMSG_FIRSTHDR reads within its control buffer.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    // SAFETY: `cmsg`, when not null, points into `control`, which the kernel filled.
    let fd = unsafe {
        (!cmsg.is_null()
            && (*cmsg).cmsg_level == libc::SOL_SOCKET
            && (*cmsg).cmsg_type == libc::SCM_RIGHTS)
            .then(|| std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>()))
    };
    match fd {
        // SAFETY: the kernel installed this descriptor in our table for us alone.
        Some(fd) if fd >= 0 => Ok(Ok(unsafe { OwnedFd::from_raw_fd(fd) })),
        _ if data != 0 => Ok(Err(data)),
        _ => Err("the child answered without a descriptor".into()),
    }
}

/// The path the kernel gives for `fd` (`/proc/self/fd/N`), where it was opened.
pub fn path_of(fd: &OwnedFd) -> io::Result<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOBODY: Credentials = Credentials {
        uid: 65534,
        gid: 65534,
        groups: Vec::new(),
    };

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_user_opens_what_it_may_and_is_refused_what_it_may_not() {
        assert!(
            is_root(),
            "this test switches users and needs root (CI runs it as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = dir.path().join("open.txt");
        std::fs::write(&open, "everyone\n").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "root only\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let inside = private.join("readable.txt");
        std::fs::write(&inside, "behind a 0700 directory\n").unwrap();
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o644)).unwrap();

        let fd = open_as(&NOBODY, &open, libc::O_RDONLY).unwrap();
        let text = std::fs::read_to_string(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert_eq!(text, "everyone\n");
        assert_eq!(path_of(&fd).unwrap(), open);
        for refused in [&secret, &link, &inside] {
            let err = open_as(&NOBODY, refused, libc::O_RDONLY).unwrap_err();
            let kind = err.os_error().map(io::Error::kind);
            assert_eq!(
                kind,
                Some(io::ErrorKind::PermissionDenied),
                "{refused:?}: {err}"
            );
        }
        // Root itself opens all of them (the caller's own uid needs no child).
        let root = Credentials {
            uid: 0,
            gid: 0,
            groups: vec![0],
        };
        open_as(&root, &inside, libc::O_RDONLY).unwrap();
        let missing = open_as(&NOBODY, &dir.path().join("none"), libc::O_RDONLY).unwrap_err();
        assert_eq!(
            missing.os_error().map(io::Error::kind),
            Some(io::ErrorKind::NotFound)
        );
    }
}
