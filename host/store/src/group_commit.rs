//! Group commit: callers that ask for a flush at about the same time share one. A caller's
//! writes are durable when a flush that *started after* its request has finished; while one
//! flush runs, the requests that arrive wait for the next, which one of them runs for all.
//! Under a burst of submits this turns N flushes in a row into about two, and no caller is
//! answered before its writes are on disk.
//!
//! Owns: the order of flush requests and who runs the flush. Does not own what is flushed
//! (the closure given).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
struct Rounds {
    /// Number given to the latest request.
    requested: u64,
    /// Every request numbered up to this one is durable.
    durable: u64,
    /// A flush is running.
    flushing: bool,
}

/// Shares flushes between concurrent callers.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    rounds: Mutex<Rounds>,
    done: Condvar,
}

fn relock<'a, T>(
    r: Result<MutexGuard<'a, T>, PoisonError<MutexGuard<'a, T>>>,
) -> MutexGuard<'a, T> {
    r.unwrap_or_else(PoisonError::into_inner)
}

impl GroupCommit {
    /// Returns once a flush that started after this call has succeeded; runs `flush` itself
    /// when no other caller is running one. A failed flush is returned to the caller that
    /// ran it; those waiting on it try again.
    pub(crate) fn flush<E>(&self, flush: impl Fn() -> Result<(), E>) -> Result<(), E> {
        let mut r = relock(self.rounds.lock());
        r.requested += 1;
        let mine = r.requested;
        loop {
            if r.durable >= mine {
                return Ok(());
            }
            if !r.flushing {
                r.flushing = true;
                // Everything requested so far is written: this flush covers it.
                let covers = r.requested;
                drop(r);
                let result = flush();
                r = relock(self.rounds.lock());
                r.flushing = false;
                if result.is_ok() {
                    r.durable = r.durable.max(covers);
                }
                self.done.notify_all();
                result?;
                continue;
            }
            r = relock(self.done.wait(r));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn concurrent_callers_share_flushes_and_each_sees_one_that_started_after_it() {
        let commit = Arc::new(GroupCommit::default());
        // `written` counts writes; a flush makes everything written so far durable.
        let written = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let flushes = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (commit, written, durable, flushes) = (
                    commit.clone(),
                    written.clone(),
                    durable.clone(),
                    flushes.clone(),
                );
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let my_write = written.fetch_add(1, Ordering::SeqCst) + 1;
                        commit
                            .flush(|| {
                                let upto = written.load(Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_micros(200));
                                durable.fetch_max(upto, Ordering::SeqCst);
                                flushes.fetch_add(1, Ordering::SeqCst);
                                Ok::<(), ()>(())
                            })
                            .unwrap();
                        assert!(durable.load(Ordering::SeqCst) >= my_write);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // How many flushes were shared depends on timing; that each caller saw its own
        // write durable (above) does not.
        assert!(flushes.load(Ordering::SeqCst) >= 1);
    }

    #[test]
    fn a_failed_flush_reaches_its_caller_and_the_next_one_tries_again() {
        let commit = GroupCommit::default();
        assert_eq!(commit.flush(|| Err("disk full")), Err("disk full"));
        assert_eq!(commit.flush(|| Ok::<(), &str>(())), Ok(()));
    }
}
