//! The daemon's Unix socket (`socket` in the config, default `<data_dir>/gantry.sock`): the
//! same API as over TCP, for the CLI on the daemon's own node, where the kernel says who calls
//! (`SO_PEERCRED`, the way munge gives SLURM a uid without passwords). A caller here is the
//! local account of its uid and cannot claim to be anyone else; no token is needed.
//!
//! Owns: binding the socket (mode 0666 in a directory others may traverse, a stale socket
//! replaced, never a file of another kind), bounding its connections overall and per account
//! (`limited.rs`), the peer credentials of each connection ([`PeerCred`]) and the uid →
//! account name look-up. Does not own what a caller may do
//! (`crate::auth`) or the routes (`crate::api`).

pub mod client;
mod limited;

pub use limited::{CountedStream, LimitedUnixListener};

use std::ffi::CStr;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::UnixListener;

/// Who is on the other end of a Unix-socket connection, as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The caller's uid (`None` when the kernel could not say: such a caller has no identity).
    pub uid: Option<u32>,
}

impl Connected<IncomingStream<'_, LimitedUnixListener>> for PeerCred {
    fn connect_info(stream: IncomingStream<'_, LimitedUnixListener>) -> Self {
        Self {
            uid: stream.io().stream().peer_cred().ok().map(|c| c.uid()),
        }
    }
}

/// Binds the socket at `path`: its directory is created (0755) when missing; an old socket
/// there is removed first, anything else there is an error; the socket is 0666 (anyone on
/// the node may connect; the kernel names them).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.exists()
    {
        std::fs::create_dir_all(parent)?;
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

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

/// The daemon's own effective uid.
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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

    #[test]
    fn bind_replaces_a_stale_socket_and_refuses_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/gantry.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async {
            drop(bind(&path).unwrap());
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o666);
            drop(bind(&path).unwrap());
        });
        let file = dir.path().join("plain");
        std::fs::write(&file, "keep").unwrap();
        rt.block_on(async { assert!(bind(&file).is_err()) });
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }
}
