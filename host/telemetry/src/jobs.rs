//! One trace per job lifecycle: a root span `job {id}` opened at the job's first event
//! and ended at its terminal one, and a short child span per step, linked to the span
//! current where the step happened (the `cycle` that decided it).
//!
//! The caller only captures the step (and the current span's context) and hands it to a
//! bounded channel; a thread of its own makes the spans, with the step's timestamps, so
//! a burst of thousands of new jobs in one cycle costs the cycle little. A full channel
//! drops the step and counts it in `dropped_spans`.
//!
//! The root spans live in this process only: after a daemon restart a job's later steps
//! start a new root (same `job_id` attribute, so a search by job id finds both).

use super::export::STATS;
use opentelemetry::trace::{Link, Span as _, SpanContext, SpanKind, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Open job traces kept at most; past it the oldest job's root is ended early
/// (attribute `gantry.job.truncated`).
pub(crate) const MAX_OPEN: usize = 100_000;

/// Steps waiting to become spans, at most.
const QUEUE: usize = 65_536;

/// Steps after which nothing more happens to a job.
const TERMINAL: [&str; 8] = [
    "finished",
    "succeeded",
    "failed",
    "cancelled",
    "timed_out",
    "preempted",
    "rejected",
    "launch_failed",
];

struct Step {
    job_id: u64,
    step: String,
    cycle: u64,
    detail: String,
    /// The span current when the step happened (invalid when none).
    link: SpanContext,
    at: SystemTime,
}

enum Msg {
    Step(Step),
    /// Answers the number of open traces once everything before it is done.
    #[cfg(test)]
    Flush(SyncSender<usize>),
    /// Ends the open roots and stops.
    Stop(SyncSender<()>),
}

/// Called by [`enable`] (`super::on_job_traces_enabled`).
pub(crate) static ON_ENABLE: OnceLock<fn()> = OnceLock::new();

/// Cheap check for the no-exporter path.
static ENABLED: AtomicBool = AtomicBool::new(false);
static SENDER: RwLock<Option<SyncSender<Msg>>> = RwLock::new(None);

/// Trace id of each job's newest root, kept after the root ends (at most [`MAX_OPEN`],
/// the lowest job ids dropped first), so the API can name it.
static TRACE_IDS: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

/// The trace id of job `job_id`'s newest root span, if this process made one.
pub(crate) fn trace_id(job_id: u64) -> Option<String> {
    let ids = TRACE_IDS.lock().unwrap_or_else(|e| e.into_inner());
    ids.get(&job_id).cloned()
}

fn sender() -> Option<SyncSender<Msg>> {
    SENDER.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Starts keeping job traces with `tracer` (ending any earlier keeper).
pub(crate) fn enable(tracer: SdkTracer) {
    // The daemon's hook installs its sink of the controller's steps, which reach this keeper
    // from now on (a second install keeps the first).
    if let Some(hook) = ON_ENABLE.get() {
        hook();
    }
    disable();
    let (tx, rx) = sync_channel(QUEUE);
    let spawned = std::thread::Builder::new()
        .name("gantry-job-traces".into())
        .spawn(move || keeper(&tracer, &rx));
    if spawned.is_ok() {
        *SENDER.write().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        ENABLED.store(true, Ordering::Release);
    }
}

/// Stops keeping job traces; the roots of jobs still open end now (attribute
/// `gantry.job.open_at_shutdown`), so what is known gets exported. Waits at most 2 s.
pub(crate) fn disable() {
    ENABLED.store(false, Ordering::Release);
    let tx = SENDER.write().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(tx) = tx {
        let (done, wait) = sync_channel(1);
        if tx.send(Msg::Stop(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(2));
        }
    }
}

pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// Waits until every step recorded so far is a span; the number of open job traces
/// (0 when not enabled).
#[cfg(test)]
pub(crate) fn flush() -> usize {
    let Some(tx) = sender() else { return 0 };
    let (done, wait) = sync_channel(1);
    if tx.send(Msg::Flush(done)).is_err() {
        return 0;
    }
    wait.recv_timeout(Duration::from_secs(5)).unwrap_or(0)
}

/// Records one step (called with exporting on only): captures it and queues it.
pub(crate) fn record(job_id: u64, step: &str, cycle: u64, detail: &str) {
    let Some(tx) = sender() else { return };
    let link = tracing::Span::current()
        .context()
        .span()
        .span_context()
        .clone();
    let msg = Msg::Step(Step {
        job_id,
        step: step.to_string(),
        cycle,
        detail: detail.to_string(),
        link,
        at: SystemTime::now(),
    });
    match tx.try_send(msg) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) => STATS.count_queue_full(1),
        Err(TrySendError::Disconnected(_)) => {}
    }
}

struct Root {
    span: Span,
    context: SpanContext,
}

/// The thread that turns steps into spans.
fn keeper(tracer: &SdkTracer, rx: &Receiver<Msg>) {
    let mut open: BTreeMap<u64, Root> = BTreeMap::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Step(s) => step(tracer, &mut open, s),
            #[cfg(test)]
            Msg::Flush(done) => {
                let _ = done.send(open.len());
            }
            Msg::Stop(done) => {
                let now = SystemTime::now();
                for (_, mut root) in std::mem::take(&mut open) {
                    root.span
                        .set_attribute(KeyValue::new("gantry.job.open_at_shutdown", true));
                    root.span.end_with_timestamp(now);
                }
                let _ = done.send(());
                return;
            }
        }
    }
}

fn step(tracer: &SdkTracer, open: &mut BTreeMap<u64, Root>, s: Step) {
    let job = KeyValue::new("job_id", s.job_id as i64);
    if !open.contains_key(&s.job_id) {
        if open.len() >= MAX_OPEN
            && let Some((_, mut oldest)) = open.pop_first()
        {
            oldest
                .span
                .set_attribute(KeyValue::new("gantry.job.truncated", true));
            oldest.span.end_with_timestamp(s.at);
        }
        let span = tracer
            .span_builder(format!("job {}", s.job_id))
            .with_kind(SpanKind::Internal)
            .with_start_time(s.at)
            .with_attributes([job.clone()])
            // A root: not a child of the cycle it starts in.
            .start_with_context(tracer, &Context::new());
        let context = span.span_context().clone();
        let mut ids = TRACE_IDS.lock().unwrap_or_else(|e| e.into_inner());
        ids.insert(s.job_id, context.trace_id().to_string());
        if ids.len() > MAX_OPEN {
            ids.pop_first();
        }
        drop(ids);
        open.insert(s.job_id, Root { span, context });
    }
    let Some(root) = open.get(&s.job_id) else {
        return;
    };
    let parent = Context::new().with_remote_span_context(root.context.clone());
    let links = if s.link.is_valid() {
        vec![Link::new(
            s.link,
            vec![KeyValue::new("cycle", s.cycle as i64)],
            0,
        )]
    } else {
        Vec::new()
    };
    let terminal = TERMINAL.contains(&s.step.as_str());
    let mut child = tracer
        .span_builder(s.step.clone())
        .with_kind(SpanKind::Internal)
        .with_start_time(s.at)
        .with_attributes([
            job,
            KeyValue::new("step", s.step.clone()),
            KeyValue::new("cycle", s.cycle as i64),
            KeyValue::new("detail", s.detail),
        ])
        .with_links(links)
        .start_with_context(tracer, &parent);
    child.end_with_timestamp(s.at);
    if terminal && let Some(mut root) = open.remove(&s.job_id) {
        root.span.set_attribute(KeyValue::new("final_step", s.step));
        root.span.end_with_timestamp(s.at);
    }
}
