//! Builds the plugin and fixture crates as `wasm32-wasip2` components with a nested
//! `cargo build` into `target/components` (a separate target dir, so it never waits on
//! the outer build's lock), then exposes their bytes through `include_bytes!`.

use std::path::PathBuf;
use std::process::Command;

/// (constant name, package, artifact stem)
const COMPONENTS: &[(&str, &str, &str)] = &[
    ("FIFO", "gantry-plugin-fifo", "gantry_plugin_fifo"),
    (
        "FIRST_FIT",
        "gantry-plugin-first-fit",
        "gantry_plugin_first_fit",
    ),
    (
        "PRIORITY_PREEMPT",
        "gantry-plugin-priority-preempt",
        "gantry_plugin_priority_preempt",
    ),
    (
        "SHORTEST_FIRST",
        "gantry-plugin-shortest-first",
        "gantry_plugin_shortest_first",
    ),
    ("RANDOM", "gantry-plugin-random", "gantry_plugin_random"),
    (
        "DOT_PRODUCT",
        "gantry-plugin-dot-product",
        "gantry_plugin_dot_product",
    ),
    (
        "GPU_CLUSTERING",
        "gantry-plugin-gpu-clustering",
        "gantry_plugin_gpu_clustering",
    ),
    (
        "GPU_PACKING",
        "gantry-plugin-gpu-packing",
        "gantry_plugin_gpu_packing",
    ),
    (
        "BEST_FIT",
        "gantry-plugin-best-fit",
        "gantry_plugin_best_fit",
    ),
    ("FGD", "gantry-plugin-fgd", "gantry_plugin_fgd"),
    (
        "STRANDING",
        "gantry-plugin-stranding",
        "gantry_plugin_stranding",
    ),
    (
        "MULTIFACTOR",
        "gantry-plugin-multifactor",
        "gantry_plugin_multifactor",
    ),
    ("QUOTA", "gantry-plugin-quota", "gantry_plugin_quota"),
    ("RECLAIM", "gantry-plugin-reclaim", "gantry_plugin_reclaim"),
    (
        "IDLE_RECLAIM",
        "gantry-plugin-idle-reclaim",
        "gantry_plugin_idle_reclaim",
    ),
    (
        "BACKFILL",
        "gantry-plugin-backfill",
        "gantry_plugin_backfill",
    ),
    (
        "QUEUE_LIMITS",
        "gantry-plugin-queue-limits",
        "gantry_plugin_queue_limits",
    ),
    (
        "HOSTILE_LOOP",
        "gantry-fixture-hostile-loop",
        "gantry_fixture_hostile_loop",
    ),
    (
        "HOSTILE_TRAP",
        "gantry-fixture-hostile-trap",
        "gantry_fixture_hostile_trap",
    ),
    (
        "HOSTILE_MEMORY",
        "gantry-fixture-hostile-memory",
        "gantry_fixture_hostile_memory",
    ),
    (
        "HOSTILE_SLEEP",
        "gantry-fixture-hostile-sleep",
        "gantry_fixture_hostile_sleep",
    ),
    (
        "HOSTILE_DOUBLE_BOOK",
        "gantry-fixture-hostile-double-book",
        "gantry_fixture_hostile_double_book",
    ),
    (
        "HOSTILE_HALF_GANG",
        "gantry-fixture-hostile-half-gang",
        "gantry_fixture_hostile_half_gang",
    ),
    (
        "HOSTILE_STALE_VIEW",
        "gantry-fixture-hostile-stale-view",
        "gantry_fixture_hostile_stale_view",
    ),
    (
        "FAULT_INJECTOR",
        "gantry-fixture-fault-injector",
        "gantry_fixture_fault_injector",
    ),
    (
        "WRONG_VERSION",
        "gantry-fixture-wrong-version",
        "gantry_fixture_wrong_version",
    ),
    (
        "FORBIDDEN_FS",
        "gantry-fixture-forbidden-fs",
        "gantry_fixture_forbidden_fs",
    ),
    (
        "EXAMPLE_GPU0_RESERVE",
        "gantry-example-gpu0-reserve",
        "gantry_example_gpu0_reserve",
    ),
];

/// Built a second time exporting contract 0.1.0 (the SDK's feature `contract-0-1`), as
/// `NAME_V01`: the cycle benchmark reports 0.1 beside 0.2, and tests keep a Rust 0.1
/// plugin loading.
const COMPONENTS_V01: &[(&str, &str, &str)] = &[
    ("FIFO_V01", "gantry-plugin-fifo", "gantry_plugin_fifo"),
    (
        "FIRST_FIT_V01",
        "gantry-plugin-first-fit",
        "gantry_plugin_first_fit",
    ),
    (
        "PRIORITY_PREEMPT_V01",
        "gantry-plugin-priority-preempt",
        "gantry_plugin_priority_preempt",
    ),
];

/// Built a third time exporting contract 0.2.0 (the SDK's feature `contract-0-2`), as
/// `NAME_V02`: tests keep a 0.2 placement plugin loading and placing MIG slices without
/// their parents.
const COMPONENTS_V02: &[(&str, &str, &str)] = &[(
    "FIRST_FIT_V02",
    "gantry-plugin-first-fit",
    "gantry_plugin_first_fit",
)];

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let root = manifest.join("../..");
    for dir in [
        "wit",
        "sdk",
        "plugins/fifo",
        "plugins/first-fit",
        "plugins/priority-preempt",
        "plugins/shortest-first",
        "plugins/sharing-core",
        "plugins/random",
        "plugins/dot-product",
        "plugins/gpu-clustering",
        "plugins/gpu-packing",
        "plugins/best-fit",
        "plugins/fgd",
        "plugins/stranding",
        "plugins/multifactor",
        "plugins/quota",
        "plugins/reclaim",
        "plugins/idle-reclaim",
        "plugins/quota-core",
        "plugins/backfill",
        "plugins/queue-limits",
        "tests/fixtures",
        "tests/fixtures/fault-injector",
        "tests/fixtures/hostile-stale-view",
        "examples/plugins/rust-gpu0-reserve",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let mut code = String::new();
    build(
        &root,
        "target/components",
        COMPONENTS,
        &[],
        &out,
        "",
        &mut code,
    );
    // The same target directory as above: the 0.1 build differs only in the SDK's
    // feature, so it reuses every dependency already built (22 s of a cold build
    // saved on two cores); each artifact is copied out before the next build
    // replaces it (docs/benchmarks/build-time.md).
    build(
        &root,
        "target/components",
        COMPONENTS_V01,
        &["--features", "gantry-sdk/contract-0-1"],
        &out,
        "-v01",
        &mut code,
    );
    build(
        &root,
        "target/components",
        COMPONENTS_V02,
        &["--features", "gantry-sdk/contract-0-2"],
        &out,
        "-v02",
        &mut code,
    );
    if let Err(e) = std::fs::write(out.join("components.rs"), code) {
        fail(&format!("writing components.rs: {e}"));
    }
}

/// Builds `components` into `target` (under the repository) and appends their constants,
/// copying each artifact into `out` with `suffix` after its stem.
fn build(
    root: &std::path::Path,
    target: &str,
    components: &[(&str, &str, &str)],
    extra: &[&str],
    out: &std::path::Path,
    suffix: &str,
    code: &mut String,
) {
    let target_dir = root.join(target);
    println!("cargo:rerun-if-env-changed=GANTRY_COMPONENTS_TOOLCHAIN");
    // Normally the outer build's cargo and rustc. GANTRY_COMPONENTS_TOOLCHAIN names a
    // rustup toolchain to use instead (scripts/fuzz: the outer build is nightly, whose
    // wasm target may be missing; the components come from the pinned toolchain).
    let mut cmd = match std::env::var("GANTRY_COMPONENTS_TOOLCHAIN") {
        Ok(toolchain) if !toolchain.is_empty() => {
            let mut c = Command::new("rustup");
            c.args(["run", &toolchain, "cargo"]);
            for var in ["RUSTC", "RUSTDOC", "RUSTUP_TOOLCHAIN", "CARGO"] {
                c.env_remove(var);
            }
            c
        }
        _ => Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())),
    };
    cmd.current_dir(root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir)
        .args(extra);
    for (_, package, _) in components {
        cmd.args(["-p", package]);
    }
    // Plugins are small and run every cycle: one codegen unit and link-time optimisation
    // let the contract, SDK and policy crates inline into each other in the component.
    cmd.env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    // The outer build's settings must not leak into the wasm build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => fail(&format!(
            "building the plugin components failed ({s}). Is the target installed? Run: rustup target add {TARGET}"
        )),
        Err(e) => fail(&format!(
            "could not run cargo to build the plugin components: {e}"
        )),
    }
    for (name, package, stem) in components {
        let artifact = target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{stem}.wasm"));
        let file = format!("{stem}{suffix}.wasm");
        if let Err(e) = std::fs::copy(&artifact, out.join(&file)) {
            fail(&format!(
                "component {} missing after build: {e}",
                artifact.display()
            ));
        }
        code.push_str(&format!(
            "/// The `{package}` component.\npub const {name}: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\"));\n"
        ));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
