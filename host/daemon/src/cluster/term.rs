//! This controller's term: the etcd revision that made it leader (`gantry_store::election`),
//! 0 for a controller alone on sled. Every call to an agent carries it (`X-Gantry-Term`),
//! and so does every heartbeat reply; an agent refuses calls and ignores replies from a
//! term below the highest it has seen, so a controller that lost leadership without
//! noticing cannot start or stop anything (`host/daemon/src/agent/server.rs`).
//!
//! Owns: the process's term and the header's name. Does not own elections
//! (`leadership.rs`) or the agent's check.

use std::sync::atomic::{AtomicI64, Ordering};

/// The header that carries the term.
pub const TERM_HEADER: &str = "x-gantry-term";

static TERM: AtomicI64 = AtomicI64::new(0);

/// Sets this process's term (once it leads).
pub fn set(term: i64) {
    TERM.store(term, Ordering::SeqCst);
}

/// This process's term.
pub fn current() -> i64 {
    TERM.load(Ordering::SeqCst)
}

/// The term a request or reply carried (absent: 0).
pub fn parse(value: Option<&str>) -> i64 {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The highest term an agent has seen; [`Highest::admits`] refuses older ones.
#[derive(Debug, Default)]
pub struct Highest(AtomicI64);

impl Highest {
    /// Whether a call of `term` may act: it is not older than the highest seen (which it
    /// then becomes, when newer).
    pub fn admits(&self, term: i64) -> bool {
        let seen = self.0.fetch_max(term, Ordering::SeqCst);
        term >= seen
    }

    /// The highest term seen.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_term_is_refused_once_a_newer_one_was_seen() {
        let h = Highest::default();
        assert!(h.admits(0));
        assert!(h.admits(7));
        assert!(h.admits(7), "the same term again");
        assert!(!h.admits(3));
        assert!(h.admits(9));
        assert_eq!(h.get(), 9);
        assert_eq!(parse(Some(" 12 ")), 12);
        assert_eq!(parse(None), 0);
    }
}
