//! What a task used, read from its cgroup when it ended: CPU time, memory peak and whether the
//! kernel's OOM killer struck, from the cgroup v1 files (`cpuacct.usage`,
//! `memory.max_usage_in_bytes`, `memory.oom_control`, `memory.failcnt`) or the v2 ones
//! (`cpu.stat`, `memory.peak`, `memory.events`).
//!
//! Also the usage of a task without a cgroup, from the rusage of the shim's `wait4`
//! ([`usage_from_rusage`], called by `signals.rs`).
//!
//! Owns reading and parsing these files and that conversion. It does not find the cgroup
//! (`cgroup.rs`) nor wait for the task (`signals.rs`).

use std::path::Path;

use super::{TaskExit, TaskUsage};

const MIB: u64 = 1 << 20;

/// Usage from a `wait4` rusage: user + system CPU time, and the peak resident set (`ru_maxrss`
/// is in KiB on Linux), rounded up to whole MiB. The OOM killer is not visible here.
pub(crate) fn usage_from_rusage(ru: &libc::rusage) -> TaskUsage {
    let ms = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1000 + u64::try_from(t.tv_usec).unwrap_or(0) / 1000
    };
    TaskUsage {
        cpu_ms: ms(ru.ru_utime) + ms(ru.ru_stime),
        memory_peak_mib: u64::try_from(ru.ru_maxrss).unwrap_or(0).div_ceil(1024),
        oom_killed: false,
    }
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The value of `key` in a flat-keyed file (`key value` per line), as in `memory.oom_control`,
/// `memory.events` and `cpu.stat`.
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| number(v)).flatten()
    })
}

/// Usage of a v1 cgroup: CPU from the `cpuacct` directory, memory and OOM from the `memory`
/// one. Kernels before 4.13 have no `oom_kill` counter: then a task that hit its limit
/// (`failcnt`) and died of SIGKILL counts as OOM-killed.
pub(crate) fn read_v1(cpuacct: Option<&Path>, memory: Option<&Path>, exit: TaskExit) -> TaskUsage {
    let cpu_ns = cpuacct
        .and_then(|d| read(d, "cpuacct.usage"))
        .and_then(|t| number(&t))
        .unwrap_or(0);
    let peak = memory
        .and_then(|d| read(d, "memory.max_usage_in_bytes"))
        .and_then(|t| number(&t))
        .unwrap_or(0);
    let oom_control = memory.and_then(|d| read(d, "memory.oom_control"));
    let oom_killed = match oom_control.as_deref().and_then(|t| keyed(t, "oom_kill")) {
        Some(kills) => kills > 0,
        None => {
            let failcnt = memory
                .and_then(|d| read(d, "memory.failcnt"))
                .and_then(|t| number(&t))
                .unwrap_or(0);
            failcnt > 0 && exit == TaskExit::Signaled(libc::SIGKILL)
        }
    };
    TaskUsage {
        cpu_ms: cpu_ns / 1_000_000,
        memory_peak_mib: peak.div_ceil(MIB),
        oom_killed,
    }
}

/// Usage of a v2 cgroup directory (`memory.peak` needs Linux 5.19; 0 before).
pub(crate) fn read_v2(dir: &Path) -> TaskUsage {
    let cpu_us = read(dir, "cpu.stat")
        .and_then(|t| keyed(&t, "usage_usec"))
        .unwrap_or(0);
    let peak = read(dir, "memory.peak")
        .and_then(|t| number(&t))
        .unwrap_or(0);
    let oom_kills = read(dir, "memory.events")
        .and_then(|t| keyed(&t, "oom_kill"))
        .unwrap_or(0);
    TaskUsage {
        cpu_ms: cpu_us / 1000,
        memory_peak_mib: peak.div_ceil(MIB),
        oom_killed: oom_kills > 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn keyed_files_parse() {
        let oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(keyed(oom, "oom_kill"), Some(2));
        assert_eq!(keyed(oom, "under_oom"), Some(0));
        assert_eq!(keyed(oom, "oom"), None);
        let events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed(events, "oom_kill"), Some(1));
        assert_eq!(
            keyed("usage_usec 1500\nuser_usec 1000\n", "usage_usec"),
            Some(1500)
        );
        assert_eq!(keyed("oom_kill x\n", "oom_kill"), None);
    }

    #[test]
    fn v1_files_make_usage() {
        let dir = tempfile::tempdir().unwrap();
        let (cpu, mem) = (dir.path().join("cpuacct"), dir.path().join("memory"));
        fs::create_dir_all(&cpu).unwrap();
        fs::create_dir_all(&mem).unwrap();
        fs::write(cpu.join("cpuacct.usage"), "2500000000\n").unwrap();
        fs::write(mem.join("memory.max_usage_in_bytes"), "67108865\n").unwrap();
        fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        let usage = read_v1(Some(&cpu), Some(&mem), TaskExit::Exited(0));
        let expect = TaskUsage {
            cpu_ms: 2500,
            memory_peak_mib: 65,
            oom_killed: true,
        };
        assert_eq!(usage, expect);
        // An old kernel without the oom_kill counter: limit hit and SIGKILL.
        fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\n",
        )
        .unwrap();
        fs::write(mem.join("memory.failcnt"), "3\n").unwrap();
        assert!(read_v1(None, Some(&mem), TaskExit::Signaled(9)).oom_killed);
        assert!(!read_v1(None, Some(&mem), TaskExit::Exited(1)).oom_killed);
        assert_eq!(read_v1(None, None, TaskExit::Lost), TaskUsage::default());
    }

    #[test]
    fn v2_files_make_usage() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("cpu.stat"),
            "usage_usec 1234567\nuser_usec 1\n",
        )
        .unwrap();
        fs::write(dir.path().join("memory.peak"), "1048576\n").unwrap();
        fs::write(
            dir.path().join("memory.events"),
            "low 0\noom 0\noom_kill 0\n",
        )
        .unwrap();
        let expect = TaskUsage {
            cpu_ms: 1234,
            memory_peak_mib: 1,
            oom_killed: false,
        };
        assert_eq!(read_v2(dir.path()), expect);
    }
}
