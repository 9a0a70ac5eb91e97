//! Making an unpacked image harmless before it enters the cache (an image is hostile input):
//! device nodes, FIFOs and sockets are removed, setuid and setgid bits cleared, and the
//! `security.*` and `trusted.*` extended attributes removed — file capabilities
//! (`security.capability`) among them, so that no file of the cache grants a privilege when
//! executed, whatever reaches it later. Links are never followed (`l*` calls only). The
//! runtime's `no_new_privileges` and device rules stop the same things inside a container.
//!
//! Owns: that walk. Does not own unpacking (`image_store`).

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

/// The prefixes of extended attributes removed from every file of an image.
const STRIPPED: [&[u8]; 2] = [b"security.", b"trusted."];

/// Removes device nodes, FIFOs and sockets under `root`, clears setuid/setgid bits and
/// removes `security.*`/`trusted.*` extended attributes, never following a symbolic link.
pub fn defuse(root: &Path) -> io::Result<()> {
    strip_xattrs(root)?;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = fs::symlink_metadata(&path)?;
            let ft = meta.file_type();
            if ft.is_block_device() || ft.is_char_device() || ft.is_fifo() || ft.is_socket() {
                fs::remove_file(&path)?;
                continue;
            }
            strip_xattrs(&path)?;
            if ft.is_symlink() {
                continue;
            }
            let mode = meta.permissions().mode();
            if mode & 0o6000 != 0 {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o1777))?;
            }
            if ft.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}

/// The names of the extended attributes of `path` itself (a link's own, not its target's).
fn xattr_names(path: &CStr) -> io::Result<Vec<CString>> {
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `path` is NUL-terminated; `buf` is writable for `buf.len()` bytes.
        let n = unsafe { libc::llistxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf.truncate(n as usize);
            break;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ERANGE) if buf.len() < (1 << 20) => buf.resize(buf.len() * 4, 0),
            // A file system without extended attributes has none to remove.
            Some(libc::ENOTSUP) => return Ok(Vec::new()),
            _ => return Err(err),
        }
    }
    Ok(buf
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .filter_map(|name| CString::new(name).ok())
        .collect())
}

/// Removes the `security.*` and `trusted.*` extended attributes of `path` itself.
fn strip_xattrs(path: &Path) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    for name in xattr_names(&c_path)? {
        if !STRIPPED.iter().any(|p| name.as_bytes().starts_with(p)) {
            continue;
        }
        // SAFETY: both are NUL-terminated C strings that live for the call.
        if unsafe { libc::lremovexattr(c_path.as_ptr(), name.as_ptr()) } != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENODATA) {
                return Err(io::Error::other(format!(
                    "cannot remove {} from {}: {err}",
                    name.to_string_lossy(),
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn set_xattr(path: &Path, name: &str, value: &[u8]) {
        let p = CString::new(path.as_os_str().as_bytes()).unwrap();
        let n = CString::new(name).unwrap();
        // SAFETY: valid C strings and a buffer of `value.len()` bytes.
        let rc = unsafe {
            libc::lsetxattr(
                p.as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        assert_eq!(rc, 0, "{name}: {}", io::Error::last_os_error());
    }

    fn names(path: &Path) -> Vec<String> {
        let p = CString::new(path.as_os_str().as_bytes()).unwrap();
        xattr_names(&p)
            .unwrap()
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    /// A version-2 file capability granting CAP_NET_RAW (13) permitted and effective.
    fn cap_net_raw() -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(0x0200_0001u32.to_le_bytes()); // VFS_CAP_REVISION_2 | effective
        v.extend((1u32 << 13).to_le_bytes()); // permitted, low word
        v.extend(0u32.to_le_bytes()); // inheritable, low word
        v.extend(0u32.to_le_bytes()); // permitted, high word
        v.extend(0u32.to_le_bytes()); // inheritable, high word
        v
    }

    #[test]
    fn defuse_removes_special_files_and_setuid_bits_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        fs::create_dir_all(root.join("bin")).unwrap();
        let suid = root.join("bin/su");
        fs::write(&suid, b"x").unwrap();
        fs::set_permissions(&suid, fs::Permissions::from_mode(0o4755)).unwrap();
        // A link out of the root to a setuid file outside: left alone, target untouched.
        let outside = dir.path().join("outside");
        fs::write(&outside, b"y").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("bin/out")).unwrap();
        let fifo = CString::new(root.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        defuse(&root).unwrap();
        assert_eq!(
            fs::metadata(&suid).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(
            fs::metadata(&outside).unwrap().permissions().mode() & 0o7777,
            0o4755
        );
        assert!(!root.join("fifo").exists());
    }

    #[test]
    fn file_capabilities_and_trusted_attributes_are_removed_but_not_through_links() {
        // SAFETY: no preconditions.
        let root_user = unsafe { libc::geteuid() } == 0;
        assert!(
            root_user,
            "setting security.capability and trusted.* needs root (CI runs this as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        fs::create_dir_all(root.join("bin")).unwrap();
        let ping = root.join("bin/ping");
        fs::write(&ping, b"#!/bin/sh\n").unwrap();
        fs::set_permissions(&ping, fs::Permissions::from_mode(0o755)).unwrap();
        set_xattr(&ping, "security.capability", &cap_net_raw());
        set_xattr(&ping, "trusted.overlay.opaque", b"y");
        set_xattr(&ping, "user.note", b"kept");
        set_xattr(&root.join("bin"), "trusted.x", b"1");
        let outside = dir.path().join("outside");
        fs::write(&outside, b"y").unwrap();
        set_xattr(&outside, "security.capability", &cap_net_raw());
        std::os::unix::fs::symlink(&outside, root.join("bin/out")).unwrap();
        assert!(names(&ping).contains(&"security.capability".to_string()));
        defuse(&root).unwrap();
        assert_eq!(names(&ping), ["user.note"]);
        assert!(names(&root.join("bin")).is_empty());
        assert_eq!(
            names(&outside),
            ["security.capability"],
            "a link's target outside the image is untouched"
        );
    }
}
