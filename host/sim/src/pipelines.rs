//! Pipelines for a simulation: the same pipeline files the daemon takes (`gantry
//! policy set`), built either from wasm components exactly as the daemon runs them
//! (built-ins plus any `--plugin FILE.wasm`) or from the built-in plugins compiled
//! into this binary (`--native`), which is faster and gives the same decisions.
//!
//! Owns: reading pipeline files and building [`Pipeline`]s for the simulator. Does not
//! own the daemon's live pipeline (the scheduler) or the plugins.

use anyhow::{Context, bail};
use gantry_engine::{
    AdmissionStage, Native, Pipeline, PlacementStage, PreemptionStage, PriorityStage, StageSlot,
};
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use gantry_policy::{PipelineSpec, PluginRef, Registry};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A pipeline file and the name it goes by in reports.
#[derive(Debug, Clone)]
pub struct NamedPipeline {
    /// Label in reports (the file stem, or the placement plugin's name).
    pub label: String,
    /// What to build.
    pub spec: PipelineSpec,
}

/// Reads a pipeline file (JSON or TOML, as for `gantry policy set`).
pub fn read(path: &Path) -> anyhow::Result<NamedPipeline> {
    let value = gantry_config::pipeline_file::read_pipeline(path)?;
    let spec: PipelineSpec = serde_json::from_value(value)
        .with_context(|| format!("{}: not a pipeline", path.display()))?;
    let label = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| spec.placement.plugin.clone());
    Ok(NamedPipeline { label, spec })
}

/// A pipeline with only a placement plugin (what the fill protocol needs).
pub fn placement_only(plugin: &str, config: serde_json::Value) -> NamedPipeline {
    let mut placement = PluginRef::named(plugin);
    placement.config = config;
    NamedPipeline {
        label: plugin.to_string(),
        spec: PipelineSpec {
            admission: Vec::new(),
            priority: Vec::new(),
            placement,
            preemption: None,
        },
    }
}

/// Builds pipelines from components or natively.
#[derive(Debug, Clone)]
pub enum Builder {
    /// Sandboxed wasm components, as in the daemon.
    Wasm(Box<Registry>),
    /// Built-in plugins compiled into the binary.
    Native,
}

/// Limits for simulated calls: generous, because a deadline hit would make a run
/// depend on the machine; the memory cap still applies.
fn sim_limits() -> Limits {
    Limits {
        deadline_ms: 10_000,
        memory_mib: 1024,
    }
}

impl Builder {
    /// A wasm builder with the built-in plugins and `extra` component files.
    pub fn wasm(extra: &[PathBuf]) -> anyhow::Result<Self> {
        let runtime = Runtime::new(RuntimeOptions {
            cache_dir: gantry_policy::conformance::cache_dir(),
        })?;
        let metrics = Arc::new(gantry_policy::metrics::NoMetrics);
        let mut registry = Registry::new(runtime, sim_limits(), metrics);
        for (name, bytes) in gantry_components::BUILTIN {
            registry
                .register(bytes)
                .map_err(|e| anyhow::anyhow!("built-in plugin {name}: {e}"))?;
        }
        for path in extra {
            let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
            registry
                .register(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        Ok(Self::Wasm(Box::new(registry)))
    }

    /// Builds `spec`.
    pub fn build(&self, spec: &PipelineSpec) -> anyhow::Result<Pipeline> {
        match self {
            Self::Wasm(registry) => Ok(registry.build(spec, None)?.0),
            Self::Native => native(spec),
        }
    }
}

fn native(spec: &PipelineSpec) -> anyhow::Result<Pipeline> {
    let mut admission: Vec<StageSlot<dyn AdmissionStage>> = Vec::new();
    if let Some(r) = spec.admission.first() {
        bail!(
            "admission[0]: plugin {} has no native build; run without --native",
            r.plugin
        );
    }
    let mut priority: Vec<StageSlot<dyn PriorityStage>> = Vec::new();
    for (i, r) in spec.priority.iter().enumerate() {
        let config = r.config.to_string();
        let p: Box<dyn PriorityStage> = match r.plugin.as_str() {
            "fifo" => Box::new(native_plugin(
                gantry_plugin_fifo::Fifo,
                &config,
                "priority",
                i,
            )?),
            "shortest-first" => Box::new(native_plugin(
                gantry_plugin_shortest_first::ShortestFirst::default(),
                &config,
                "priority",
                i,
            )?),
            other => {
                bail!("priority[{i}].plugin: {other} has no native build; run without --native")
            }
        };
        priority.push(StageSlot::new(p, config));
    }
    admission.clear();
    let config = spec.placement.config.to_string();
    let placement: Box<dyn PlacementStage> = native_placement(&spec.placement.plugin, &config)?;
    let placement = StageSlot::new(placement, config);
    let preemption = match &spec.preemption {
        None => None,
        Some(r) if r.plugin == "priority-preempt" => {
            let config = r.config.to_string();
            let p: Box<dyn PreemptionStage> = Box::new(native_plugin(
                gantry_plugin_priority_preempt::PriorityPreempt::default(),
                &config,
                "preemption",
                0,
            )?);
            Some(StageSlot::new(p, config))
        }
        Some(r) => bail!(
            "preemption.plugin: {} has no native build; run without --native",
            r.plugin
        ),
    };
    Ok(Pipeline {
        admission,
        priority,
        placement,
        preemption,
    })
}

fn native_plugin<P: gantry_contract::Plugin>(
    plugin: P,
    config: &str,
    stage: &str,
    i: usize,
) -> anyhow::Result<Native<P>> {
    Native::new(plugin, config).map_err(|e| anyhow::anyhow!("{stage}[{i}].config: {e}"))
}

fn native_placement(name: &str, config: &str) -> anyhow::Result<Box<dyn PlacementStage>> {
    let p = |e: gantry_engine::PolicyFault| anyhow::anyhow!("placement.config: {e}");
    Ok(match name {
        "first-fit" => {
            Box::new(Native::new(gantry_plugin_first_fit::FirstFit::default(), config).map_err(p)?)
        }
        "random" => {
            Box::new(Native::new(gantry_plugin_random::Random::default(), config).map_err(p)?)
        }
        "dot-product" => Box::new(
            Native::new(gantry_plugin_dot_product::DotProduct::default(), config).map_err(p)?,
        ),
        "gpu-clustering" => Box::new(
            Native::new(
                gantry_plugin_gpu_clustering::GpuClustering::default(),
                config,
            )
            .map_err(p)?,
        ),
        "gpu-packing" => Box::new(
            Native::new(gantry_plugin_gpu_packing::GpuPacking::default(), config).map_err(p)?,
        ),
        "best-fit" => {
            Box::new(Native::new(gantry_plugin_best_fit::BestFit::default(), config).map_err(p)?)
        }
        "fgd" => Box::new(Native::new(gantry_plugin_fgd::Fgd::default(), config).map_err(p)?),
        "stranding" => {
            Box::new(Native::new(gantry_plugin_stranding::Stranding::default(), config).map_err(p)?)
        }
        other => bail!("placement.plugin: {other} has no native build; run without --native"),
    })
}
