//! The human side of every pending reason: times relative to now (`+2h14m`) with the
//! absolute instant in ISO 8601 UTC, lists of nodes and jobs, and the sentences for
//! reserved, delaying, unlimited, unreservable and untested jobs.
//!
//! Owns: wording and number formatting. Does not own which reason applies (`plan`).

use crate::reserve::Reservation;
use crate::topology::Topo;
use gantry_sdk::{Cycle, JobId, Reason, ReasonCode};

/// A duration as `2h14m`, `1d3h`, `5m30s`, `45s` (whole seconds, rounded down).
pub fn span(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    let pair = |a: u64, ua: &str, b: u64, ub: &str| {
        if b == 0 {
            format!("{a}{ua}")
        } else {
            format!("{a}{ua}{b}{ub}")
        }
    };
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => pair(m, "m", sec, "s"),
        (0, _, _) => pair(h, "h", m, "m"),
        _ => pair(d, "d", h, "h"),
    }
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds).
pub fn iso(ms: u64) -> String {
    i64::try_from(ms / 1000)
        .ok()
        .and_then(|secs| jiff::Timestamp::from_second(secs).ok())
        .map_or_else(|| format!("{ms} ms"), |at| at.to_string())
}

/// An instant as `+2h14m (2024-05-01T12:00:00Z)`, relative to `now_ms`.
pub fn when(now_ms: u64, at_ms: u64) -> String {
    format!("+{} ({})", span(at_ms.saturating_sub(now_ms)), iso(at_ms))
}

fn list<T: std::fmt::Display>(items: &[T], max: usize) -> String {
    let shown: Vec<String> = items.iter().take(max).map(T::to_string).collect();
    match items.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// `job 4 ends` / `jobs 4, 9 end`.
pub fn jobs_end(ids: &[JobId]) -> String {
    match ids {
        [one] => format!("job {one} ends"),
        _ => format!("jobs {} end", list(ids, 8)),
    }
}

/// `node n1` / `nodes n1, n2` for the distinct positions of a reservation.
pub fn nodes(ctx: &Cycle, topo: &Topo, r: &Reservation) -> String {
    let mut pos: Vec<usize> = r.bookings.iter().map(|b| b.pos).collect();
    pos.sort_unstable();
    pos.dedup();
    let names: Vec<String> = pos.iter().map(|&p| topo.label(ctx, p)).collect();
    match names.as_slice() {
        [one] if one.starts_with("node ") => one.clone(),
        [one] => format!("node {one}"),
        _ => format!("nodes {}", list(&names, 8)),
    }
}

/// `<why it waits>; reserved to start at +4m50s (…) on node n1 when job 2 ends`.
pub fn reserved(ctx: &Cycle, topo: &Topo, why: &Reason, r: &Reservation) -> Reason {
    let mut msg = format!(
        "{}; reserved to start at {} on {}",
        why.message,
        when(ctx.now_ms, r.at_ms),
        nodes(ctx, topo, r)
    );
    if !r.waits_for.is_empty() {
        msg.push_str(&format!(" when {}", jobs_end(&r.waits_for)));
    }
    Reason::new(why.code, msg)
}

/// Fits now, but its time limit runs past a reservation that needs what it would use.
pub fn would_delay(now_ms: u64, limit_s: u64, job: JobId, at_ms: u64) -> Reason {
    Reason::new(
        ReasonCode::BlockedByHigherPriority,
        format!(
            "fits now but would delay job {job}'s reserved start at {}: with its time limit of {} it would still hold resources reserved for job {job} then",
            when(now_ms, at_ms),
            span(limit_s.saturating_mul(1000)),
        ),
    )
}

/// Fits now, but has no time limit and would hold what a reservation needs.
pub fn no_limit(now_ms: u64, job: JobId, at_ms: u64) -> Reason {
    Reason::new(
        ReasonCode::BlockedByHigherPriority,
        format!(
            "has no time limit, so it cannot be backfilled: it fits now but would hold resources job {job} needs at its reserved start at {}; a time limit lets it run in the gap before then",
            when(now_ms, at_ms)
        ),
    )
}

/// No reservation within the planning window.
pub fn unreservable(why: &Reason, window_s: u64, unlimited: usize) -> Reason {
    let mut msg = format!(
        "{}; no start found within the {} planning window (window_s)",
        why.message,
        span(window_s.saturating_mul(1000))
    );
    if unlimited > 0 {
        msg.push_str(&format!(
            "; {unlimited} running job(s) have no time limit and never free their resources for planning"
        ));
    }
    Reason::new(why.code, msg)
}

/// Blocked, and too many searches found nothing this call.
pub fn search_limit(why: &Reason, limit: u32) -> Reason {
    Reason::new(
        why.code,
        format!(
            "{}; not reserved: {limit} reservation searches already found no start this cycle, so no more are made",
            why.message
        ),
    )
}

/// Blocked, and every reservation of the cycle is taken.
pub fn no_slot(why: &Reason, holders: &[JobId]) -> Reason {
    let msg = format!(
        "{}; not reserved: this cycle's {} reservation(s) (conservative) went to higher-priority job(s) {}",
        why.message,
        holders.len(),
        list(holders, 8)
    );
    Reason::new(why.code, msg)
}

/// Beyond `max_jobs`.
pub fn not_tested(max_jobs: u32, rank: usize) -> Reason {
    Reason::new(
        ReasonCode::Other,
        format!(
            "not tested this cycle: backfill examines at most {max_jobs} jobs per cycle (max_jobs) and this job is number {rank} in priority order"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_instants_read_naturally() {
        assert_eq!(span(0), "0s");
        assert_eq!(span(45_000), "45s");
        assert_eq!(span(290_000), "4m50s");
        assert_eq!(span(3_600_000), "1h");
        assert_eq!(span(8_040_000), "2h14m");
        assert_eq!(span(7 * 86_400_000), "7d");
        assert_eq!(span(86_400_000 + 3 * 3_600_000 + 60_000), "1d3h");
        assert_eq!(iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(300_000), "1970-01-01T00:05:00Z");
        // 2024-02-29T12:34:56Z (leap day).
        assert_eq!(iso(1_709_210_096_000), "2024-02-29T12:34:56Z");
        assert_eq!(when(1_000, 3_601_000), "+1h (1970-01-01T01:00:01Z)");
    }

    #[test]
    fn job_lists_are_singular_or_plural_and_capped() {
        assert_eq!(jobs_end(&[2]), "job 2 ends");
        assert_eq!(jobs_end(&[1, 2]), "jobs 1, 2 end");
        let many: Vec<JobId> = (1..=10).collect();
        assert_eq!(
            jobs_end(&many),
            "jobs 1, 2, 3, 4, 5, 6, 7, 8 and 2 more end"
        );
    }
}
