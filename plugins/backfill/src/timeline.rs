//! Free resources over time, built once per call.
//!
//! A [`Layer`] is what is free on every node and GPU at one instant. The [`Timeline`]
//! holds, sorted by time, every future change this call knows of: running jobs ending
//! at their `expected_end_ms` (a running job without a time limit never ends for
//! planning purposes), jobs started this cycle ending at their time limit, and
//! reservations taking resources at their start and giving them back at their end. It
//! also holds one *checkpoint* per reservation: the layer at the reservation's start
//! with the reservation already booked. Between checkpoints resources are only ever
//! given back, so a job holding resources over `[a, b)` never takes more than is free
//! if it fits the layer at `a` and every checkpoint inside `[a, b)`.
//!
//! Owns: bookings, layers, events, checkpoints. Does not own choosing nodes
//! (`scoring`) or searching for a reservation (`reserve`).

use crate::topology::Topo;
use gantry_sdk::{GpuShare, JobId, MILLI_PER_GPU, Node, RunningJob, TaskAllocation};
use std::collections::BTreeMap;
use std::ops::Range;

/// One task's resources on one node, by node position and GPU slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booking {
    /// Node position.
    pub pos: usize,
    /// CPU in milli-cores.
    pub cpu: u32,
    /// Memory in MiB.
    pub mem: u64,
    /// (GPU slot, milli-GPU).
    pub gpus: Vec<(usize, u32)>,
}

impl Booking {
    /// The contract allocation.
    pub fn to_allocation(&self, topo: &Topo) -> TaskAllocation {
        TaskAllocation {
            node: topo.nodes[self.pos].id,
            gpus: self
                .gpus
                .iter()
                .map(|&(slot, milli)| GpuShare {
                    index: topo.gpu_index[slot],
                    milli,
                })
                .collect(),
            cpu_milli: self.cpu,
            memory_mib: self.mem,
        }
    }

    /// The booking of a contract allocation (None when its node is unknown; GPUs the
    /// node does not have are left out).
    pub fn from_allocation(topo: &Topo, a: &TaskAllocation) -> Option<Self> {
        let pos = topo.pos(a.node)?;
        Some(Booking {
            pos,
            cpu: a.cpu_milli,
            mem: a.memory_mib,
            gpus: a
                .gpus
                .iter()
                .filter_map(|s| topo.slot_of(pos, s.index).map(|slot| (slot, s.milli)))
                .collect(),
        })
    }
}

/// Free resources at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Free CPU per node position, milli-cores.
    pub cpu: Vec<u32>,
    /// Free memory per node position, MiB.
    pub mem: Vec<u64>,
    /// Free milli-GPU per slot (0 for a slot that is not usable).
    pub gpu: Vec<u32>,
}

impl Layer {
    /// What is free now: the nodes as the host reports them. Nodes that are not up
    /// and unhealthy GPUs have nothing free.
    pub fn now(topo: &Topo, nodes: &[Node]) -> Self {
        let up = |pos: usize| topo.nodes[pos].up;
        Layer {
            cpu: nodes
                .iter()
                .enumerate()
                .map(|(p, n)| if up(p) { n.cpu_milli_free } else { 0 })
                .collect(),
            mem: nodes
                .iter()
                .enumerate()
                .map(|(p, n)| if up(p) { n.memory_mib_free } else { 0 })
                .collect(),
            gpu: nodes
                .iter()
                .flat_map(|n| n.gpus.iter().map(|g| g.free_milli.min(MILLI_PER_GPU)))
                .zip(&topo.usable)
                .map(|(free, &ok)| if ok { free } else { 0 })
                .collect(),
        }
    }

    /// Takes `b` (saturating: callers only take what fits).
    pub fn take(&mut self, b: &Booking) {
        self.cpu[b.pos] = self.cpu[b.pos].saturating_sub(b.cpu);
        self.mem[b.pos] = self.mem[b.pos].saturating_sub(b.mem);
        for &(slot, milli) in &b.gpus {
            self.gpu[slot] = self.gpu[slot].saturating_sub(milli);
        }
    }

    /// Gives `b` back; nothing comes back to a node that is not up or a GPU that is
    /// not healthy.
    pub fn give(&mut self, topo: &Topo, b: &Booking) {
        if !topo.nodes[b.pos].up {
            return;
        }
        self.cpu[b.pos] = self.cpu[b.pos].saturating_add(b.cpu);
        self.mem[b.pos] = self.mem[b.pos].saturating_add(b.mem);
        for &(slot, milli) in &b.gpus {
            if topo.usable[slot] {
                self.gpu[slot] = (self.gpu[slot] + milli).min(MILLI_PER_GPU);
            }
        }
    }

    /// Free milli-GPU on the node at `pos`.
    pub fn gpu_milli(&self, topo: &Topo, pos: usize) -> u32 {
        self.gpu[topo.slots(pos)].iter().sum()
    }
}

/// A change of free resources at a future instant.
#[derive(Debug, Clone)]
pub struct Event {
    /// When, ms since the epoch.
    pub at_ms: u64,
    /// The job whose resources change hands.
    pub job: JobId,
    /// True: the job gives its resources back; false: a reservation takes them.
    pub release: bool,
    /// What changes hands.
    pub bookings: Vec<Booking>,
}

/// The layer at a reservation's start, with the reservation booked.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The reservation's start, ms.
    pub at_ms: u64,
    /// The reserved job.
    pub job: JobId,
    /// What is left free at that instant.
    pub layer: Layer,
}

/// Future changes and reservation checkpoints of one call.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    events: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Checkpoints sorted by start.
    pub checkpoints: Vec<Checkpoint>,
    /// Running jobs without a time limit (never give anything back).
    pub unlimited: Vec<JobId>,
}

impl Timeline {
    /// Releases of the running jobs; one whose expected end has passed ends `now_ms`.
    pub fn new(topo: &Topo, running: &[RunningJob], now_ms: u64) -> Self {
        let mut ends: Vec<(u64, JobId, &RunningJob)> = Vec::with_capacity(running.len());
        let mut tl = Timeline::default();
        for r in running {
            match r.expected_end_ms {
                Some(end) => ends.push((end.max(now_ms), r.job.id, r)),
                None => tl.unlimited.push(r.job.id),
            }
        }
        ends.sort_by_key(|&(end, id, _)| (end, id));
        for (end, id, r) in ends {
            let bookings = r
                .tasks
                .iter()
                .filter_map(|a| Booking::from_allocation(topo, a))
                .collect();
            tl.push(end, id, true, bookings);
        }
        tl.unlimited.sort_unstable();
        tl
    }

    fn push(&mut self, at_ms: u64, job: JobId, release: bool, bookings: Vec<Booking>) {
        self.seq += 1;
        let ev = Event {
            at_ms,
            job,
            release,
            bookings,
        };
        self.events.insert((at_ms, self.seq), ev);
    }

    /// Events in time order (ties in the order they were added).
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.values()
    }

    /// Positions in [`Timeline::checkpoints`] of those a job holding resources from
    /// `from_ms` until `end_ms` (None: forever) must fit: `from_ms <= at < end_ms`.
    pub fn within_range(&self, from_ms: u64, end_ms: Option<u64>) -> Range<usize> {
        let lo = self.checkpoints.partition_point(|c| c.at_ms < from_ms);
        let hi = match end_ms {
            Some(e) => self.checkpoints.partition_point(|c| c.at_ms < e),
            None => self.checkpoints.len(),
        };
        lo..hi.max(lo)
    }

    /// The checkpoints of [`Timeline::within_range`].
    pub fn within(&self, from_ms: u64, end_ms: Option<u64>) -> std::slice::Iter<'_, Checkpoint> {
        self.checkpoints[self.within_range(from_ms, end_ms)].iter()
    }

    /// A job started now holding `bookings` until `end_ms` (None: forever): every
    /// checkpoint before its end loses them; its end gives them back.
    pub fn add_start(&mut self, job: JobId, bookings: &[Booking], end_ms: Option<u64>) {
        for c in &mut self.checkpoints {
            if end_ms.is_none_or(|e| c.at_ms < e) {
                bookings.iter().for_each(|b| c.layer.take(b));
            }
        }
        if let Some(end) = end_ms {
            self.push(end, job, true, bookings.to_vec());
        }
    }

    /// A reservation of `bookings` over `[at_ms, end_ms)`; `at_layer` is the layer at
    /// `at_ms` before the reservation.
    pub fn add_reservation(
        &mut self,
        job: JobId,
        at_ms: u64,
        end_ms: Option<u64>,
        bookings: &[Booking],
        mut at_layer: Layer,
    ) {
        for c in &mut self.checkpoints {
            if c.at_ms >= at_ms && end_ms.is_none_or(|e| c.at_ms < e) {
                bookings.iter().for_each(|b| c.layer.take(b));
            }
        }
        bookings.iter().for_each(|b| at_layer.take(b));
        let pos = self.checkpoints.partition_point(|c| c.at_ms <= at_ms);
        self.checkpoints.insert(
            pos,
            Checkpoint {
                at_ms,
                job,
                layer: at_layer,
            },
        );
        self.push(at_ms, job, false, bookings.to_vec());
        if let Some(end) = end_ms {
            self.push(end, job, true, bookings.to_vec());
        }
    }
}
