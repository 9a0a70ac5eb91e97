//! What a task's child (and a service's check command) does between `fork` and `exec`: join
//! the task's cgroups (so the command is limited from its first instruction, while the shim
//! itself stays outside), drop to the task's user (supplementary groups, group, user, in that
//! order: each later call needs the privilege the earlier one still has), and only then enter
//! the working directory (as the user: a directory the user may not enter is refused by the
//! kernel, never entered with root's rights), set the user's umask, and open the files a job
//! names for its output (`sbatch --output/--error`), as the user too. The child of a fork may
//! only make async-signal-safe calls, so everything is prepared (C strings, group arrays)
//! before the fork and the child only calls `open`, `write`, `close`, `setgroups`, `setgid`,
//! `setuid`, `chdir`, `umask`, `dup2` and `close`.
//!
//! Owns these raw calls. It does not decide which cgroups, which user or which directory (the
//! daemon passes them on the shim's command line, `shim_args.rs`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The ids a task's command switches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ids {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The umask a task's command starts with (the daemon itself runs with 077).
pub(crate) const TASK_UMASK: libc::mode_t = 0o022;

/// Everything the child does before `exec`, prepared before the fork.
#[derive(Debug, Clone)]
pub(crate) struct ChildSetup {
    procs: Vec<CString>,
    ids: Option<(libc::uid_t, libc::gid_t, Vec<libc::gid_t>)>,
    workdir: Option<CString>,
    /// Files for stdout and stderr (`sbatch --output/--error`), opened as the user.
    stdout_file: Option<CString>,
    stderr_file: Option<CString>,
}

impl ChildSetup {
    /// Prepares joining the cgroups whose `cgroup.procs` files are `procs`, switching to
    /// `ids` when given, then entering `workdir` when given.
    pub fn new(procs: &[PathBuf], ids: Option<&Ids>, workdir: Option<&Path>) -> io::Result<Self> {
        let c_path = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        };
        let procs = procs
            .iter()
            .map(|p| c_path(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            procs,
            ids: ids.map(|i| (i.uid, i.gid, i.groups.clone())),
            workdir: workdir.map(c_path).transpose()?,
            stdout_file: None,
            stderr_file: None,
        })
    }

    /// Also sends stdout and/or stderr to these files, opened for appending (created mode
    /// 0666 less the umask) by the child after it became the user and entered its working
    /// directory, which a relative name is relative to.
    pub fn with_output_files(
        mut self,
        stdout: Option<&Path>,
        stderr: Option<&Path>,
    ) -> io::Result<Self> {
        let c_path = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        };
        self.stdout_file = stdout.map(c_path).transpose()?;
        self.stderr_file = stderr.map(c_path).transpose()?;
        Ok(self)
    }

    /// Runs in the child after `fork`, before `exec`: only async-signal-safe calls.
    pub fn apply(&self) -> io::Result<()> {
        for path in &self.procs {
            crate::cgroup_join::join_cgroup(path)?;
        }
        if let Some((uid, gid, groups)) = &self.ids {
            // SAFETY: `groups` is a live array of `groups.len()` gids; the three calls only read
            // their arguments. They are async-signal-safe system calls (the child is the only
            // thread of its process, so glibc needs no cross-thread broadcast).
            unsafe {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(*gid) != 0
                    || libc::setuid(*uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        // SAFETY: `dir` is NUL-terminated and lives for the call; chdir and umask are
        // async-signal-safe and only read their arguments.
        unsafe {
            if let Some(dir) = &self.workdir
                && libc::chdir(dir.as_ptr()) != 0
            {
                return Err(io::Error::last_os_error());
            }
            libc::umask(TASK_UMASK);
        }
        if let Some(path) = &self.stdout_file {
            redirect(path, 1)?;
        }
        match (&self.stderr_file, &self.stdout_file) {
            (Some(err), Some(out)) if err == out => {
                // SAFETY: dup2 takes two descriptors; 1 was just set up above.
                if unsafe { libc::dup2(1, 2) } < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            (Some(err), _) => redirect(err, 2)?,
            (None, _) => {}
        }
        Ok(())
    }
}

/// Opens `path` for appending (never as a controlling terminal) and makes it descriptor
/// `target`.
fn redirect(path: &CString, target: libc::c_int) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; open, dup2 and close take plain values.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOCTTY,
            0o666 as libc::c_uint,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let duped = libc::dup2(fd, target);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if duped < 0 {
            return Err(err);
        }
    }
    Ok(())
}
