//! The WebAssembly components Gantry ships: the built-in policies (embedded in the
//! daemon as its default pipeline) and the hostile fixtures the tests load.
//!
//! Owns nothing but bytes; `build.rs` compiles the plugin crates to `wasm32-wasip2`.
#![deny(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The built-in plugins by name, as the daemon registers them.
pub const BUILTIN: &[(&str, &[u8])] = &[
    ("fifo", FIFO),
    ("first-fit", FIRST_FIT),
    ("priority-preempt", PRIORITY_PREEMPT),
    ("shortest-first", SHORTEST_FIRST),
    ("random", RANDOM),
    ("dot-product", DOT_PRODUCT),
    ("gpu-clustering", GPU_CLUSTERING),
    ("gpu-packing", GPU_PACKING),
    ("best-fit", BEST_FIT),
    ("fgd", FGD),
    ("stranding", STRANDING),
    ("multifactor", MULTIFACTOR),
    ("quota", QUOTA),
    ("reclaim", RECLAIM),
    ("idle-reclaim", IDLE_RECLAIM),
    ("backfill", BACKFILL),
    ("queue-limits", QUEUE_LIMITS),
];
