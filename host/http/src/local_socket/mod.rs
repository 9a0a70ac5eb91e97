//! The daemon's Unix socket (`socket` in the config, default `<data_dir>/gantry.sock`): the
//! same API as over TCP, for the CLI on the daemon's own node, where the kernel says who calls
//! (`SO_PEERCRED`, the way munge gives SLURM a uid without passwords). A caller here is the
//! local account of its uid and cannot claim to be anyone else; no token is needed.
//!
//! Owns: binding the socket (mode 0666 in a directory others may traverse, a stale socket
//! replaced, never a file of another kind; the system socket's directory opened again when an
//! earlier root daemon left it closed, `system_dir.rs`), bounding its connections overall and per account
//! (`limited.rs`), the peer credentials of each connection ([`PeerCred`]) and the uid →
//! account name look-up. Does not own what a caller may do
//! (the daemon's `auth`), the routes (the daemon's `api`) or the client side (`gantry_api::client`).

mod limited;
mod system_dir;

pub use limited::{CountedStream, LimitedUnixListener};
pub use system_dir::open_to_local_users;

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

/// Binds the socket at `path`: its directory is created (0755) when missing, and the system
/// socket's directory of a root daemon is opened (0755) when others may not search it
/// ([`open_to_local_users`]); an old socket there is removed first, anything else there is an
/// error; the socket is 0666 (anyone on the node may connect; the kernel names them).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.exists()
    {
        std::fs::create_dir_all(parent)?;
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
    }
    if let Some(old) = open_to_local_users(path)? {
        tracing::warn!(
            directory = %path.parent().unwrap_or(path).display(),
            "the system socket's directory was mode {old:04o} (left by an earlier root daemon?): local users could not reach the socket; made it 0755"
        );
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

pub use gantry_node::sys::{account_name, effective_uid as own_uid};

#[cfg(test)]
mod tests {
    use super::*;

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
