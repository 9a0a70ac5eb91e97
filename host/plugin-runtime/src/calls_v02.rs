//! Calling a 0.2.0 plugin (`wit/0.2.0/README.md`): the host remembers what each of the
//! plugin's list arguments was sent by its previous call ([`HostMirror`]) and sends only
//! what changed, with the plugin's own string table. After any fault, a fresh instance
//! or an answer the engine refused, the next call is a full resend (`base = 0`).
//!
//! Owns: the host's side of the mirror and the 0.2 calls. Does not own the delta's
//! arithmetic (`gantry_contract::delta`) or the instance's deadline, memory cap and
//! faults (`instance.rs`).

use crate::bindings_v02::wit;
use crate::instance::{Guests, PluginInstance};
use gantry_contract::delta::{Encoder, Mirrored, StringTable, renumbered_cycle};
use gantry_contract::wit_convert::vec_into;
use gantry_contract::{
    Cycle, Eviction, Job, Node, Plan, RunningJob, Scored, Stage, SubmitVerdict, Symbol, Verdict,
};
use gantry_engine::{FaultKind, PolicyFault};

/// Strings the plugin's table may hold beyond this many times a call's own before the
/// host starts over with a full resend (names of jobs long gone would pile up).
const TABLE_GROWTH: usize = 4;
/// ... plus this many.
const TABLE_SLACK: usize = 4096;

/// How a 0.2 plugin's calls travelled, since the instance was made.
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

/// What a 0.2 plugin has, as the host tracks it.
#[derive(Debug, Default)]
pub(crate) struct HostMirror {
    pub(crate) stats: MirrorStats,
    generation: u64,
    /// The generation of the plugin's last successful call; 0: resend everything.
    base: u64,
    strings: StringTable,
    admit_jobs: Encoder<Job>,
    score_jobs: Encoder<Job>,
    place_jobs: Encoder<Job>,
    place_nodes: Encoder<Node>,
    place_running: Encoder<RunningJob>,
    preempt_blocked: Encoder<Job>,
    preempt_nodes: Encoder<Node>,
    preempt_running: Encoder<RunningJob>,
}

impl HostMirror {
    /// The next call resends everything.
    pub(crate) fn reset(&mut self) {
        self.base = 0;
    }

    /// Starts a call: its sync point, the context with the plugin's symbols, and the
    /// translation of this call's symbols into the plugin's.
    fn begin(&mut self, ctx: &Cycle) -> (wit::SyncPoint, wit::Cycle, Vec<Symbol>) {
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
        let (tr, added) = self.strings.translate(&ctx.strings);
        let sync = wit::SyncPoint {
            generation: self.generation,
            base: self.base,
        };
        (
            sync,
            wit::Cycle::from(&renumbered_cycle(ctx, &tr, added)),
            tr,
        )
    }

    fn succeeded(&mut self, sync: &wit::SyncPoint) {
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

fn jobs(
    stats: &mut MirrorStats,
    enc: &mut Encoder<Job>,
    now: &[Job],
    tr: &[Symbol],
) -> Result<wit::JobDelta, PolicyFault> {
    let (keep, fresh) = delta(stats, enc, now, tr, |f| f.iter().collect())?;
    Ok(wit::JobDelta { keep, fresh })
}

fn nodes(
    stats: &mut MirrorStats,
    enc: &mut Encoder<Node>,
    now: &[Node],
    tr: &[Symbol],
) -> Result<wit::NodeDelta, PolicyFault> {
    let (keep, fresh) = delta(stats, enc, now, tr, |f| wit::NodeList::from(f))?;
    Ok(wit::NodeDelta { keep, fresh })
}

fn running(
    stats: &mut MirrorStats,
    enc: &mut Encoder<RunningJob>,
    now: &[RunningJob],
    tr: &[Symbol],
) -> Result<wit::RunningDelta, PolicyFault> {
    let (keep, fresh) = delta(stats, enc, now, tr, |f| wit::RunningList::from(f))?;
    Ok(wit::RunningDelta { keep, fresh })
}

pub(crate) fn check_submit(
    p: &mut PluginInstance,
    ctx: &Cycle,
    job: &Job,
) -> Result<SubmitVerdict, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let j = wit::JobList::from_iter([&job.renumbered(&tr)]);
    let r = p.call(Stage::Admission, |l| match &l.guests {
        Guests::V02(g) => g
            .admission
            .as_ref()
            .map(|g| g.call_check_submit(&mut l.store, &c, sync, &j)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(r.into())
}

pub(crate) fn admit(
    p: &mut PluginInstance,
    ctx: &Cycle,
    now: &[Job],
) -> Result<Vec<Verdict>, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.admit_jobs, now, &tr)?;
    let r = p.call(Stage::Admission, |l| match &l.guests {
        Guests::V02(g) => g
            .admission
            .as_ref()
            .map(|g| g.call_admit(&mut l.store, &c, sync, &j)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(vec_into(r))
}

pub(crate) fn score(
    p: &mut PluginInstance,
    ctx: &Cycle,
    now: &[Job],
    previous: &[f64],
) -> Result<Vec<Scored>, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.score_jobs, now, &tr)?;
    let r = p.call(Stage::Priority, |l| match &l.guests {
        Guests::V02(g) => g
            .priority
            .as_ref()
            .map(|g| g.call_score(&mut l.store, &c, sync, &j, previous)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(vec_into(r))
}

pub(crate) fn place(
    p: &mut PluginInstance,
    ctx: &Cycle,
    now: &[Job],
    nodes_now: &[Node],
    running_now: &[RunningJob],
) -> Result<Plan, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let j = jobs(&mut m.stats, &mut m.place_jobs, now, &tr)?;
    let n = nodes(&mut m.stats, &mut m.place_nodes, nodes_now, &tr)?;
    let r = running(&mut m.stats, &mut m.place_running, running_now, &tr)?;
    let plan = p.call(Stage::Placement, |l| match &l.guests {
        Guests::V02(g) => g
            .placement
            .as_ref()
            .map(|g| g.call_place(&mut l.store, &c, sync, &j, &n, &r)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(plan.into())
}

pub(crate) fn preempt(
    p: &mut PluginInstance,
    ctx: &Cycle,
    blocked: &[Job],
    blocked_scores: &[f64],
    nodes_now: &[Node],
    running_now: &[RunningJob],
) -> Result<Vec<Eviction>, PolicyFault> {
    let (sync, c, tr) = p.mirror.begin(ctx);
    let m = &mut p.mirror;
    let b = jobs(&mut m.stats, &mut m.preempt_blocked, blocked, &tr)?;
    let n = nodes(&mut m.stats, &mut m.preempt_nodes, nodes_now, &tr)?;
    let r = running(&mut m.stats, &mut m.preempt_running, running_now, &tr)?;
    let evictions = p.call(Stage::Preemption, |l| match &l.guests {
        Guests::V02(g) => g
            .preemption
            .as_ref()
            .map(|g| g.call_preempt(&mut l.store, &c, sync, &b, blocked_scores, &n, &r)),
        Guests::V01(_) => None,
    })?;
    p.mirror.succeeded(&sync);
    Ok(vec_into(evictions))
}
