//! Benchmark: the same priority logic (fifo) as a Rust, a Python (componentize-py) and
//! a JavaScript (componentize-qjs) component, each of contract 0.1 (every job in every
//! call) and 0.2 (only what changed: the same jobs again are sent as indices): size,
//! compile time (cache miss), load from the compiled cache (hit), instantiation, time per
//! call at 10, 1,000 and 10,000 jobs, and guest memory.
//!
//! `scripts/build-plugin-examples && cargo bench -p gantry-plugin-runtime --bench languages`

use gantry_contract::{Cycle, Job, JobKind, Label, Priority, TaskGroup};
use gantry_engine::Interner;
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn jobs(n: usize, strings: &mut Interner) -> Vec<Job> {
    let key = strings.intern("project");
    (0..n as u64)
        .map(|i| Job {
            id: i + 1,
            name: strings.intern(&format!("job-{}", i % 50)),
            user: strings.intern(&format!("user{}", i % 40)),
            account: strings.intern(&format!("team{}", i % 8)),
            queue: strings.intern("default"),
            tier: 0,
            submit_ms: 1_700_000_000_000 + i * 1000,
            time_limit_s: 3600,
            kind: JobKind::Batch,
            preemptible: false,
            labels: vec![Label {
                key,
                value: strings.intern(&format!("p{}", i % 20)),
            }],
            tasks: vec![TaskGroup {
                count: 1,
                gpus: 1 + (i % 4) as u32,
                cpu_milli: 1000,
                memory_mib: 1024,
                ..Default::default()
            }],
            revision: 0,
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/plugin-examples");
    let read = |name: &str| std::fs::read(root.join(name)).ok();
    let guests: Vec<(&str, Option<Vec<u8>>)> = vec![
        ("Rust 0.1", Some(gantry_components::FIFO_V01.to_vec())),
        ("Rust 0.2", Some(gantry_components::FIFO.to_vec())),
        ("Python 0.1", read("bench-python-fifo.wasm")),
        ("Python 0.2", read("bench-python-fifo-v02.wasm")),
        ("JavaScript 0.1", read("bench-js-fifo.wasm")),
        ("JavaScript 0.2", read("bench-js-fifo-v02.wasm")),
    ];
    let limits = Limits {
        deadline_ms: 60_000,
        memory_mib: 1024,
    };
    println!("fifo priority as a component, per language (medians; 2-core machine)");
    println!(
        "{:<22} {:>9} {:>11} {:>10} {:>12} {:>10} {:>11} {:>12} {:>11}",
        "language",
        "size MiB",
        "compile ms",
        "cache ms",
        "instance ms",
        "10 jobs",
        "1,000 jobs",
        "10,000 jobs",
        "memory MiB"
    );
    for (lang, bytes) in guests {
        let Some(bytes) = bytes else {
            println!("{lang:<22} not built: run scripts/build-plugin-examples");
            continue;
        };
        let cache = tempfile::tempdir().expect("tempdir");
        let opts = RuntimeOptions {
            cache_dir: Some(cache.path().to_path_buf()),
        };
        let t = Instant::now();
        Runtime::new(opts.clone())
            .expect("runtime")
            .load(&bytes)
            .expect("load");
        let compile = t.elapsed();
        let rt = Runtime::new(opts).expect("runtime");
        let t = Instant::now();
        let plugin = rt.load(&bytes).expect("load from cache");
        let hit = t.elapsed();
        let inst_times: Vec<Duration> = (0..10)
            .map(|_| {
                let t = Instant::now();
                drop(plugin.instantiate("{}", limits).expect("instantiate"));
                t.elapsed()
            })
            .collect();
        let mut inst = plugin.instantiate("{}", limits).expect("instantiate");
        let mut per_call = Vec::new();
        for n in [10usize, 1_000, 10_000] {
            let mut strings = Interner::new();
            let list = jobs(n, &mut strings);
            let ctx = Cycle {
                id: 1,
                now_ms: 1_700_000_100_000,
                strings: strings.into_strings(),
                ..Default::default()
            };
            let prev = vec![0.0; n];
            inst.score(&ctx, &list, &prev).expect("warm-up");
            let rounds = if n >= 10_000 { 7 } else { 25 };
            let v: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    inst.score(&ctx, &list, &prev).expect("score");
                    t.elapsed()
                })
                .collect();
            per_call.push(median(v));
        }
        println!(
            "{lang:<22} {:>9.2} {:>11.0} {:>10.1} {:>12.2} {:>7.3} ms {:>8.2} ms {:>9.2} ms {:>11.1}",
            bytes.len() as f64 / (1 << 20) as f64,
            ms(compile),
            ms(hit),
            ms(median(inst_times)),
            ms(per_call[0]),
            ms(per_call[1]),
            ms(per_call[2]),
            inst.memory_used_bytes() as f64 / (1 << 20) as f64
        );
    }
}
