//! A sandboxed, configured plugin instance that implements the contract's stage traits
//! with `E = PolicyFault` (with its identity, the engine's stage traits).
//!
//! Every call runs under an epoch deadline and the instance's memory cap; a trap,
//! deadline overrun or memory exhaustion is returned as a typed [`PolicyFault`] and
//! the instance is dropped, to be re-made from its pre-instantiated form (and
//! re-configured) on the next call. Nothing a plugin does can crash or hang the host.

use crate::bindings::{State, admission, placement, plugin, preemption, priority, wit};
use crate::nonblocking::WouldBlock;
use crate::runtime::{EPOCH_TICK, LoadedPlugin};
use crate::{Limits, LoadError};
use gantry_contract::wit_convert::vec_into;
use gantry_contract::{
    Admission, Cycle, Eviction, Job, Metadata, Node, Placement, Plan, Preemption, Priority,
    RunningJob, Scored, Stage, SubmitVerdict, Verdict,
};
use gantry_engine::{FaultKind, Identified, PluginIdent, PolicyFault};
use wasmtime::{Store, Trap};

struct Live {
    store: Store<State>,
    plugin: plugin::Guest,
    admission: Option<admission::Guest>,
    priority: Option<priority::Guest>,
    placement: Option<placement::Guest>,
    preemption: Option<preemption::Guest>,
}

/// A configured instance of a loaded plugin.
pub struct PluginInstance {
    plugin: LoadedPlugin,
    ident: PluginIdent,
    config: String,
    limits: Limits,
    live: Option<Live>,
    reinstantiations: u64,
}

impl std::fmt::Debug for PluginInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginInstance")
            .field("ident", &self.ident)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Deadline of instantiating a plugin and reading its metadata when it is loaded, ms.
const LOAD_DEADLINE_MS: u64 = 5_000;

fn deadline_ticks(limits: &Limits) -> u64 {
    limits
        .deadline_ms
        .div_ceil(EPOCH_TICK.as_millis() as u64)
        .max(1)
}

fn classify(e: &wasmtime::Error, memory_hit: bool) -> PolicyFault {
    let text = format!("{e:#}");
    if e.downcast_ref::<WouldBlock>().is_some() {
        return PolicyFault::new(FaultKind::Trap, text);
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => PolicyFault::new(
            FaultKind::DeadlineExceeded,
            "the call ran past its deadline",
        ),
        _ if memory_hit => PolicyFault::new(
            FaultKind::MemoryLimit,
            format!("memory cap reached, then: {text}"),
        ),
        Some(_) => PolicyFault::new(FaultKind::Trap, text),
        None => PolicyFault::new(FaultKind::InvalidOutput, text),
    }
}

fn instantiate(plugin: &LoadedPlugin, limits: &Limits) -> Result<Live, PolicyFault> {
    let engine = &plugin.runtime.inner.engine;
    let cap = usize::try_from(limits.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let mut store = Store::new(engine, State::new(&plugin.metadata.name, cap));
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(deadline_ticks(limits));
    let fail = |store: &Store<State>, e: wasmtime::Error| classify(&e, store.data().limiter.hit());
    let instance = match plugin.pre.instantiate(&mut store) {
        Ok(i) => i,
        Err(e) => return Err(fail(&store, e)),
    };
    let ix = &plugin.indices;
    let guests = (|| -> wasmtime::Result<_> {
        Ok((
            ix.plugin.load(&mut store, &instance)?,
            ix.admission
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()?,
            ix.priority
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()?,
            ix.placement
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()?,
            ix.preemption
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()?,
        ))
    })();
    match guests {
        Ok((plugin, admission, priority, placement, preemption)) => Ok(Live {
            store,
            plugin,
            admission,
            priority,
            placement,
            preemption,
        }),
        Err(e) => Err(fail(&store, e)),
    }
}

/// Runs `f` on `live` under a fresh deadline; classifies failures.
fn guarded<T>(
    live: &mut Live,
    limits: &Limits,
    f: impl FnOnce(&mut Live) -> wasmtime::Result<Result<T, String>>,
) -> Result<T, (PolicyFault, bool)> {
    live.store.set_epoch_deadline(deadline_ticks(limits));
    live.store.data_mut().limiter.clear_hit();
    live.store.data_mut().log_lines_left = crate::bindings::LOG_LINES_PER_CALL;
    live.store.data_mut().call_errors.clear();
    let r = f(live);
    live.store.data_mut().drain_stdio();
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(message)) => Err((PolicyFault::new(FaultKind::PluginError, message), false)),
        Err(e) => {
            let mut fault = classify(&e, live.store.data().limiter.hit());
            let said = &live.store.data().call_errors;
            if fault.kind != FaultKind::DeadlineExceeded && !said.is_empty() {
                // Lead with what the guest said (an uncaught exception, a panic message).
                let trap = e
                    .downcast_ref::<Trap>()
                    .map_or_else(|| fault.message.clone(), |t| t.to_string());
                fault.message = format!("{} ({trap})", said.join("; "));
            }
            Err((fault, true))
        }
    }
}

impl PluginInstance {
    pub(crate) fn new(
        plugin: LoadedPlugin,
        config: &str,
        limits: Limits,
    ) -> Result<Self, LoadError> {
        let m = &plugin.metadata;
        let ident = PluginIdent {
            name: m.name.clone(),
            version: m.version.clone(),
            sha256: plugin.sha256.clone(),
        };
        let mut me = Self {
            plugin,
            ident,
            config: config.to_string(),
            limits,
            live: None,
            reinstantiations: 0,
        };
        let name = me.ident.name.clone();
        me.ensure_live().map_err(|fault| LoadError::Fault {
            plugin: name,
            fault,
        })?;
        Ok(me)
    }

    /// Instantiates once to ask for metadata (used while loading).
    pub(crate) fn read_metadata(plugin: &LoadedPlugin) -> Result<Metadata, LoadError> {
        // Loading is a one-off step, not a scheduling call: a plugin that starts slowly on a
        // busy host (a daemon starting beside others on two cores) is not a faulty one, and
        // one that never returns is still stopped.
        let limits = Limits {
            deadline_ms: LOAD_DEADLINE_MS,
            ..Limits::default()
        };
        let err = |fault| LoadError::Fault {
            plugin: plugin.sha256.chars().take(12).collect(),
            fault,
        };
        let mut live = instantiate(plugin, &limits).map_err(err)?;
        guarded(&mut live, &limits, |l| {
            l.plugin.call_metadata(&mut l.store).map(Ok)
        })
        .map(Metadata::from)
        .map_err(|(f, _)| err(f))
    }

    /// Which plugin this is.
    pub fn plugin_ident(&self) -> &PluginIdent {
        &self.ident
    }

    /// The JSON config it was configured with.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// How many times the instance was re-made after a fault.
    pub fn reinstantiations(&self) -> u64 {
        self.reinstantiations
    }

    /// Bytes of linear memory and tables the live instance uses (0 when none is live).
    pub fn memory_used_bytes(&self) -> usize {
        self.live
            .as_ref()
            .map(|l| l.store.data().limiter.used_bytes())
            .unwrap_or(0)
    }

    fn ensure_live(&mut self) -> Result<&mut Live, PolicyFault> {
        if self.live.is_none() {
            let mut live = instantiate(&self.plugin, &self.limits)?;
            let config = self.config.clone();
            guarded(&mut live, &self.limits, |l| {
                l.plugin.call_configure(&mut l.store, &config)
            })
            .map_err(|(f, _)| PolicyFault::new(f.kind, format!("configure: {}", f.message)))?;
            self.live = Some(live);
        }
        self.live
            .as_mut()
            .ok_or_else(|| PolicyFault::new(FaultKind::Trap, "instance unavailable"))
    }

    fn call<T>(
        &mut self,
        stage: Stage,
        f: impl FnOnce(&mut Live) -> Option<wasmtime::Result<Result<T, String>>>,
    ) -> Result<T, PolicyFault> {
        let limits = self.limits;
        let live = self.ensure_live()?;
        let mut missing = false;
        let r = guarded(live, &limits, |l| match f(l) {
            Some(r) => r,
            None => {
                missing = true;
                Ok(Err(String::new()))
            }
        });
        if missing {
            return Err(PolicyFault::new(
                FaultKind::PluginError,
                format!(
                    "plugin {} does not export the {stage} stage",
                    self.ident.name
                ),
            ));
        }
        r.map_err(|(fault, poisoned)| {
            if poisoned {
                // A trapped instance cannot be entered again: make a fresh one next time.
                self.live = None;
                self.reinstantiations += 1;
            }
            fault
        })
    }
}

impl Identified for PluginInstance {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Admission<PolicyFault> for PluginInstance {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter([job]));
        self.call(Stage::Admission, |l| {
            l.admission
                .as_ref()
                .map(|g| g.call_check_submit(&mut l.store, &c, &j))
        })
        .map(SubmitVerdict::from)
    }
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Admission, |l| {
            l.admission
                .as_ref()
                .map(|g| g.call_admit(&mut l.store, &c, &j))
        })
        .map(vec_into)
    }
}

impl Priority<PolicyFault> for PluginInstance {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        let (c, j) = (wit::Cycle::from(ctx), wit::JobList::from_iter(jobs));
        self.call(Stage::Priority, |l| {
            l.priority
                .as_ref()
                .map(|g| g.call_score(&mut l.store, &c, &j, previous))
        })
        .map(vec_into)
    }
}

impl Placement<PolicyFault> for PluginInstance {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        let (c, j, n, r) = (
            wit::Cycle::from(ctx),
            wit::JobList::from_iter(jobs),
            wit::NodeList::from(nodes),
            wit::RunningList::from(running),
        );
        self.call(Stage::Placement, |l| {
            l.placement
                .as_ref()
                .map(|g| g.call_place(&mut l.store, &c, &j, &n, &r))
        })
        .map(Plan::from)
    }
}

impl Preemption<PolicyFault> for PluginInstance {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        let (c, b, n, r) = (
            wit::Cycle::from(ctx),
            wit::JobList::from_iter(blocked),
            wit::NodeList::from(nodes),
            wit::RunningList::from(running),
        );
        self.call(Stage::Preemption, |l| {
            l.preemption
                .as_ref()
                .map(|g| g.call_preempt(&mut l.store, &c, &b, blocked_scores, &n, &r))
        })
        .map(vec_into)
    }
}

impl LoadedPlugin {
    /// A configured instance with `limits`.
    pub fn instantiate(
        &self,
        config_json: &str,
        limits: Limits,
    ) -> Result<PluginInstance, LoadError> {
        PluginInstance::new(self.clone(), config_json, limits)
    }
}
