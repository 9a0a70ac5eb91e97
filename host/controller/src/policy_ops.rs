//! Policy operations: loading plugins and the active pipeline at start, uploading a
//! plugin, and hot swaps (set, rollback) that build the new pipeline, dry-run it on
//! the current snapshot, and swap it in atomically between cycles.
//!
//! Owns: pipeline history and the swap protocol. Does not own building instances
//! (`policy::Registry`), the error type (`policy_error.rs`) or HTTP (`api`).

use super::policy_error::PolicyOpError;
use super::policy_manager::PolicyManager;
use super::{FaultView, Scheduler, lock, now_ms};
use gantry_api::views::PluginInfo;
use gantry_config::Config;
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use gantry_policy::{PipelineSpec, PipelineVersion, Registry, default_spec};
use gantry_store::Store;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

const ACTIVE_KEY: &str = "active_pipeline";
const NAMES_KEY: &str = "plugin_names";

/// The active pipeline and its health.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyView {
    /// The active version.
    pub active: PipelineVersion,
    /// Faults per plugin/stage/kind since start.
    pub fault_counts: BTreeMap<String, u64>,
    /// Plugins quarantined in the live pipeline.
    pub quarantined: Vec<String>,
    /// The pipeline version a failing stage falls back to (`null`: the built-in default).
    pub fallback_version: Option<u64>,
}

/// Result of a swap.
#[derive(Debug, Clone, Serialize)]
pub struct SwapResult {
    /// The version now live.
    pub active: PipelineVersion,
    /// Time from the request to the new pipeline being live, in ms.
    pub swap_ms: f64,
}

/// Compiles the built-in plugins into the data directory's cache of native code, so that
/// a later [`load_policy`] finds them there (a standby does this while it waits to lead:
/// `crate::leadership`); returns how many.
pub fn warm_compile_cache(config: &Config) -> anyhow::Result<usize> {
    gantry_private_files::dir_with_mode(&config.data_dir, gantry_private_files::TRAVERSE_ONLY)?;
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: Some(config.data_dir.join("compiled")),
    })?;
    for (name, bytes) in gantry_components::BUILTIN {
        runtime
            .load(bytes)
            .map_err(|e| anyhow::anyhow!("built-in plugin {name}: {e}"))?;
    }
    Ok(gantry_components::BUILTIN.len())
}

pub(crate) fn load_policy(
    config: &Config,
    store: &Store,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
) -> anyhow::Result<PolicyManager> {
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: Some(config.data_dir.join("compiled")),
    })?;
    let limits = Limits {
        deadline_ms: config.plugins.deadline_ms,
        memory_mib: config.plugins.memory_mib,
    };
    let mut registry = Registry::new(runtime, limits, metrics);
    // A first start compiles every built-in to native code (tens of seconds on a small
    // machine; later starts load the cached code): say so, so a quiet start is not taken
    // for a hang.
    let started = std::time::Instant::now();
    tracing::info!(
        plugins = gantry_components::BUILTIN.len(),
        "loading the built-in plugins (the first start compiles them; later starts use the cache)"
    );
    for (name, bytes) in gantry_components::BUILTIN {
        let p = registry
            .register(bytes)
            .map_err(|e| anyhow::anyhow!("built-in plugin {name}: {e}"))?;
        store.put_plugin(p.sha256(), bytes)?;
    }
    tracing::info!(
        ms = started.elapsed().as_millis() as u64,
        "built-in plugins loaded"
    );
    let names: BTreeMap<String, String> = store.meta(NAMES_KEY)?.unwrap_or_default();
    for sha in names.values() {
        match store.plugin(sha)? {
            Some(bytes) => {
                if let Err(e) = registry.register(&bytes) {
                    tracing::warn!(sha256 = %sha, "stored plugin no longer loads: {e}");
                }
            }
            None => tracing::warn!(sha256 = %sha, "stored plugin missing"),
        }
    }
    let (fallback, _) = registry.build(&default_spec(), Some(store))?;
    let mut history: Vec<PipelineVersion> = store.pipelines()?;
    let active_no: Option<u64> = store.meta(ACTIVE_KEY)?;
    let wanted = active_no.and_then(|n| history.iter().find(|v| v.version == n).cloned());
    let built = wanted.and_then(|v| match registry.build(&v.spec, Some(store)) {
        Ok((p, _)) => Some((p, v)),
        Err(e) => {
            tracing::error!(
                version = v.version,
                "active pipeline does not load ({e}); using the built-in default"
            );
            None
        }
    });
    let (live, active) = match built {
        Some(x) => x,
        None => {
            let (p, resolved) = registry.build(&default_spec(), Some(store))?;
            let version = history.last().map_or(1, |v| v.version + 1);
            let v = PipelineVersion {
                version,
                spec: default_spec(),
                resolved,
                activated_ms: now_ms(),
                action: "default".into(),
                restores: None,
                by: None,
            };
            store.put_pipeline(version, &v)?;
            store.set_meta(ACTIVE_KEY, &version)?;
            history.push(v.clone());
            (p, v)
        }
    };
    tracing::info!(version = active.version, plugins = ?active.resolved.iter().map(|r| format!("{}:{}", r.stage, r.name)).collect::<Vec<_>>(), "active pipeline");
    Ok(PolicyManager::new(
        registry, live, active, fallback, history,
    ))
}

impl Scheduler {
    /// Loads, validates and stores an uploaded component.
    pub(crate) fn upload_plugin(&self, bytes: &[u8]) -> Result<PluginInfo, PolicyOpError> {
        let mut registry = lock(&self.inner.policy).registry().clone();
        let p = registry.register(bytes)?;
        self.inner.store.put_plugin(p.sha256(), bytes)?;
        let mut names: BTreeMap<String, String> =
            self.inner.store.meta(NAMES_KEY)?.unwrap_or_default();
        names.insert(p.metadata().name.clone(), p.sha256().to_string());
        self.inner.store.set_meta(NAMES_KEY, &names)?;
        self.inner.store.flush()?;
        lock(&self.inner.policy).set_registry(registry);
        tracing::info!(name = %p.metadata().name, sha256 = %p.sha256(), "plugin uploaded");
        Ok(PluginInfo {
            sha256: p.sha256().into(),
            metadata: p.metadata().clone(),
            size_bytes: bytes.len(),
        })
    }

    /// Every registered plugin.
    pub(crate) fn plugins(&self) -> Vec<PluginInfo> {
        let pol = lock(&self.inner.policy);
        pol.registry()
            .plugins()
            .map(|p| PluginInfo {
                sha256: p.sha256().into(),
                metadata: p.metadata().clone(),
                size_bytes: p.size_bytes(),
            })
            .collect()
    }

    /// The active pipeline.
    pub(crate) fn policy(&self) -> PolicyView {
        let pol = lock(&self.inner.policy);
        let quarantined = pol.quarantined();
        let active = pol.active().clone();
        let fallback_version = pol.fallback_version();
        drop(pol);
        PolicyView {
            active,
            fault_counts: lock(&self.inner.faults).counts(),
            quarantined,
            fallback_version,
        }
    }

    /// Every activation, oldest first.
    pub(crate) fn policy_history(&self) -> Vec<PipelineVersion> {
        lock(&self.inner.policy).history().to_vec()
    }

    /// Recent plugin faults, oldest first.
    pub(crate) fn faults(&self) -> Vec<FaultView> {
        lock(&self.inner.faults).recent()
    }

    /// Builds `spec`, dry-runs it on the current snapshot, and makes it live; `by` (who
    /// asked) goes into the history.
    pub(crate) fn set_policy(
        &self,
        spec: PipelineSpec,
        by: &str,
    ) -> Result<SwapResult, PolicyOpError> {
        self.swap(spec, "set", None, by)
    }

    /// Makes the pipeline active before the current one live again (`by`: who asked).
    pub(crate) fn rollback_policy(&self, by: &str) -> Result<SwapResult, PolicyOpError> {
        let previous = {
            let pol = lock(&self.inner.policy);
            let history = pol.history();
            let n = history.len();
            if n < 2 {
                return Err(PolicyOpError::NoPrevious);
            }
            history[n - 2].clone()
        };
        self.swap(previous.spec, "rollback", Some(previous.version), by)
    }

    fn swap(
        &self,
        spec: PipelineSpec,
        action: &str,
        restores: Option<u64>,
        by: &str,
    ) -> Result<SwapResult, PolicyOpError> {
        let t0 = Instant::now();
        let registry = lock(&self.inner.policy).registry().clone();
        let (mut candidate, resolved) = registry.build(&spec, Some(&self.inner.store))?;
        let snap = self
            .cycle_inputs(false, |_| Default::default())
            .snapshot(now_ms(), &self.inner.job_numbers);
        let dry = gantry_engine::run_cycle(&snap, &mut candidate, None);
        if !dry.faults.is_empty() {
            lock(&self.inner.faults).record(0, &dry.faults, &self.inner.store);
            return Err(PolicyOpError::DryRun(dry.faults));
        }
        let mut pol = lock(&self.inner.policy);
        let version = pol.next_version();
        let active = PipelineVersion {
            version,
            spec,
            resolved,
            activated_ms: now_ms(),
            action: action.into(),
            restores,
            by: Some(by.to_string()),
        };
        self.inner.store.put_pipeline(version, &active)?;
        self.inner.store.set_meta(ACTIVE_KEY, &version)?;
        self.inner.store.flush()?;
        pol.make_live(candidate, active.clone());
        drop(pol);
        let swap_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let _ = self.inner.store.event(
            now_ms(),
            None,
            "policy",
            format!("{action}: version {version} live in {swap_ms:.1} ms"),
        );
        tracing::info!(version, action, swap_ms, "pipeline swapped");
        self.wake();
        Ok(SwapResult { active, swap_ms })
    }
}
