//! The host's side of a 0.2.0 or 0.3.0 plugin's view (`wit/0.2.0/README.md`): what each of the
//! plugin's list arguments was sent by its previous call ([`HostMirror`]), the plugin's
//! string table, the sync point of each call, and the deltas. After any fault, a fresh
//! instance or an answer the engine refused, the next call is a full resend (`base = 0`).
//!
//! Owns: that state and the encoding of a call's lists. Does not own the delta's
//! arithmetic (`gantry_contract::delta`), lowering into a version's WIT types or making
//! the calls (`calls_delta.rs`).

use gantry_contract::delta::{Encoder, Mirrored, StringTable, renumbered_cycle};
use gantry_contract::{Cycle, Job, Node, RunningJob, Symbol};
use gantry_engine::{FaultKind, PolicyFault};

/// Strings the plugin's table may hold beyond this many times a call's own before the
/// host starts over with a full resend (names of jobs long gone would pile up).
const TABLE_GROWTH: usize = 4;
/// ... plus this many.
const TABLE_SLACK: usize = 4096;

/// How a 0.2 or 0.3 plugin's calls travelled, since the instance was made.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MirrorStats {
    /// Calls made.
    pub calls: u64,
    /// Calls that resent everything (the first, and each after a fault or a refused answer).
    pub full_resends: u64,
    /// List elements sent as "unchanged" (an index).
    pub kept: u64,
    /// List elements sent whole.
    pub fresh: u64,
}

/// A call's `sync-point`, before it is lowered into its version's WIT record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SyncPoint {
    pub(crate) generation: u64,
    pub(crate) base: u64,
}

/// What a 0.2 or 0.3 plugin has, as the host tracks it.
#[derive(Debug, Default)]
pub(crate) struct HostMirror {
    pub(crate) stats: MirrorStats,
    generation: u64,
    /// The generation of the plugin's last successful call; 0: resend everything.
    base: u64,
    strings: StringTable,
    pub(crate) admit_jobs: Encoder<Job>,
    pub(crate) score_jobs: Encoder<Job>,
    pub(crate) place_jobs: Encoder<Job>,
    pub(crate) place_nodes: Encoder<Node>,
    pub(crate) place_running: Encoder<RunningJob>,
    pub(crate) preempt_blocked: Encoder<Job>,
    pub(crate) preempt_nodes: Encoder<Node>,
    pub(crate) preempt_running: Encoder<RunningJob>,
}

impl HostMirror {
    /// The next call resends everything.
    pub(crate) fn reset(&mut self) {
        self.base = 0;
    }

    /// Starts a call: its sync point, the context with the plugin's symbols, and the
    /// translation of this call's symbols into the plugin's.
    pub(crate) fn begin(&mut self, ctx: &Cycle) -> (SyncPoint, Cycle, Vec<Symbol>) {
        if self.strings.len() > TABLE_GROWTH * ctx.strings.len() + TABLE_SLACK {
            self.base = 0;
        }
        if self.base == 0 {
            *self = Self {
                generation: self.generation,
                stats: self.stats,
                ..Self::default()
            };
            self.stats.full_resends += 1;
        }
        self.stats.calls += 1;
        self.generation += 1;
        let (tr, added) = self.strings.translate(&ctx.strings, ctx.strings_lineage);
        let sync = SyncPoint {
            generation: self.generation,
            base: self.base,
        };
        (sync, renumbered_cycle(ctx, &tr, added), tr)
    }

    pub(crate) fn succeeded(&mut self, sync: &SyncPoint) {
        self.base = sync.generation;
    }
}

fn broken(e: String) -> PolicyFault {
    PolicyFault::new(FaultKind::Trap, format!("host mirror: {e}"))
}

/// Encodes `now` against what `enc` last sent; `lower` makes the WIT list of the fresh ones.
fn delta<T: Mirrored, L>(
    stats: &mut MirrorStats,
    enc: &mut Encoder<T>,
    now: &[T],
    tr: &[Symbol],
    lower: impl FnOnce(&[T]) -> L,
) -> Result<(Vec<u32>, L), PolicyFault> {
    let (keep, fresh) = enc.encode(now, tr);
    stats.fresh += fresh.len() as u64;
    stats.kept += (keep.len() - fresh.len()) as u64;
    let list = lower(&fresh);
    enc.commit(&keep, fresh).map_err(broken)?;
    Ok((keep, list))
}

/// `now`'s jobs as a delta: `keep`, and the fresh ones lowered into a `job-list`.
pub(crate) fn jobs<L: for<'a> FromIterator<&'a Job>>(
    stats: &mut MirrorStats,
    enc: &mut Encoder<Job>,
    now: &[Job],
    tr: &[Symbol],
) -> Result<(Vec<u32>, L), PolicyFault> {
    delta(stats, enc, now, tr, |f| f.iter().collect())
}

/// `now`'s nodes as a delta: `keep`, and the fresh ones lowered into a `node-list`.
pub(crate) fn nodes<L: for<'a> From<&'a [Node]>>(
    stats: &mut MirrorStats,
    enc: &mut Encoder<Node>,
    now: &[Node],
    tr: &[Symbol],
) -> Result<(Vec<u32>, L), PolicyFault> {
    delta(stats, enc, now, tr, |f| L::from(f))
}

/// `now`'s running jobs as a delta: `keep`, and the fresh ones lowered into a `running-list`.
pub(crate) fn running<L: for<'a> From<&'a [RunningJob]>>(
    stats: &mut MirrorStats,
    enc: &mut Encoder<RunningJob>,
    now: &[RunningJob],
    tr: &[Symbol],
) -> Result<(Vec<u32>, L), PolicyFault> {
    delta(stats, enc, now, tr, |f| L::from(f))
}
