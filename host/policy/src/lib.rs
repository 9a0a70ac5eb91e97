//! Policy pipelines as the daemon manages them: the registry of uploaded plugins
//! (name → sha256, bytes in the store), pipeline specs (which plugin and config at
//! each stage), and building a live [`Pipeline`] of sandboxed instances from a spec.
//!
//! Owns: resolving plugin references, checking that each plugin implements the stage
//! it is put at, and the built-in default pipeline; the observation of each plugin call
//! (`instrumented`) and the conformance runner of `gantry plugin test` (`conformance`).
//! Does not own when a pipeline is swapped (the daemon's scheduler), the HTTP surface (its
//! API) or the Prometheus metrics: calls are reported through [`metrics::PluginMetrics`],
//! which the daemon's `Metrics` implements.
//!
//! Dependency direction: this crate uses `gantry-contract`, `gantry-engine`,
//! `gantry-plugin-runtime`, `gantry-components` (the built-in plugins) and `gantry-store`
//! (uploaded plugins by sha256); it knows nothing of the daemon, so the simulator may use
//! it without the daemon.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod conformance;
pub mod instrumented;
pub mod metrics;

use gantry_contract::Stage;
use gantry_engine::{Pipeline, StageSlot};
use gantry_plugin_runtime::{Limits, LoadError, LoadedPlugin, Runtime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One plugin at one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginRef {
    /// A registered plugin name, or a sha256 (64 hex digits).
    pub plugin: String,
    /// JSON config passed to `configure` (default `{}`): an object; which keys the plugin
    /// takes is its own (each plugin's README), a config it refuses is a 422.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub config: serde_json::Value,
    /// Deadline per call in ms (default from the daemon config), at most 5,000: a longer
    /// call would hold every cycle.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 5000)]
    pub deadline_ms: Option<u64>,
    /// Memory cap in MiB (default from the daemon config), 16..=4096.
    #[serde(default)]
    #[schema(minimum = 16, maximum = 4096)]
    pub memory_mib: Option<u64>,
}

/// Most plugins in the admission chain, and in the priority chain (`#[schema(max_items)]` on
/// [`PipelineSpec`] repeats it; the OpenAPI tests check they agree).
pub const MAX_CHAIN: usize = 16;

/// Largest `deadline_ms` a pipeline may give one plugin.
pub const MAX_PLUGIN_DEADLINE_MS: u64 = 5_000;

/// Largest `memory_mib` a pipeline may give one plugin.
pub const MAX_PLUGIN_MEMORY_MIB: u64 = 4_096;

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

impl PluginRef {
    /// A reference with an empty config.
    pub fn named(plugin: &str) -> Self {
        Self {
            plugin: plugin.into(),
            config: empty_object(),
            deadline_ms: None,
            memory_mib: None,
        }
    }
}

/// Which plugin runs at each stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// Admission chain, at most 16 plugins.
    #[serde(default)]
    #[schema(max_items = 16)]
    pub admission: Vec<PluginRef>,
    /// Priority chain, at most 16 plugins.
    #[serde(default)]
    #[schema(max_items = 16)]
    pub priority: Vec<PluginRef>,
    /// Placement.
    pub placement: PluginRef,
    /// Preemption (optional).
    #[serde(default)]
    pub preemption: Option<PluginRef>,
}

/// The built-in default: fifo, first-fit, priority-preempt.
pub fn default_spec() -> PipelineSpec {
    PipelineSpec {
        admission: Vec::new(),
        priority: vec![PluginRef::named("fifo")],
        placement: PluginRef::named("first-fit"),
        preemption: Some(PluginRef::named("priority-preempt")),
    }
}

/// A plugin as resolved into a pipeline version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedRef {
    /// Stage.
    pub stage: Stage,
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Component sha256.
    pub sha256: String,
    /// Config.
    pub config: serde_json::Value,
}

/// A pipeline version as kept in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineVersion {
    /// Increasing version number.
    pub version: u64,
    /// The spec as given.
    pub spec: PipelineSpec,
    /// What each reference resolved to.
    pub resolved: Vec<ResolvedRef>,
    /// When it became active, ms since the Unix epoch.
    pub activated_ms: u64,
    /// "default", "set" or "rollback".
    pub action: String,
    /// For rollbacks: the version restored.
    pub restores: Option<u64>,
    /// Who made the change (the token's user; "unauthenticated" on an open daemon; absent
    /// for the built-in default and versions recorded before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A pipeline that cannot be built, naming the field.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    /// e.g. `priority[0].plugin`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Uploaded plugins by name, and the runtime that loads them.
#[derive(Debug, Clone)]
pub struct Registry {
    runtime: Runtime,
    metrics: std::sync::Arc<dyn crate::metrics::PluginMetrics>,
    by_name: BTreeMap<String, LoadedPlugin>,
    limits: Limits,
}

impl Registry {
    /// An empty registry with default limits; the instances it builds report their
    /// calls to `metrics` (and trace them).
    pub fn new(
        runtime: Runtime,
        limits: Limits,
        metrics: std::sync::Arc<dyn crate::metrics::PluginMetrics>,
    ) -> Self {
        Self {
            runtime,
            metrics,
            by_name: BTreeMap::new(),
            limits,
        }
    }

    /// Loads and registers a component under its metadata name (a newer upload with
    /// the same name replaces the name's target; older versions stay reachable by sha256).
    pub fn register(&mut self, bytes: &[u8]) -> Result<LoadedPlugin, LoadError> {
        let p = self.runtime.load(bytes)?;
        self.by_name.insert(p.metadata().name.clone(), p.clone());
        Ok(p)
    }

    /// Every registered plugin by name.
    pub fn plugins(&self) -> impl Iterator<Item = &LoadedPlugin> {
        self.by_name.values()
    }

    fn resolve(
        &self,
        field: &str,
        r: &PluginRef,
        store: Option<&gantry_store::Store>,
    ) -> Result<LoadedPlugin, PolicyError> {
        if let Some(p) = self.by_name.get(&r.plugin) {
            return Ok(p.clone());
        }
        let sha = r.plugin.strip_prefix("sha256:").unwrap_or(&r.plugin);
        if let Some(store) =
            store.filter(|_| sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()))
        {
            let bytes = store.plugin(sha).map_err(|e| PolicyError {
                field: field.into(),
                message: e.to_string(),
            })?;
            if let Some(bytes) = bytes {
                return self.runtime.load(&bytes).map_err(|e| PolicyError {
                    field: field.into(),
                    message: e.to_string(),
                });
            }
        }
        let known: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        Err(PolicyError {
            field: field.into(),
            message: format!(
                "no plugin named `{}` (known: {}); upload it first",
                r.plugin,
                known.join(", ")
            ),
        })
    }

    fn instance<S: ?Sized>(
        &self,
        field: &str,
        stage: Stage,
        r: &PluginRef,
        store: Option<&gantry_store::Store>,
        resolved: &mut Vec<ResolvedRef>,
        boxed: impl FnOnce(crate::instrumented::Instrumented) -> Box<S>,
    ) -> Result<StageSlot<S>, PolicyError> {
        let plugin = self.resolve(&format!("{field}.plugin"), r, store)?;
        if !plugin.stages().contains(&stage) {
            return Err(PolicyError {
                field: format!("{field}.plugin"),
                message: format!(
                    "plugin {} implements {:?}, not the {stage} stage",
                    plugin.metadata().name,
                    plugin.stages()
                ),
            });
        }
        if !r.config.is_object() {
            return Err(PolicyError {
                field: format!("{field}.config"),
                message: "must be a JSON object".into(),
            });
        }
        let out_of = |key: &str, range: String| PolicyError {
            field: format!("{field}.{key}"),
            message: format!("must be {range}"),
        };
        if r.deadline_ms
            .is_some_and(|ms| !(1..=MAX_PLUGIN_DEADLINE_MS).contains(&ms))
        {
            return Err(out_of(
                "deadline_ms",
                format!("1..={MAX_PLUGIN_DEADLINE_MS} (ms per call)"),
            ));
        }
        if r.memory_mib
            .is_some_and(|mib| !(16..=MAX_PLUGIN_MEMORY_MIB).contains(&mib))
        {
            return Err(out_of(
                "memory_mib",
                format!("16..={MAX_PLUGIN_MEMORY_MIB} (MiB)"),
            ));
        }
        let limits = Limits {
            deadline_ms: r
                .deadline_ms
                .unwrap_or(self.limits.deadline_ms)
                .clamp(1, 60_000),
            memory_mib: r
                .memory_mib
                .unwrap_or(self.limits.memory_mib)
                .clamp(16, 16_384),
        };
        let config = r.config.to_string();
        let inst = plugin
            .instantiate(&config, limits)
            .map_err(|e| PolicyError {
                field: format!("{field}.config"),
                message: e.to_string(),
            })?;
        resolved.push(ResolvedRef {
            stage,
            name: plugin.metadata().name.clone(),
            version: plugin.metadata().version.clone(),
            sha256: plugin.sha256().to_string(),
            config: r.config.clone(),
        });
        let inst = crate::instrumented::Instrumented::new(inst, self.metrics.clone());
        Ok(StageSlot::new(boxed(inst), config))
    }

    /// Builds a live pipeline of configured instances from `spec`; plugins are looked
    /// up by name, or by sha256 in `store` when there is one.
    pub fn build(
        &self,
        spec: &PipelineSpec,
        store: Option<&gantry_store::Store>,
    ) -> Result<(Pipeline, Vec<ResolvedRef>), PolicyError> {
        for (field, chain) in [("admission", &spec.admission), ("priority", &spec.priority)] {
            if chain.len() > MAX_CHAIN {
                return Err(PolicyError {
                    field: field.into(),
                    message: format!("at most {MAX_CHAIN} plugins per chain"),
                });
            }
        }
        let mut resolved = Vec::new();
        let mut admission = Vec::new();
        for (i, r) in spec.admission.iter().enumerate() {
            admission.push(self.instance(
                &format!("admission[{i}]"),
                Stage::Admission,
                r,
                store,
                &mut resolved,
                |p| Box::new(p) as Box<dyn gantry_engine::AdmissionStage>,
            )?);
        }
        let mut priority = Vec::new();
        for (i, r) in spec.priority.iter().enumerate() {
            priority.push(self.instance(
                &format!("priority[{i}]"),
                Stage::Priority,
                r,
                store,
                &mut resolved,
                |p| Box::new(p) as Box<dyn gantry_engine::PriorityStage>,
            )?);
        }
        let placement = self.instance(
            "placement",
            Stage::Placement,
            &spec.placement,
            store,
            &mut resolved,
            |p| Box::new(p) as Box<dyn gantry_engine::PlacementStage>,
        )?;
        let preemption = match &spec.preemption {
            Some(r) => Some(self.instance(
                "preemption",
                Stage::Preemption,
                r,
                store,
                &mut resolved,
                |p| Box::new(p) as Box<dyn gantry_engine::PreemptionStage>,
            )?),
            None => None,
        };
        Ok((
            Pipeline {
                admission,
                priority,
                placement,
                preemption,
            },
            resolved,
        ))
    }
}
