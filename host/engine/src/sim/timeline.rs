//! Timeline mode: jobs arrive at their submit time, run for their duration (cut at
//! their time limit) and leave; nodes go down and come back. After every instant at
//! which something happened, one scheduling cycle runs with the same engine and the
//! same plugins as the daemon, and its starts and evictions are applied as the daemon
//! applies them (an evicted job stops after its warning and grace and is requeued if it
//! allows it). No processes and no sleeping: the clock jumps from event to event.
//!
//! Owns: the event loop and job state transitions on the virtual clock. Does not own
//! decisions (the cycle and the plugins) or the cluster arithmetic (`state`).

use super::events::{Event, EventQueue};
use super::input::{NodeEvent, SimJob, SimNode, model_list};
use super::results::{FaultCount, JobEnd, JobResult, Sample, TimelineResult};
use super::state::{SimState, held_milli};
use crate::cycle::run_cycle;
use crate::pipeline::Pipeline;
use crate::snapshot::EvictionInProgress;
use crate::submit::{SubmitDecision, check_submit, fits_empty_cluster};
use gantry_contract::{JobId, JobPatch, Node, next_revision};
use std::collections::BTreeMap;

/// How a timeline run is driven.
#[derive(Debug, Clone, Default)]
pub struct TimelineOptions {
    /// The run's seed (`cycle.seed` in every cycle).
    pub seed: u64,
    /// Also run a cycle this often while jobs wait (plugins that look at the clock,
    /// such as aging or deadlines, then see time pass). None: only after events.
    pub cycle_interval_ms: Option<u64>,
    /// Stop at this virtual time; jobs still running or pending are reported so.
    pub horizon_ms: Option<u64>,
    /// Half-life of the decayed usage given to plugins, seconds (default 7 days, as in
    /// the daemon's `usage_half_life_s`).
    pub usage_half_life_s: Option<f64>,
}

/// Progress of a run: jobs settled (finished, rejected) of all, virtual time.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Jobs whose story has ended.
    pub settled: usize,
    /// Jobs in the workload.
    pub total: usize,
    /// Virtual time, ms.
    pub now_ms: u64,
}

struct JobTrack {
    run: u32,
    result: JobResult,
    last_reason: Option<(gantry_contract::ReasonCode, String)>,
    run_start_ms: u64,
    /// The current run is cut short by the job's time limit.
    limited: bool,
    /// The job's final word was said.
    settled: bool,
}

/// What a cycle of the replay saw and decided, for an observer (a forecast benchmark).
pub type CycleObserver<'a> =
    dyn FnMut(&crate::snapshot::Snapshot, &crate::cycle::CycleOutcome) + 'a;

/// Runs `jobs` on `nodes` through `live` (falling back to `fallback` on faults).
pub fn run_timeline(
    nodes: &[SimNode],
    jobs: &[SimJob],
    node_events: &[NodeEvent],
    opts: &TimelineOptions,
    live: &mut Pipeline,
    fallback: Option<&mut Pipeline>,
    progress: &mut dyn FnMut(Progress),
) -> TimelineResult {
    let mut unobserved = |_: &crate::snapshot::Snapshot, _: &crate::cycle::CycleOutcome| {};
    run_timeline_observed(
        nodes,
        jobs,
        node_events,
        opts,
        live,
        fallback,
        progress,
        &mut unobserved,
    )
}

/// [`run_timeline`], showing `observe` each cycle's snapshot and outcome before they are
/// applied.
#[allow(clippy::too_many_arguments)]
pub fn run_timeline_observed(
    nodes: &[SimNode],
    jobs: &[SimJob],
    node_events: &[NodeEvent],
    opts: &TimelineOptions,
    live: &mut Pipeline,
    mut fallback: Option<&mut Pipeline>,
    progress: &mut dyn FnMut(Progress),
    observe: &mut CycleObserver<'_>,
) -> TimelineResult {
    let mut st = SimState::new(nodes, model_list(nodes, jobs), opts.seed);
    if let Some(h) = opts.usage_half_life_s {
        st.set_usage_half_life(h);
    }
    let empty_nodes: Vec<Node> = st.snap.nodes.clone();
    let mut queue = EventQueue::default();
    for (i, j) in jobs.iter().enumerate() {
        queue.push(j.submit_ms, Event::Submit(i));
    }
    for (i, e) in node_events.iter().enumerate() {
        queue.push(e.at_ms, Event::Node(i));
    }
    let mut track: Vec<JobTrack> = jobs.iter().map(new_track).collect();
    let mut out = TimelineResult::default();
    let mut faults: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut tick_queued = false;
    let mut settled = 0usize;
    let mut last_progress_ms = 0u64;
    while let Some(now) = queue.next_time() {
        if opts.horizon_ms.is_some_and(|h| now > h) {
            break;
        }
        while let Some(event) = queue.pop_at(now) {
            out.events += 1;
            match event {
                Event::Submit(i) => {
                    let id = i as JobId + 1;
                    let mut job = st.contract_job(id, &jobs[i]);
                    st.prepare_cycle(out.cycles, now);
                    if let Err(reason) = fits_empty_cluster(&st.snap.ctx, &empty_nodes, &job) {
                        reject(&mut track[i], "host", reason.message, &mut settled);
                        continue;
                    }
                    let (decision, fs) = check_submit(&st.snap.ctx, &job, live);
                    count_faults(&mut faults, &fs);
                    match decision {
                        SubmitDecision::Reject { plugin, message } => {
                            reject(&mut track[i], &plugin, message, &mut settled);
                        }
                        SubmitDecision::Accept(patches) => {
                            for p in &patches {
                                apply_patch(&mut st, &mut job, p);
                            }
                            // Numbered once patched; a pending job never changes after.
                            job.revision = next_revision();
                            st.snap.pending.push(job);
                        }
                    }
                }
                Event::Finish { job, run } if track[job].run == run => {
                    let t = &mut track[job];
                    end_run(&mut st, t, job, now);
                    t.result.end = if t.limited {
                        JobEnd::TimedOut
                    } else {
                        JobEnd::Completed
                    };
                    t.settled = true;
                    settled += 1;
                }
                Event::EvictDone { job, run } if track[job].run == run => {
                    let t = &mut track[job];
                    let stopped = end_run(&mut st, t, job, now);
                    t.result.evictions += 1;
                    // As the daemon: a job evicted without consent (an idle notebook) ends.
                    if jobs[job].requeue && jobs[job].preemptible {
                        t.result.requeues += 1;
                        requeue(&mut st, stopped);
                    } else {
                        t.result.end = JobEnd::Preempted;
                        t.settled = true;
                        settled += 1;
                    }
                }
                Event::Node(i) => {
                    let e = &node_events[i];
                    let Some(idx) = st.node_index(&e.node) else {
                        continue;
                    };
                    if !e.up {
                        for id in st.jobs_on_node(idx) {
                            let job = (id - 1) as usize;
                            let t = &mut track[job];
                            let stopped = end_run(&mut st, t, job, now);
                            if jobs[job].requeue {
                                t.result.requeues += 1;
                                requeue(&mut st, stopped);
                            } else {
                                t.result.end = JobEnd::NodeFailed;
                                t.settled = true;
                                settled += 1;
                            }
                        }
                    }
                    st.set_node_up(idx, e.up);
                }
                Event::Tick => tick_queued = false,
                Event::Finish { .. } | Event::EvictDone { .. } => {}
            }
        }
        if !st.snap.pending.is_empty() {
            out.cycles += 1;
            st.prepare_cycle(out.cycles, now);
            let outcome = run_cycle(&st.snap, live, fallback.as_deref_mut());
            observe(&st.snap, &outcome);
            count_faults(&mut faults, &outcome.faults);
            for s in outcome.starts {
                let job = (s.job - 1) as usize;
                let t = &mut track[job];
                t.run += 1;
                t.run_start_ms = now;
                t.result.start_ms.get_or_insert(now);
                t.last_reason = None;
                let limit_s = st.start(s.job, s.tasks, now, s.score).unwrap_or(0);
                let duration = jobs[job].duration_ms;
                let run_ms = match limit_s {
                    0 => duration,
                    l => duration.min(l.saturating_mul(1000)),
                };
                t.limited = run_ms < duration;
                queue.push(now + run_ms, Event::Finish { job, run: t.run });
            }
            for e in outcome.evictions {
                let job = (e.job - 1) as usize;
                if !st.is_running(e.job) || st.snap.evicting.iter().any(|x| x.job == e.job) {
                    continue;
                }
                out.evictions += 1;
                st.snap.evicting.push(EvictionInProgress {
                    job: e.job,
                    for_job: e.for_job,
                });
                // The warning (0.3's `warn-s`), then the signal, then the grace.
                let at = now + (u64::from(e.warn_s) + u64::from(e.grace_s)) * 1000;
                queue.push(
                    at,
                    Event::EvictDone {
                        job,
                        run: track[job].run,
                    },
                );
            }
            for (id, reason) in outcome.pending {
                track[(id - 1) as usize].last_reason = Some((reason.code, reason.message));
            }
            if let Some(every) = opts.cycle_interval_ms.filter(|_| !tick_queued) {
                queue.push(now + every.max(1), Event::Tick);
                tick_queued = true;
            }
        }
        let (held, total) = st.gpu_allocation();
        out.samples.push(Sample {
            t_ms: now,
            gpu_milli_held: held,
            gpu_milli_total: total,
            running: st.snap.running.len() as u32,
            pending: st.snap.pending.len() as u32,
        });
        out.end_ms = now;
        if now >= last_progress_ms + 3_600_000 || settled == jobs.len() {
            last_progress_ms = now;
            progress(Progress {
                settled,
                total: jobs.len(),
                now_ms: now,
            });
        }
        // Only periodic ticks are left and nothing can change: stop.
        if st.snap.running.is_empty() && queue.len() <= usize::from(tick_queued) {
            break;
        }
    }
    for (i, t) in track.iter_mut().enumerate() {
        if t.settled {
            continue;
        }
        let id = i as JobId + 1;
        if st.is_running(id) {
            let now = out.end_ms;
            t.result.gpu_seconds += gpu_seconds(&st, id, t.run_start_ms, now);
            t.result.end = JobEnd::Running;
        } else {
            let (code, message) = t
                .last_reason
                .take()
                .map_or((None, String::new()), |(c, m)| (Some(c), m));
            t.result.end = JobEnd::Pending { code, message };
        }
    }
    out.jobs = track.into_iter().map(|t| t.result).collect();
    out.faults = faults
        .into_iter()
        .map(|((plugin, kind), count)| FaultCount {
            plugin,
            kind,
            count,
        })
        .collect();
    out
}

fn new_track(j: &SimJob) -> JobTrack {
    JobTrack {
        run: 0,
        result: JobResult {
            name: j.name.clone(),
            user: j.user.clone(),
            account: j.account.clone(),
            submit_ms: j.submit_ms,
            start_ms: None,
            end_ms: None,
            end: JobEnd::Pending {
                code: None,
                message: String::new(),
            },
            evictions: 0,
            requeues: 0,
            gpu_milli: j.gpu_milli_total(),
            gpu_seconds: 0.0,
        },
        last_reason: None,
        run_start_ms: 0,
        limited: false,
        settled: false,
    }
}

fn reject(t: &mut JobTrack, by: &str, message: String, settled: &mut usize) {
    t.result.end = JobEnd::Rejected {
        by: by.to_string(),
        message,
    };
    t.settled = true;
    *settled += 1;
}

fn gpu_seconds(st: &SimState, id: JobId, start_ms: u64, now_ms: u64) -> f64 {
    st.snap
        .running
        .iter()
        .find(|r| r.job.id == id)
        .map_or(0.0, |r| {
            held_milli(r) as f64 / 1000.0 * now_ms.saturating_sub(start_ms) as f64 / 1000.0
        })
}

/// Ends the current run of a job: frees what it held and records its usage.
fn end_run(
    st: &mut SimState,
    t: &mut JobTrack,
    job: usize,
    now: u64,
) -> Option<gantry_contract::RunningJob> {
    let id = job as JobId + 1;
    t.result.gpu_seconds += gpu_seconds(st, id, t.run_start_ms, now);
    t.result.end_ms = Some(now);
    // Any event still queued for this run is now stale.
    t.run += 1;
    st.stop(id, now)
}

/// Puts a stopped job back in the queue, keeping its submit time (it keeps its place)
/// and what admission patched at submit.
fn requeue(st: &mut SimState, stopped: Option<gantry_contract::RunningJob>) {
    let Some(r) = stopped else { return };
    let mut contract = r.job;
    contract.revision = next_revision();
    let pos = st
        .snap
        .pending
        .partition_point(|j| (j.submit_ms, j.id) < (contract.submit_ms, contract.id));
    st.snap.pending.insert(pos, contract);
}

fn apply_patch(st: &mut SimState, job: &mut gantry_contract::Job, p: &JobPatch) {
    if let Some(q) = &p.queue {
        job.queue = st.intern(q);
    }
    if let Some(t) = p.tier {
        job.tier = t;
    }
    if let Some(l) = p.time_limit_s {
        job.time_limit_s = l;
    }
    if let Some(pre) = p.preemptible {
        job.preemptible = pre;
    }
    for (k, v) in &p.labels {
        let (key, value) = (st.intern(k), st.intern(v));
        match job.labels.iter_mut().find(|l| l.key == key) {
            Some(l) => l.value = value,
            None => job.labels.push(gantry_contract::Label { key, value }),
        }
    }
}

fn count_faults(faults: &mut BTreeMap<(String, String), u64>, records: &[crate::FaultRecord]) {
    for f in records {
        *faults
            .entry((f.plugin.name.clone(), f.fault.kind.as_str().to_string()))
            .or_default() += 1;
    }
}
