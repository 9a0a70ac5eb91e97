//! The cycle benchmark's diagnostics, for finding where a 0.2 call's time goes: `first-fit`'s
//! `place` alone (`CYCLE_BENCH_STATS=1`) and one `fifo` score call split into the host's
//! encoding, the whole call and the native call (`CYCLE_BENCH_SPLIT=1`).

use super::{churn, ms, snapshot};
use gantry_contract::Job;
use gantry_engine::Snapshot;
use gantry_plugin_runtime::{Limits, PluginInstance, Runtime};
use std::time::{Duration, Instant};

/// Time of `first-fit`'s `place` alone over `n` cycles, quiet or busy, wasm 0.2 and
/// native; and how the 0.2 calls travelled.
pub(crate) fn travel(rt: &Runtime, snap: &Snapshot, n: usize) {
    let limits = Limits {
        deadline_ms: 10_000,
        memory_mib: 1024,
    };
    for busy in [false, true] {
        let mut first_fit = rt
            .load(gantry_components::FIRST_FIT)
            .expect("load")
            .instantiate("{}", limits)
            .expect("instantiate");
        let mut twin = gantry_plugin_first_fit::FirstFit::default();
        let mut snap = snap.clone();
        let mut next_id = 10_000_000;
        let (mut wasm, mut native) = (Duration::ZERO, Duration::ZERO);
        for turn in 0..n {
            if busy {
                churn(&mut snap, turn, &mut next_id);
            }
            let (w, nat) = place_both(&mut first_fit, &mut twin, &snap);
            wasm += w;
            native += nat;
        }
        println!(
            "busy {busy}: place 0.2 {:.2} ms, native {:.2} ms; {:?}",
            ms(wasm) / n as f64,
            ms(native) / n as f64,
            first_fit.mirror_stats()
        );
    }
}

/// Where a busy 1,000-job `score` call of `fifo` 0.2 spends its time: the host's
/// encoding alone, the whole call, and the native call; and the encoding alone of a list
/// with new elements in its middle (CYCLE_BENCH_SPLIT=1).
pub(crate) fn split(rt: &Runtime) {
    let limits = Limits {
        deadline_ms: 10_000,
        memory_mib: 1024,
    };
    if std::env::var("CYCLE_BENCH_SPLIT").as_deref() == Ok("place") {
        return place_only(rt, limits);
    }
    let mut fifo = rt
        .load(gantry_components::FIFO)
        .expect("load")
        .instantiate("{}", limits)
        .expect("instantiate");
    let mut twin = gantry_plugin_fifo::Fifo;
    let mut enc = gantry_contract::delta::Encoder::<Job>::default();
    let snap0 = snapshot(1_000, 100);
    let tr: Vec<u32> = (0..snap0.ctx.strings.len() as u32).collect();
    let previous = vec![0.0; snap0.pending.len()];
    let (mut t_enc, mut t_wasm, mut t_native) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let n = 2000;
    let mut snap = snap0.clone();
    let mut next_id = 10_000_000;
    for turn in 0..n {
        if turn % 200 == 0 {
            snap = snap0.clone();
        }
        churn(&mut snap, turn, &mut next_id);
        let t = Instant::now();
        let (keep, fresh) = enc.encode(&snap.pending, &tr);
        enc.commit(&keep, fresh).expect("commit");
        t_enc += t.elapsed();
        let t = Instant::now();
        let a = gantry_contract::Priority::score(&mut fifo, &snap.ctx, &snap.pending, &previous);
        t_wasm += t.elapsed();
        let t = Instant::now();
        let b = gantry_contract::Priority::score(&mut twin, &snap.ctx, &snap.pending, &previous);
        t_native += t.elapsed();
        assert_eq!(a.ok(), b.ok());
    }
    let per = |d: Duration| ms(d) / n as f64;
    replaced_in_the_middle(&tr);
    // The guest's side of a busy delta, natively: applying it to a copy of the list.
    {
        let mut enc = gantry_contract::delta::Encoder::<Job>::default();
        let mut list = snap0.pending.clone();
        let (keep, fresh) = enc.encode(&list, &tr);
        enc.commit(&keep, fresh).expect("commit");
        let mut s = snap0.clone();
        let mut id = 20_000_000;
        let mut t_apply = Duration::ZERO;
        for turn in 0..n {
            churn(&mut s, turn, &mut id);
            let (keep, fresh) = enc.encode(&s.pending, &tr);
            let t = Instant::now();
            gantry_contract::delta::apply(&mut list, &keep, fresh.clone()).expect("apply");
            t_apply += t.elapsed();
            enc.commit(&keep, fresh).expect("commit");
        }
        println!(
            "busy 1,000 jobs: the guest's apply natively {:.4} ms",
            per(t_apply)
        );
    }
    // The same call with nothing changed, and with one job: the fixed cost of a call.
    for (label, jobs) in [
        ("quiet 1,000", &snap.pending[..]),
        ("quiet 1", &snap.pending[..1]),
    ] {
        let prev = &previous[..jobs.len()];
        let _ = gantry_contract::Priority::score(&mut fifo, &snap.ctx, jobs, prev);
        let t = Instant::now();
        for _ in 0..n {
            let _ = gantry_contract::Priority::score(&mut fifo, &snap.ctx, jobs, prev);
        }
        println!(
            "fifo score, {label}: whole 0.2 call {:.4} ms",
            per(t.elapsed())
        );
    }
    println!(
        "fifo score, busy 1,000: encode+commit {:.4} ms, whole 0.2 call {:.4} ms, native {:.4} ms",
        per(t_enc),
        per(t_wasm),
        per(t_native)
    );
    let mut first_fit = rt
        .load(gantry_components::FIRST_FIT)
        .expect("load")
        .instantiate("{}", limits)
        .expect("instantiate");
    let mut twin = gantry_plugin_first_fit::FirstFit::default();
    let (mut t_wasm, mut t_native) = (Duration::ZERO, Duration::ZERO);
    for turn in 0..n {
        if turn % 200 == 0 {
            snap = snap0.clone();
        }
        churn(&mut snap, turn, &mut next_id);
        let (w, nat) = place_both(&mut first_fit, &mut twin, &snap);
        t_wasm += w;
        t_native += nat;
    }
    println!(
        "first-fit place, busy 1,000: whole 0.2 call {:.4} ms, native {:.4} ms",
        per(t_wasm),
        per(t_native)
    );
}

/// Times one `place` of `wasm` and of its native `twin` on `snap`, which must agree.
fn place_both(
    wasm: &mut PluginInstance,
    twin: &mut gantry_plugin_first_fit::FirstFit,
    snap: &Snapshot,
) -> (Duration, Duration) {
    let (ctx, jobs, nodes, running) = (&snap.ctx, &snap.pending, &snap.nodes, &snap.running);
    let t = Instant::now();
    let a = gantry_contract::Placement::place(wasm, ctx, jobs, nodes, running).ok();
    let w = t.elapsed();
    let t = Instant::now();
    let b = gantry_contract::Placement::place(twin, ctx, jobs, nodes, running).ok();
    let n = t.elapsed();
    assert_eq!(a, b);
    (w, n)
}

/// `CYCLE_BENCH_SPLIT=place`: busy and quiet 1,000-job `place` calls of `first-fit` 0.2
/// alone, for `perf record`, with their medians.
fn place_only(rt: &Runtime, limits: Limits) {
    let mut first_fit = rt
        .load(gantry_components::FIRST_FIT)
        .expect("load")
        .instantiate("{}", limits)
        .expect("instantiate");
    let snap0 = snapshot(1_000, 100);
    let mut snap = snap0.clone();
    let mut next_id = 10_000_000;
    for busy in [false, true] {
        let mut times = Vec::new();
        for turn in 0..5000 {
            if busy {
                if turn % 200 == 0 {
                    snap = snap0.clone();
                }
                churn(&mut snap, turn, &mut next_id);
            }
            let (ctx, jobs, nodes, running) =
                (&snap.ctx, &snap.pending, &snap.nodes, &snap.running);
            let t = Instant::now();
            let plan = gantry_contract::Placement::place(&mut first_fit, ctx, jobs, nodes, running);
            times.push(t.elapsed());
            assert!(plan.is_ok());
        }
        times.sort();
        let label = if busy { "busy" } else { "quiet" };
        println!(
            "first-fit place, {label} 1,000: median 0.2 call {:.4} ms",
            ms(times[times.len() / 2])
        );
    }
}

/// The host's encoding of a numbered list where 1% of the elements are replaced by new
/// ones in place (as in placement's priority-ordered jobs), at 1,000 and 10,000.
fn replaced_in_the_middle(tr: &[u32]) {
    for n in [1_000u64, 10_000] {
        let mut list: Vec<Job> = (0..n)
            .map(|id| Job {
                id: id + 1,
                revision: id + 1,
                ..Job::default()
            })
            .collect();
        let mut enc = gantry_contract::delta::Encoder::<Job>::default();
        let (keep, fresh) = enc.encode(&list, tr);
        enc.commit(&keep, fresh).expect("commit");
        let (mut next, mut total, turns) = (1_000_000, Duration::ZERO, 200);
        for turn in 0..turns {
            for k in 0..n / 100 {
                let at = ((turn * 37 + k * 101) % n) as usize;
                (list[at].id, list[at].revision) = (next, next);
                next += 1;
            }
            let t = Instant::now();
            let (keep, fresh) = enc.encode(&list, tr);
            total += t.elapsed();
            enc.commit(&keep, fresh).expect("commit");
        }
        println!(
            "encode {n} jobs, 1% replaced in the middle: {:.4} ms",
            ms(total) / turns as f64
        );
    }
}
