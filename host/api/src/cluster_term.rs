//! This controller's term: the etcd revision that made it leader (`gantry_store::election`),
//! 0 for a controller alone on sled. Every call to an agent carries it (`X-Gantry-Term`),
//! and so does every heartbeat reply; an agent refuses calls and ignores replies from a
//! term below the highest it has seen, so a controller that lost leadership without
//! noticing cannot start or stop anything (the daemon's `agent/server.rs`). An agent
//! keeps the highest term in `<data_dir>/agent-term`, so a restarted agent still refuses
//! a deposed controller.
//!
//! Owns: the process's term and the header's name. Does not own elections
//! (the daemon's `leadership`) or the agent's check.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
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
pub struct Highest {
    seen: AtomicI64,
    /// Where it is kept across restarts (`None`: in memory only).
    file: Option<PathBuf>,
}

impl Highest {
    /// The highest term, kept in `file`: it starts from what a previous run wrote there.
    pub fn kept_in(file: PathBuf) -> Self {
        let seen = std::fs::read_to_string(&file)
            .map(|text| parse(Some(&text)))
            .unwrap_or(0);
        Self {
            seen: AtomicI64::new(seen),
            file: Some(file),
        }
    }

    /// Whether a call of `term` may act: it is not older than the highest seen (which it
    /// then becomes, when newer, and is written down).
    pub fn admits(&self, term: i64) -> bool {
        let seen = self.seen.fetch_max(term, Ordering::SeqCst);
        if term > seen {
            self.keep(term);
        }
        term >= seen
    }

    /// The highest term seen.
    pub fn get(&self) -> i64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Writes `term` to the file (a new file renamed over the old one); a failure is
    /// logged, and the term is still refused in memory until a restart.
    fn keep(&self, term: i64) {
        let Some(file) = &self.file else { return };
        let fresh = file.with_extension("new");
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&fresh)
            .and_then(|mut f| {
                writeln!(f, "{term}")?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&fresh, file));
        if let Err(e) = written {
            tracing::warn!(term, file = %file.display(), "cannot keep the highest term: {e}");
        }
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

    #[test]
    fn a_restarted_agent_still_refuses_the_terms_it_refused_before() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent-term");
        let h = Highest::kept_in(file.clone());
        assert!(h.admits(5));
        assert!(h.admits(11));
        drop(h);
        let again = Highest::kept_in(file);
        assert_eq!(again.get(), 11);
        assert!(
            !again.admits(5),
            "a deposed controller's term after a restart"
        );
        assert!(again.admits(12));
    }
}
