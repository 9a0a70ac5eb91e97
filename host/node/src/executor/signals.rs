//! The few raw libc calls the executor needs: signalling a process group, asking whether a process
//! or group still exists (zombies count as gone), recognising a shim by its command line after a
//! restart.
//!
//! Owns the executor's `unsafe` blocks for signalling and waiting (the other raw calls live with
//! their purpose: `child.rs`, `identity.rs`, `bpf.rs`, and the shim's own signal dispositions
//! in `shim_signals.rs`). It does not decide when to signal (that is
//! `mod.rs`) and knows nothing of tasks or exit records.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A pid we may pass to `kill`: 2..=i32::MAX. Pid 0 and 1 are refused because `kill(0)`,
/// `kill(-1)` and `kill(-0)` address far more than one task's processes.
fn raw_pid(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|p| *p > 1)
}

fn invalid_pid(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("refusing to signal pid {pid}"),
    )
}

/// Sends `sig` to every process of the process group `pgid`.
pub(crate) fn signal_group(pgid: u32, sig: libc::c_int) -> io::Result<()> {
    let raw = raw_pid(pgid).ok_or_else(|| invalid_pid(pgid))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; `-raw` is a negative
    // pgid below -1, so only that group is addressed.
    let rc = unsafe { libc::kill(-raw, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The processes of group `pgid` other than its leader, each with its parent: read from
/// `/proc` (a process that ends meanwhile is simply not there).
fn group_members(pgid: u32) -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name in parentheses (which may hold anything): state, ppid, pgrp.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(ppid), Some(pgrp)) = (
            fields.get(1).and_then(|f| f.parse::<u32>().ok()),
            fields.get(2).and_then(|f| f.parse::<u32>().ok()),
        ) else {
            continue;
        };
        if pgrp == pgid && pid != pgid {
            out.push((pid, ppid));
        }
    }
    out
}

/// Sends `sig` to part of the task group `pgid`, whose leader is the task's shim and whose
/// leader's child is the task's command (a script's shell): `shell_only`, that child alone
/// (SLURM's `--signal=B:`); else every process but that child (`--signal=`: the steps and
/// whatever the script started). How many processes were signalled.
pub(crate) fn signal_part_of_group(
    pgid: u32,
    sig: libc::c_int,
    shell_only: bool,
) -> io::Result<usize> {
    raw_pid(pgid).ok_or_else(|| invalid_pid(pgid))?;
    let mut sent = 0;
    for (pid, ppid) in group_members(pgid) {
        if (ppid == pgid) != shell_only {
            continue;
        }
        let Some(raw) = raw_pid(pid) else { continue };
        // SAFETY: kill(2) on one positive pid above 1 touches no memory of ours.
        if unsafe { libc::kill(raw, sig) } == 0 {
            sent += 1;
        }
    }
    Ok(sent)
}

/// Sends SIGKILL to the single process `pid` (a leftover found in a task's cgroup). Pids 0
/// and 1 and out-of-range pids are ignored.
pub(crate) fn kill_process(pid: u64) {
    let Some(raw) = u32::try_from(pid).ok().and_then(raw_pid) else {
        return;
    };
    // SAFETY: kill(2) on one positive pid above 1 touches no memory of ours.
    unsafe {
        libc::kill(raw, libc::SIGKILL);
    }
}

/// Whether any process (zombies included) is still in the process group `pgid`.
pub(crate) fn group_exists(pgid: u32) -> bool {
    let Some(raw) = raw_pid(pgid) else {
        return false;
    };
    // SAFETY: signal 0 only checks existence and permission; no memory is touched.
    let rc = unsafe { libc::kill(-raw, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether the process `pid` exists and is not a zombie.
pub(crate) fn process_alive(pid: u32) -> bool {
    let Some(raw) = raw_pid(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks existence and permission; no memory is touched.
    let rc = unsafe { libc::kill(raw, 0) };
    if rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    !matches!(proc_state(pid), Some('Z' | 'X'))
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3 onwards), if it can be
/// read.
fn proc_stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself contain ") ".
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `Z`, ...), if it can be read.
fn proc_state(pid: u32) -> Option<char> {
    proc_stat_fields(pid)?.first()?.chars().next()
}

/// When the process `pid` started (field 22 of `/proc/<pid>/stat`, clock ticks since boot):
/// with the pid, it names one process even after pids wrap around.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    proc_stat_fields(pid)?.get(19)?.parse().ok()
}

/// Whether the process group `pgid` is still the one whose leader started at `leader_start`
/// (`None`: the leader had already exited). A pid stays reserved while any member of its
/// group lives, so the number can only have been reused once the whole group is gone, and
/// then by a process that is not the leader we knew.
pub(crate) fn same_group(pgid: u32, leader_start: Option<u64>) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    match start_time(pgid) {
        // No process with that pid: members of our group remain, the leader is gone.
        None => true,
        Some(now) => leader_start == Some(now),
    }
}

/// Whether `pid` is alive and is the shim that writes `exit_path`: it must run as the daemon's
/// account and lead a session of its own, as every shim does (a user's process that merely
/// names the path is not adopted), and its command line must contain `exit_path` as one
/// argument, which guards against the pid having been reused while the daemon was down.
/// Without a readable `/proc` neither is checked.
pub(crate) fn shim_alive(pid: u32, exit_path: &Path) -> bool {
    if !process_alive(pid) {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => {
            cmdline_has_arg(&cmdline, exit_path.as_os_str()) && started_by_the_daemon(pid)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => !Path::new("/proc/self").exists(),
        Err(_) => true,
    }
}

/// A live shim writing `exit_path`, found by scanning `/proc` for a command line that contains
/// it as one argument: after a restart, the shim of a task whose pid never reached the store.
pub(crate) fn find_shim(exit_path: &Path) -> Option<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| cmdline_has_arg(&c, exit_path.as_os_str()))
                && started_by_the_daemon(*pid)
                && process_alive(*pid)
        })
}

/// Whether `pid` looks as only a shim the daemon started can: its real and effective uid are
/// the daemon's (no other account can make a process of root's), and it leads its own session
/// (`process_hygiene::new_session_for_child`) or, as shims started before sessions did, its
/// own process group.
fn started_by_the_daemon(pid: u32) -> bool {
    let own = gantry_private_files::daemon_uid();
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let uids_are_ours = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .is_some_and(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() == 4 && ids.iter().all(|id| id.parse::<u32>() == Ok(own))
        });
    let (group, session) = group_and_session(pid).unwrap_or((0, 0));
    uids_are_ours && (session == pid || group == pid)
}

/// The process group and session of `pid` (fields 5 and 6 of `/proc/<pid>/stat`).
fn group_and_session(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace().skip(2);
    Some((after.next()?.parse().ok()?, after.next()?.parse().ok()?))
}

/// Whether the NUL-separated `cmdline` contains `arg` as a whole argument.
fn cmdline_has_arg(cmdline: &[u8], arg: &OsStr) -> bool {
    cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes())
}

/// Waits for the child `pid` with `wait4`: its raw wait status and what it and its reaped
/// descendants used.
pub(crate) fn wait_with_usage(pid: u32) -> io::Result<(i32, super::TaskUsage)> {
    let raw = libc::pid_t::try_from(pid).map_err(|_| invalid_pid(pid))?;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: all-zero is a valid rusage.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: both out-pointers are valid for writes for the duration of the call.
        let rc = unsafe { libc::wait4(raw, &mut status, 0, &mut usage) };
        if rc == raw {
            return Ok((status, super::usage::usage_from_rusage(&usage)));
        }
        let err = io::Error::last_os_error();
        if rc < 0 && err.raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dangerous_pids() {
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
        assert!(signal_group(u32::MAX, 0).is_err());
        assert!(!group_exists(0));
        assert!(!process_alive(1));
    }

    #[test]
    fn own_process_is_alive() {
        assert!(process_alive(std::process::id()));
    }

    #[test]
    fn zombie_counts_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Not yet reaped: the pid exists as a zombie, but it no longer counts as alive.
        assert!(!process_alive(pid));
        child.wait().unwrap();
    }

    #[test]
    fn a_group_is_known_by_its_leaders_start_time() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = start_time(pid);
        assert!(start.is_some());
        assert!(same_group(pid, start));
        assert!(
            !same_group(pid, start.map(|s| s + 1)),
            "another leader of that number"
        );
        assert!(!same_group(pid, None), "a leader that had exited before");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!same_group(pid, start), "the group is gone");
    }

    /// `sh -c 'sleep 30; true' <exit path>`: a process whose command line names the path (the
    /// `; true` keeps the shell from exec'ing sleep in its place), started by `prepare`.
    fn naming(
        exit: &Path,
        prepare: impl FnOnce(&mut std::process::Command),
    ) -> std::process::Child {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30; true"]).arg(exit);
        prepare(&mut cmd);
        let child = cmd.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read(format!("/proc/{}/cmdline", child.id()))
            .is_ok_and(|c| cmdline_has_arg(&c, exit.as_os_str()))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the process never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child
    }

    fn stop(mut child: std::process::Child) {
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn only_a_shim_the_daemon_started_is_adopted_not_a_process_that_names_its_exit_file() {
        use std::os::unix::process::CommandExt;
        // SAFETY: no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "this test starts a decoy as another user and needs root (CI runs it as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        let exit = dir.path().join("task-0.exit");
        // A process of the daemon's own account that leads neither a session nor a group.
        let decoy = naming(&exit, |_| {});
        assert!(!shim_alive(decoy.id(), &exit));
        assert_eq!(find_shim(&exit), None);
        stop(decoy);
        // Another account's decoy that leads a session of its own, as alice's could.
        let decoy = naming(&exit, |c| {
            c.uid(65534).gid(65534);
            // SAFETY: new_session_for_child makes only async-signal-safe calls.
            unsafe {
                c.pre_exec(crate::process_hygiene::new_session_for_child);
            }
        });
        assert!(!shim_alive(decoy.id(), &exit));
        assert_eq!(find_shim(&exit), None);
        stop(decoy);
        // Started as the executor starts a shim: the daemon's account, a session of its own.
        let shim = naming(&exit, |c| {
            // SAFETY: as above.
            unsafe {
                c.pre_exec(crate::process_hygiene::new_session_for_child);
            }
        });
        assert!(shim_alive(shim.id(), &exit));
        assert_eq!(find_shim(&exit), Some(shim.id()));
        stop(shim);
    }

    #[test]
    fn cmdline_matching() {
        let cmdline = b"gantry\0task-shim\0--exit-file\0/x/exit.json\0--\0sh\0";
        assert!(cmdline_has_arg(cmdline, OsStr::new("/x/exit.json")));
        assert!(!cmdline_has_arg(cmdline, OsStr::new("/x/exit")));
        assert!(!cmdline_has_arg(b"", OsStr::new("/x/exit.json")));
    }
}
