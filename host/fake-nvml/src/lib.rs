//! A fake NVML: a shared library (`libgantry_fake_nvml.so`) that exports the NVML C
//! functions Gantry calls through `nvml-wrapper` and answers them from a JSON scenario
//! file named by `GANTRY_FAKE_NVML_SCENARIO` (the format: `docs/fake-nvml.md`), read
//! again whenever the file changes. Loaded in place of `libnvidia-ml.so.1`, it lets the
//! real NVML code path of `gantry-node` (inventory, MIG, health, Xid events) run on a
//! machine without a GPU.
//!
//! `unsafe` is this crate's purpose: every export is an `unsafe extern "C"` function
//! that writes through the caller's pointers; each block says why it is sound. No panic
//! crosses the boundary (`ffi::guard`).
//!
//! Owns: the exports and the scenario format. Does not own any of Gantry's decisions
//! about what it reads (`gantry-node`'s inventory).

pub mod scenario;

mod devices;
mod ffi;
mod state;

pub mod ffi_device;
pub mod ffi_events;
pub mod ffi_mig;
pub mod ffi_system;
pub mod ffi_telemetry;

pub use scenario::{SCENARIO_VAR, Scenario, ScenarioError, load, parse};
