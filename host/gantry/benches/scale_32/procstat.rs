//! `/proc` readings for the report: a process's CPU seconds (its own, and its reaped
//! children's) and memory (VmRSS, VmHWM), the host's busy and total CPU time, its load
//! average, and the bytes over a process's TCP connections (`ss`).
//!
//! Owns: parsing these files. Does not own which processes are read.

use super::day::Res;

/// Clock ticks per second.
fn hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// (own CPU seconds, reaped children's CPU seconds) of `pid`.
pub fn cpu_s(pid: u32) -> Res<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0);
    Ok(((at(11) + at(12)) / hz(), (at(13) + at(14)) / hz()))
}

/// (VmRSS, VmHWM) of `pid` in MiB.
pub fn memory_mib(pid: u32) -> Res<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0))
}

/// The host's (busy, total) CPU seconds across all cores.
pub fn host_cpu_s() -> Res<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    let total: f64 = (0..8).map(at).sum();
    Ok((busy / hz(), total / hz()))
}

/// The 1-minute load average.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU seconds (own + reaped children) summed over `pids`; a pid gone counts 0.
pub fn cpu_sum(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|p| cpu_s(*p).ok())
        .map(|(a, b)| a + b)
        .sum()
}

/// Bytes sent and received so far over the open TCP connections of each of `pids` (`ss -tinp`;
/// kept-alive connections, so heartbeats add up on one socket).
pub fn tcp_bytes(pids: &[u32]) -> Res<std::collections::BTreeMap<u32, (u64, u64)>> {
    let out = std::process::Command::new("ss").args(["-tinpH"]).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = std::collections::BTreeMap::new();
    let mut owner: Option<u32> = None;
    for line in text.lines() {
        if let Some(at) = line.find("pid=") {
            owner = line[at + 4..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|p| p.parse().ok())
                .filter(|p| pids.contains(p));
            continue;
        }
        let Some(pid) = owner.take() else {
            continue;
        };
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let entry: &mut (u64, u64) = found.entry(pid).or_default();
        entry.0 += field("bytes_sent:");
        entry.1 += field("bytes_received:");
    }
    Ok(found)
}
