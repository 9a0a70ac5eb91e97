//! A sandboxed, configured plugin instance that implements the contract's stage traits
//! with `E = PolicyFault` (with its identity, the engine's stage traits).
//!
//! Every call runs under an epoch deadline and the instance's memory cap; a trap,
//! deadline overrun or memory exhaustion is returned as a typed [`PolicyFault`] and
//! the instance is dropped, to be re-made from its pre-instantiated form (and
//! re-configured) on the next call. Nothing a plugin does can crash or hang the host.

use crate::bindings::{self as v01, State};
use crate::bindings_v02 as v02;
use crate::bindings_v03 as v03;
use crate::mirror::HostMirror;
use crate::nonblocking::WouldBlock;
use crate::runtime::{EPOCH_TICK, Exports, Indices, LoadedPlugin};
use crate::{Limits, LoadError};
use gantry_contract::{Metadata, Stage};
use gantry_engine::{FaultKind, Identified, PluginIdent, PolicyFault};
use wasmtime::{Store, Trap};

/// A 0.1.0 instance's exports, ready to call.
pub(crate) type Guests01 = Exports<
    v01::plugin::Guest,
    v01::admission::Guest,
    v01::priority::Guest,
    v01::placement::Guest,
    v01::preemption::Guest,
>;

/// A 0.2.0 instance's exports, ready to call.
pub(crate) type Guests02 = Exports<
    v02::plugin::Guest,
    v02::admission::Guest,
    v02::priority::Guest,
    v02::placement::Guest,
    v02::preemption::Guest,
>;

/// A 0.3.0 instance's exports, ready to call.
pub(crate) type Guests03 = Exports<
    v03::plugin::Guest,
    v03::admission::Guest,
    v03::priority::Guest,
    v03::placement::Guest,
    v03::preemption::Guest,
>;

/// An instance's exports by contract version.
pub(crate) enum Guests {
    V01(Guests01),
    V02(Guests02),
    V03(Guests03),
}

pub(crate) struct Live {
    pub(crate) store: Store<State>,
    pub(crate) guests: Guests,
}

/// Looks up every export of `$ix` (an `Exports` of indices) in `$instance`.
macro_rules! load_exports {
    ($ix:expr, $store:expr, $instance:expr) => {{
        let (ix, store, instance) = ($ix, $store, $instance);
        (|| -> wasmtime::Result<_> {
            Ok(Exports {
                plugin: std::sync::Arc::new(ix.plugin.load(&mut *store, instance)?),
                admission: match &ix.admission {
                    Some(i) => Some(std::sync::Arc::new(i.load(&mut *store, instance)?)),
                    None => None,
                },
                priority: match &ix.priority {
                    Some(i) => Some(std::sync::Arc::new(i.load(&mut *store, instance)?)),
                    None => None,
                },
                placement: match &ix.placement {
                    Some(i) => Some(std::sync::Arc::new(i.load(&mut *store, instance)?)),
                    None => None,
                },
                preemption: match &ix.preemption {
                    Some(i) => Some(std::sync::Arc::new(i.load(&mut *store, instance)?)),
                    None => None,
                },
            })
        })()
    }};
}

/// A configured instance of a loaded plugin.
pub struct PluginInstance {
    plugin: LoadedPlugin,
    ident: PluginIdent,
    config: String,
    limits: Limits,
    live: Option<Live>,
    reinstantiations: u64,
    /// What a 0.2 or 0.3 plugin was sent (unused for 0.1).
    pub(crate) mirror: HostMirror,
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
    let guests = match &plugin.indices {
        Indices::V01(ix) => load_exports!(ix, &mut store, &instance).map(Guests::V01),
        Indices::V02(ix) => load_exports!(ix, &mut store, &instance).map(Guests::V02),
        Indices::V03(ix) => load_exports!(ix, &mut store, &instance).map(Guests::V03),
    };
    match guests {
        Ok(guests) => Ok(Live { store, guests }),
        Err(e) => Err(fail(&store, e)),
    }
}

impl Live {
    fn call_metadata(&mut self) -> wasmtime::Result<Metadata> {
        match &self.guests {
            Guests::V01(g) => g.plugin.call_metadata(&mut self.store).map(Metadata::from),
            Guests::V02(g) => g.plugin.call_metadata(&mut self.store).map(Metadata::from),
            Guests::V03(g) => g.plugin.call_metadata(&mut self.store).map(Metadata::from),
        }
    }

    fn call_configure(&mut self, config: &str) -> wasmtime::Result<Result<(), String>> {
        match &self.guests {
            Guests::V01(g) => g.plugin.call_configure(&mut self.store, config),
            Guests::V02(g) => g.plugin.call_configure(&mut self.store, config),
            Guests::V03(g) => g.plugin.call_configure(&mut self.store, config),
        }
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
            mirror: HostMirror::default(),
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
        guarded(&mut live, &limits, |l| l.call_metadata().map(Ok)).map_err(|(f, _)| err(f))
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
            guarded(&mut live, &self.limits, |l| l.call_configure(&config))
                .map_err(|(f, _)| PolicyFault::new(f.kind, format!("configure: {}", f.message)))?;
            self.live = Some(live);
        }
        self.live
            .as_mut()
            .ok_or_else(|| PolicyFault::new(FaultKind::Trap, "instance unavailable"))
    }

    pub(crate) fn loaded(&self) -> &LoadedPlugin {
        &self.plugin
    }

    /// How a 0.2 or 0.3 plugin's calls travelled (all zero for 0.1).
    pub fn mirror_stats(&self) -> crate::MirrorStats {
        self.mirror.stats
    }

    /// The contract version the plugin speaks.
    pub fn contract(&self) -> &'static str {
        self.plugin.indices.version()
    }

    pub(crate) fn call<T>(
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
            // Whatever the plugin kept may be wrong now: the next call resends everything.
            self.mirror.reset();
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

    fn answer_rejected(&mut self) {
        self.mirror.reset();
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
