//! The FGD paper's workload construction (`docs/fgd-replay/method.md` §2): the pod
//! list sorted by name and shuffled per seed, then tuned to a share of the GPU
//! capacity (130 % in the paper) by appending copies drawn from the original list or
//! by removing random pods.
//!
//! Owns: the per-seed pod sequence. Does not own replaying it (`gantry_engine::sim::fill`)
//! or the node tie-break ranks (the placement plugins derive them from the seed).

use super::openb::Pod;
use super::rng::Rng;
use gantry_engine::sim::SimJob;

/// What the construction needs to know about an item of the workload.
pub trait Offer: Clone {
    /// Name (the order before shuffling).
    fn name(&self) -> &str;
    /// Total GPU request, milli-GPU.
    fn gpu_request(&self) -> u64;
    /// Largest per-GPU share m (the tune-up stop test), milli-GPU.
    fn per_gpu_milli(&self) -> u64;
}

impl Offer for Pod {
    fn name(&self) -> &str {
        &self.name
    }
    fn gpu_request(&self) -> u64 {
        Pod::gpu_request(self)
    }
    fn per_gpu_milli(&self) -> u64 {
        u64::from(self.gpu_milli)
    }
}

impl Offer for SimJob {
    fn name(&self) -> &str {
        &self.name
    }
    fn gpu_request(&self) -> u64 {
        self.gpu_milli_total()
    }
    fn per_gpu_milli(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| t.gpu_milli_per_task().min(1000))
            .max()
            .unwrap_or(0)
    }
}

/// The sequence offered for `seed`, tuned to `tune` × `capacity_milli` of requested
/// milli-GPU.
pub fn sequence<T: Offer>(pods: &[T], capacity_milli: u64, seed: u64, tune: f64) -> Vec<T> {
    let mut sorted: Vec<T> = pods.to_vec();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    let mut rng = Rng::new(seed);
    let mut seq = sorted.clone();
    rng.shuffle(&mut seq);
    let target = (tune * capacity_milli as f64).round() as u64;
    let mut demand: u64 = seq.iter().map(Offer::gpu_request).sum();
    if demand < target && !sorted.is_empty() {
        loop {
            let draw = &sorted[rng.below(sorted.len())];
            // The stop test uses the per-GPU share m, not n·m (`docs/fgd-replay/method.md` §2, pitfall 6).
            if demand + draw.per_gpu_milli() > target {
                break;
            }
            demand += draw.gpu_request();
            seq.push(draw.clone());
        }
    } else {
        while demand > target && !seq.is_empty() {
            let removed = seq.remove(rng.below(seq.len()));
            demand -= removed.gpu_request();
        }
    }
    seq
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, gpus: u32, milli: u32) -> Pod {
        Pod {
            name: name.into(),
            cpu_milli: 1000,
            memory_mib: 1024,
            gpus,
            gpu_milli: milli,
            models: vec![],
            creation_s: 0,
            run_s: 0,
            qos: String::new(),
        }
    }

    #[test]
    fn tune_up_appends_copies_after_the_originals_and_stays_under_the_target() {
        let pods: Vec<Pod> = (0..50).map(|i| pod(&format!("p{i:03}"), 1, 500)).collect();
        // 25 GPUs requested on 20 GPUs of capacity: 1.3 × 20 000 = 26 000 milli.
        let seq = sequence(&pods, 20_000, 42, 1.3);
        assert_eq!(seq.len(), 52);
        let total: u64 = seq.iter().map(Pod::gpu_request).sum();
        assert_eq!(total, 26_000);
        let mut first: Vec<&str> = seq[..50].iter().map(|p| p.name.as_str()).collect();
        first.sort_unstable();
        let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
        assert_eq!(first, names.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn tune_down_removes_random_pods_until_under_the_target() {
        let pods: Vec<Pod> = (0..50).map(|i| pod(&format!("p{i:03}"), 2, 1000)).collect();
        let seq = sequence(&pods, 50_000, 1, 1.3);
        let total: u64 = seq.iter().map(Pod::gpu_request).sum();
        assert!(total <= 65_000 && total > 63_000, "{total}");
        assert_eq!(seq.len(), 32);
    }

    #[test]
    fn same_seed_same_sequence_other_seed_other_order() {
        let pods: Vec<Pod> = (0..100).map(|i| pod(&format!("p{i:03}"), 1, 300)).collect();
        let names = |s: &[Pod]| s.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        let a = sequence(&pods, 100_000, 42, 1.3);
        assert_eq!(names(&a), names(&sequence(&pods, 100_000, 42, 1.3)));
        assert_ne!(names(&a), names(&sequence(&pods, 100_000, 43, 1.3)));
    }
}
