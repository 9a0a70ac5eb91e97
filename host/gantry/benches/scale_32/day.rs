//! A team's day of work, compressed: the mixed stream of the `scale_32` benchmark and the four
//! clients that submit it, against any [`Cluster`] (Gantry over HTTP, or SLURM's own commands).
//! The same seed gives the same stream on both sides.
//!
//! Every task appends `s <job> <rank>` to the marker file when it starts and `e <job> <rank>`
//! when it ends (`check.rs` reads them back); a job's shell uses only builtins besides its
//! `sleep`, so a trivial job costs one shell.
//!
//! Owns: the stream's mix, the clients, cancelling and requeueing on schedule, and killing and
//! restarting two nodes mid-run. Does not own starting a cluster, its API, or the verdict.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Res<T> = std::result::Result<T, Error>;

/// What one submission of the stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An array of short one-GPU jobs (`members` of them).
    Array { members: u32 },
    /// One short one-GPU job.
    Single,
    /// A one-GPU job sleeping [`SLEEPER_S`].
    Sleeper,
    /// A gang of `nodes` tasks of 8 GPUs each, one per node, sleeping [`GANG_S`].
    Gang { nodes: u32 },
    /// An interactive one-GPU job sleeping [`GANG_S`] (SLURM: `srun`).
    Interactive,
    /// A one-GPU job that would sleep [`CANCELLED_S`], cancelled [`CANCEL_AFTER`] after submit.
    Cancelled,
    /// A one-GPU job sleeping [`SLEEPER_S`], requeued once while it runs.
    Requeued,
}

pub const SLEEPER_S: u32 = 2;
pub const GANG_S: u32 = 1;
pub const CANCELLED_S: u32 = 300;
pub const CANCEL_AFTER: Duration = Duration::from_millis(1500);
const REQUEUE_AFTER: Duration = Duration::from_millis(1000);
/// Clients submitting at once.
pub const CLIENTS: usize = 4;

impl Kind {
    /// Jobs this submission counts for.
    pub fn jobs(self) -> usize {
        match self {
            Kind::Array { members } => members as usize,
            _ => 1,
        }
    }

    /// How long each task sleeps.
    pub fn sleep_s(self) -> u32 {
        match self {
            Kind::Array { .. } | Kind::Single => 0,
            Kind::Sleeper | Kind::Requeued => SLEEPER_S,
            Kind::Gang { .. } | Kind::Interactive => GANG_S,
            Kind::Cancelled => CANCELLED_S,
        }
    }

    /// Tasks (ranks) per job.
    pub fn ranks(self) -> u32 {
        match self {
            Kind::Gang { nodes } => nodes,
            _ => 1,
        }
    }

    /// A short name for reports.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Array { .. } => "array",
            Kind::Single => "single",
            Kind::Sleeper => "sleeper",
            Kind::Gang { .. } => "gang",
            Kind::Interactive => "interactive",
            Kind::Cancelled => "cancelled",
            Kind::Requeued => "requeued",
        }
    }
}

/// The shell line of every task: markers around an optional sleep. `$M` names the marker file.
/// A run stopped by SIGTERM (a cancel, a requeue) writes `k <job> <rank>` as it goes.
pub fn task_script(sleep_s: u32) -> String {
    // SLURM names an array member `<array>_<index>`, as `squeue` and `sacct` do, and the
    // day knows an interactive `srun` by its name.
    let me = r#"j="${GANTRY_JOB_ID:-${SLURM_ARRAY_TASK_ID:+${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID}}"; case "$SLURM_JOB_NAME" in day-i-*) j="${j:-name:$SLURM_JOB_NAME}";; esac; j="${j:-$SLURM_JOB_ID} ${RANK:-${SLURM_PROCID:-0}}""#;
    let mid = if sleep_s > 0 {
        format!(r#"trap 'echo "k $j" >> "$M"; exit 143' TERM; sleep {sleep_s}; "#)
    } else {
        String::new()
    };
    format!(r#"{me}; echo "s $j" >> "$M"; {mid}echo "e $j" >> "$M""#)
}

/// The shell line of each rank of a wide gang: its start time, `date +%s.%N`, in
/// `<marker>.wide-<job>-<rank>`.
pub fn wide_script() -> String {
    let me = r#"j="${GANTRY_JOB_ID:-$SLURM_JOB_ID}-${RANK:-${SLURM_PROCID:-0}}""#;
    format!(r#"{me}; date +%s.%N > "$M.wide-$j.tmp"; mv "$M.wide-$j.tmp" "$M.wide-$j""#)
}

/// Waits (bounded) for the start stamps of `ranks` ranks of wide gang `id`; the latest.
pub fn wide_ranks_started(marker: &Path, id: &str, ranks: usize, limit: Duration) -> Res<f64> {
    let t = Instant::now();
    let mut latest = 0.0f64;
    for r in 0..ranks {
        let file = PathBuf::from(format!("{}.wide-{id}-{r}", marker.display()));
        loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                latest = latest.max(text.trim().parse::<f64>()?);
                break;
            }
            if t.elapsed() > limit {
                return Err(format!("rank {r} of {id} never started").into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(latest)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A small deterministic generator (xorshift), so both sides see the same stream.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The stream for about `jobs` jobs on `nodes` nodes: 1 % gangs of 2..=min(8, nodes) nodes,
/// 1 % interactive, 1 % cancelled, 0.5 % requeued, 5 % sleepers, 75 % in arrays of
/// `array_size`, the rest single short jobs; shuffled by `seed`.
pub fn plan(jobs: usize, nodes: u32, array_size: u32, seed: u64) -> Vec<Kind> {
    let mut rng = Rng::new(seed);
    let pct = |p: usize| (jobs * p).div_ceil(1000).max(1);
    let mut items = Vec::new();
    let widest = nodes.clamp(2, 8);
    for _ in 0..pct(10) {
        let span = 2 + rng.below(u64::from(widest - 1)) as u32;
        items.push(Kind::Gang { nodes: span });
    }
    items.extend(std::iter::repeat_n(Kind::Interactive, pct(10)));
    items.extend(std::iter::repeat_n(Kind::Cancelled, pct(10)));
    items.extend(std::iter::repeat_n(Kind::Requeued, pct(5)));
    items.extend(std::iter::repeat_n(Kind::Sleeper, pct(50)));
    let arrays = (jobs * 3 / 4) / array_size.max(1) as usize;
    items.extend(std::iter::repeat_n(
        Kind::Array {
            members: array_size,
        },
        arrays,
    ));
    let so_far: usize = items.iter().map(|k| k.jobs()).sum();
    items.extend(std::iter::repeat_n(
        Kind::Single,
        jobs.saturating_sub(so_far),
    ));
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
    items
}

/// What a cluster must do for the day. Ids are strings: Gantry's numbers, SLURM's job ids.
pub trait Cluster: Sync {
    /// Submits one item; returns the ids of its jobs (an array's members).
    fn submit(&self, client: usize, kind: Kind, marker: &Path) -> Res<Vec<String>>;
    /// Cancels a job.
    fn cancel(&self, id: &str) -> Res<()>;
    /// Requeues a running job; `Ok(false)` when it is not running (yet).
    fn requeue(&self, id: &str) -> Res<bool>;
    /// Jobs pending or running.
    fn active(&self) -> Res<usize>;
    /// The jobs running on node `i` now.
    fn jobs_on_node(&self, i: usize) -> Res<Vec<String>>;
    /// Whether node `i` is seen down by the scheduler.
    fn node_down(&self, i: usize) -> Res<bool>;
    /// SIGKILLs node `i`'s agent (slurmd).
    fn kill_node(&self, i: usize) -> Res<()>;
    /// Starts node `i`'s agent again and waits until it is up.
    fn restart_node(&self, i: usize) -> Res<()>;
    /// How long a killed node stays down before it is restarted.
    fn down_for(&self) -> Duration;
    /// Submits a gang of one 8-GPU rank on each of `nodes` nodes running [`wide_script`].
    fn submit_wide(&self, nodes: usize, marker: &Path) -> Res<String>;
    /// When the scheduler placed job `id` (seconds since the epoch), once it has.
    fn placed_at(&self, id: &str) -> Res<Option<f64>>;
}

/// One submission as the clients saw it.
#[derive(Clone, Debug)]
pub struct Submitted {
    pub kind: Kind,
    pub ids: Vec<String>,
    /// When the call was made, seconds after the day began.
    pub at_s: f64,
    /// How long the call took, seconds.
    pub took_s: f64,
    /// Whether a requeue was accepted (for [`Kind::Requeued`]).
    pub requeued: bool,
}

/// A killed node: when it was noticed down and when its jobs had left it.
#[derive(Clone, Debug, Default)]
pub struct NodeLoss {
    pub node: usize,
    /// The jobs running on it when it was killed.
    pub jobs: Vec<String>,
    pub jobs_on_it: usize,
    pub noticed_after_s: Option<f64>,
    pub requeued_after_s: Option<f64>,
    pub down_for_s: f64,
}

/// What the day left behind.
#[derive(Debug, Default)]
pub struct DayLog {
    pub submitted: Vec<Submitted>,
    pub losses: Vec<NodeLoss>,
    pub first_submit_s: f64,
    pub last_submit_s: f64,
    pub all_done_s: f64,
    pub errors: Vec<String>,
}

/// Runs the day: `CLIENTS` threads submit `items` round-robin as fast as answers come, cancel
/// and requeue on schedule; nodes `kill[0]` and `kill[1]` are killed at 30 % and 60 % of the
/// submissions and restarted after [`Cluster::down_for`]; then waits (bounded by `limit`) until
/// nothing is active. `on_progress` is called about once a second with (submitted, active).
pub fn run_day(
    cluster: &dyn Cluster,
    items: &[Kind],
    marker: &Path,
    kill: &[usize],
    limit: Duration,
    on_progress: &(dyn Fn(f64, usize) + Sync),
) -> DayLog {
    let t0 = Instant::now();
    let done = AtomicUsize::new(0);
    let log = Mutex::new(DayLog::default());
    let total = items.len();
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let (done, log) = (&done, &log);
            s.spawn(move || client(cluster, c, items, marker, t0, done, log));
        }
        let killer = s.spawn(|| kill_nodes(cluster, kill, total, &done, t0));
        let losses = killer.join().unwrap_or_else(|_| Vec::new());
        if let Ok(mut l) = log.lock() {
            l.losses = losses;
        }
    });
    let mut log = log.into_inner().unwrap_or_default();
    log.submitted.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    log.first_submit_s = log.submitted.first().map_or(0.0, |s| s.at_s);
    log.last_submit_s = log
        .submitted
        .iter()
        .map(|s| s.at_s + s.took_s)
        .fold(0.0, f64::max);
    let mut last_report = Instant::now();
    loop {
        match cluster.active() {
            Ok(0) => break,
            Ok(n) if t0.elapsed() > limit => {
                log.errors
                    .push(format!("{n} jobs still active after {limit:?}"));
                break;
            }
            Ok(n) if last_report.elapsed() >= Duration::from_secs(1) => {
                on_progress(t0.elapsed().as_secs_f64(), n);
                last_report = Instant::now();
            }
            Ok(_) => {}
            Err(e) => log.errors.push(format!("active: {e}")),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    log.all_done_s = t0.elapsed().as_secs_f64();
    log
}

/// One client: its share of the items, then its cancels and requeues as they come due.
fn client(
    cluster: &dyn Cluster,
    c: usize,
    items: &[Kind],
    marker: &Path,
    t0: Instant,
    done: &AtomicUsize,
    log: &Mutex<DayLog>,
) {
    let mut mine = Vec::new();
    let mut later: BTreeMap<usize, Instant> = BTreeMap::new();
    let mut errors = Vec::new();
    for kind in items.iter().skip(c).step_by(CLIENTS) {
        let at = t0.elapsed().as_secs_f64();
        let t = Instant::now();
        match cluster.submit(c, *kind, marker) {
            Ok(ids) => {
                let took_s = t.elapsed().as_secs_f64();
                if matches!(kind, Kind::Cancelled | Kind::Requeued) {
                    later.insert(mine.len(), Instant::now());
                }
                mine.push(Submitted {
                    kind: *kind,
                    ids,
                    at_s: at,
                    took_s,
                    requeued: false,
                });
            }
            Err(e) => errors.push(format!("submit {kind:?}: {e}")),
        }
        done.fetch_add(1, Ordering::Relaxed);
        act_on_due(cluster, &mut mine, &mut later, &mut errors, false);
    }
    let deadline = Instant::now() + Duration::from_secs(900);
    while !later.is_empty() && Instant::now() < deadline {
        act_on_due(cluster, &mut mine, &mut later, &mut errors, true);
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, _) in later {
        errors.push(format!("never acted on {:?}", mine[i].ids));
    }
    if let Ok(mut l) = log.lock() {
        l.submitted.extend(mine);
        l.errors.extend(errors);
    }
}

/// Cancels and requeues what is due; a requeue of a job not running yet is tried again later.
fn act_on_due(
    cluster: &dyn Cluster,
    mine: &mut [Submitted],
    later: &mut BTreeMap<usize, Instant>,
    errors: &mut Vec<String>,
    draining: bool,
) {
    let due: Vec<usize> = later
        .iter()
        .filter(|(i, at)| {
            let wait = match mine[**i].kind {
                Kind::Cancelled => CANCEL_AFTER,
                _ => REQUEUE_AFTER,
            };
            at.elapsed() >= wait
        })
        .map(|(i, _)| *i)
        .collect();
    for i in due {
        let Some(id) = mine[i].ids.first().cloned() else {
            later.remove(&i);
            continue;
        };
        match mine[i].kind {
            Kind::Cancelled => {
                if let Err(e) = cluster.cancel(&id) {
                    errors.push(format!("cancel {id}: {e}"));
                }
                later.remove(&i);
            }
            _ => match cluster.requeue(&id) {
                Ok(true) => {
                    mine[i].requeued = true;
                    later.remove(&i);
                }
                Ok(false) if draining => {
                    later.insert(
                        i,
                        Instant::now() - REQUEUE_AFTER + Duration::from_millis(200),
                    );
                }
                Ok(false) => {}
                Err(e) => {
                    errors.push(format!("requeue {id}: {e}"));
                    later.remove(&i);
                }
            },
        }
    }
}

/// Kills `kill[k]` once `(k + 1) × 30 %` of the items are submitted; measures how long the
/// scheduler takes to see it down and to move its jobs off it; restarts it.
fn kill_nodes(
    cluster: &dyn Cluster,
    kill: &[usize],
    total: usize,
    done: &AtomicUsize,
    t0: Instant,
) -> Vec<NodeLoss> {
    let mut losses = Vec::new();
    for (k, node) in kill.iter().enumerate() {
        let at = total * 3 * (k + 1) / 10;
        while done.load(Ordering::Relaxed) < at && t0.elapsed() < Duration::from_secs(3600) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let on_it = cluster.jobs_on_node(*node).unwrap_or_default();
        let mut loss = NodeLoss {
            node: *node,
            jobs_on_it: on_it.len(),
            jobs: on_it.clone(),
            ..NodeLoss::default()
        };
        if cluster.kill_node(*node).is_err() {
            losses.push(loss);
            continue;
        }
        let killed = Instant::now();
        let down_for = cluster.down_for();
        while killed.elapsed() < down_for {
            if loss.noticed_after_s.is_none() && cluster.node_down(*node).unwrap_or(false) {
                loss.noticed_after_s = Some(killed.elapsed().as_secs_f64());
            }
            if loss.noticed_after_s.is_some() && loss.requeued_after_s.is_none() {
                let left = cluster.jobs_on_node(*node).unwrap_or_default();
                if !on_it.iter().any(|id| left.contains(id)) {
                    loss.requeued_after_s = Some(killed.elapsed().as_secs_f64());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        loss.down_for_s = killed.elapsed().as_secs_f64();
        if let Err(e) = cluster.restart_node(*node) {
            eprintln!("restarting node {node}: {e}");
        }
        losses.push(loss);
    }
    losses
}

/// The marker file of a run: in a directory every user may write (tasks run as their users).
pub fn marker_file(dir: &Path) -> Res<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let markers = dir.join("markers");
    std::fs::create_dir_all(&markers)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&markers, std::fs::Permissions::from_mode(0o1777))?;
    let file = markers.join("runs");
    std::fs::write(&file, "")?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    Ok(file)
}

/// The jobs a day's items amount to.
pub fn jobs_in(items: &[Kind]) -> usize {
    items.iter().map(|k| k.jobs()).sum()
}
