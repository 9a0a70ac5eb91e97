//! The virtual clock's event queue: events ordered by time, then by the order they
//! were scheduled, so that a run is deterministic.
//!
//! Owns: ordering. Does not own what an event does (`timeline`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Something that happens at a point of virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// Job (index into the workload) is submitted.
    Submit(usize),
    /// Run `run` of job `job` ends (its duration or time limit is reached).
    Finish {
        /// Workload index.
        job: usize,
        /// Which start of the job this is (stale after an eviction or node failure).
        run: u32,
    },
    /// An evicted job's grace period is over: its resources are free.
    EvictDone {
        /// Workload index.
        job: usize,
        /// Which start of the job.
        run: u32,
    },
    /// Node event (index into the node events).
    Node(usize),
    /// A periodic scheduling cycle.
    Tick,
}

/// Events by (time, sequence).
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl EventQueue {
    /// Schedules `event` at `at_ms`.
    pub fn push(&mut self, at_ms: u64, event: Event) {
        self.heap.push(Reverse((at_ms, self.seq, event)));
        self.seq += 1;
    }

    /// Time of the next event.
    pub fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Removes and returns every event at `at_ms`, in scheduling order (including ones
    /// scheduled at `at_ms` while they are handled: call again until empty).
    pub fn pop_at(&mut self, at_ms: u64) -> Option<Event> {
        match self.heap.peek() {
            Some(Reverse((t, _, _))) if *t == at_ms => self.heap.pop().map(|Reverse((_, _, e))| e),
            _ => None,
        }
    }

    /// Events still queued.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(20, Event::Tick);
        q.push(10, Event::Submit(1));
        q.push(10, Event::Submit(0));
        q.push(10, Event::Node(3));
        assert_eq!(q.next_time(), Some(10));
        let at10: Vec<Event> = std::iter::from_fn(|| q.pop_at(10)).collect();
        assert_eq!(
            at10,
            vec![Event::Submit(1), Event::Submit(0), Event::Node(3)]
        );
        assert_eq!(q.next_time(), Some(20));
        assert_eq!(q.pop_at(10), None);
        assert_eq!(q.len(), 1);
    }
}
