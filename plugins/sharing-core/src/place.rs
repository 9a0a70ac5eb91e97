//! The placement loop shared by the six plugins.
//!
//! Owns [`SharingPlacer`]: configuration, and `place`: jobs in the host's order, each
//! task of a job placed like a pod with the policy on the state updated by everything
//! booked before it; a job whose task finds no feasible node releases what it booked
//! and gets a pending reason (gang: all or nothing). Non-strict by default (later jobs
//! still run); `strict` stops at the first job that does not fit and sets
//! `plan.stopped_at`. Node choice: the feasible node with the highest score, ties to
//! the smallest rank, name, id (`docs/fgd-replay/method.md` §5); Random draws uniformly. Does not own
//! the scores (`policies`, `fgd`), GPU choice (`assign`) or reasons (`explain`).

use crate::assign::{ShareRule, assign};
use crate::config::{Settings, parse};
use crate::explain::explain;
use crate::fgd::FgdScorer;
use crate::fgd::target::resolve;
use crate::node_view::{Booking, ClusterView};
use crate::policies::{Policy, random};
use crate::rank::{Rng, tie_order};
use crate::shape::{PodKind, PodShape};
use crate::stranding::demand_target;
use gantry_sdk::{
    Cycle, GpuShare, Job, Metadata, Node, Pending, Plan, RunningJob, Stage, Start, TaskAllocation,
};
use std::cmp::Ordering;

/// One policy's plugin state: settings, the view of the cluster, FGD's scorer.
#[derive(Debug)]
pub struct SharingPlacer {
    policy: Policy,
    settings: Settings,
    view: ClusterView,
    fgd: FgdScorer,
}

impl SharingPlacer {
    /// A placer for `policy` with the default config.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            settings: Settings::default(),
            view: ClusterView::default(),
            fgd: FgdScorer::default(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The plugin's metadata (name, the given version, placement stage, config hint).
    pub fn metadata(&self, version: &str) -> Metadata {
        gantry_sdk::metadata(
            self.policy.name(),
            version,
            &[Stage::Placement],
            &self.policy.config_hint(),
        )
    }

    /// Applies a JSON config; on error the previous config stays.
    pub fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let settings = parse(self.policy, config_json)?;
        self.fgd.set_target(settings.target.clone());
        if self.policy == Policy::Stranding {
            self.fgd.set_measure(settings.stranding.measure);
        }
        self.settings = settings;
        Ok(())
    }

    /// Places `jobs` (in order) on `nodes`.
    pub fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, String> {
        let seed = self.settings.seed.unwrap_or(ctx.seed);
        gantry_sdk::changes::with_changes(|hint| {
            self.view
                .update(ctx, nodes, seed, hint.map(|h| h.nodes.as_slice()));
            if self.policy == Policy::Fgd {
                let kept = hint.map(|h| h.running.as_slice());
                self.fgd.prepare(ctx, jobs, running, kept);
            }
        });
        match self.policy {
            Policy::GpuClustering => self.view.load_tags(running),
            Policy::Stranding => {
                let target = demand_target(ctx, jobs, running, &self.settings.stranding);
                self.fgd.use_shapes(resolve(ctx, &target));
            }
            _ => {}
        }
        let mut plan = Plan::default();
        for job in jobs {
            match self.place_job(ctx, seed, job) {
                Some(tasks) => plan.starts.push(Start { job: job.id, tasks }),
                None => {
                    plan.pending.push(Pending {
                        job: job.id,
                        reason: explain(ctx, &self.view, job),
                    });
                    if self.settings.strict {
                        plan.stopped_at = Some(job.id);
                        break;
                    }
                }
            }
        }
        Ok(plan)
    }

    /// Books every task of `job` or nothing.
    fn place_job(&mut self, ctx: &Cycle, seed: u64, job: &Job) -> Option<Vec<TaskAllocation>> {
        let mut booked: Vec<Booking> = Vec::with_capacity(job.task_count());
        let mut out = Vec::with_capacity(job.task_count());
        for (t, group) in job.expanded_tasks().enumerate() {
            let pod = PodShape::of(group);
            let Some((node, gpus)) = self.choose(ctx, &pod, Rng::for_task(seed, job.id, t as u64))
            else {
                for b in booked.iter().rev() {
                    self.view.unbook(b);
                }
                return None;
            };
            let slice = self.view.gpus(node);
            let shares = gpus
                .iter()
                .map(|&p| GpuShare {
                    index: slice[p].index,
                    milli: pod.milli,
                })
                .collect();
            out.push(TaskAllocation {
                node: self.view.nodes()[node].id,
                gpus: shares,
                cpu_milli: group.cpu_milli,
                memory_mib: group.memory_mib,
            });
            booked.push(self.view.book(node, &pod, &gpus));
        }
        Some(out)
    }

    /// The node and GPU positions for one pod, or `None` when no node is feasible.
    fn choose(&mut self, ctx: &Cycle, pod: &PodShape, mut rng: Rng) -> Option<(usize, Vec<usize>)> {
        if self.policy == Policy::Random {
            let node = random::pick_node(&self.view, pod, &mut rng)?;
            let gpus = assign(self.view.gpus(node), pod, ShareRule::Random(&mut rng))?;
            return Some((node, gpus));
        }
        let (node, fgd_gpu) = self.argmax(ctx, pod)?;
        let rule = if matches!(self.policy, Policy::Fgd | Policy::Stranding) {
            ShareRule::Given(fgd_gpu)
        } else {
            ShareRule::BestFit
        };
        let gpus = assign(self.view.gpus(node), pod, rule)?;
        Some((node, gpus))
    }

    /// The feasible node with the highest score (ties: smallest rank, name, id), and
    /// FGD's GPU position on it.
    fn argmax(&mut self, ctx: &Cycle, pod: &PodShape) -> Option<(usize, usize)> {
        let simple = self.policy.simple_score();
        let packed = self.policy == Policy::Stranding
            && self.settings.stranding.cpu_only_packed
            && pod.kind == PodKind::CpuOnly;
        let view = &self.view;
        let mut best: Option<(i64, usize, usize)> = None;
        for i in 0..view.nodes().len() {
            if !view.feasible(i, pod) {
                continue;
            }
            let (score, gpu) = match simple {
                Some(f) => (f(&view.nodes()[i], view.gpus(i), pod), 0),
                None => self.fgd.score(view, i, pod),
            };
            let better = match best {
                None => true,
                Some((b, j, _)) => score > b || (score == b && tie_wins(ctx, view, packed, i, j)),
            };
            if better {
                best = Some((score, i, gpu));
            }
        }
        best.map(|(_, i, gpu)| (i, gpu))
    }
}

/// Whether node `a` wins a score tie against node `b`: with `packed`, the node with less
/// free GPU first (a CPU-only task then strands the fewest GPUs), else (and on equal free
/// GPU) [`tie_before`].
fn tie_wins(ctx: &Cycle, view: &ClusterView, packed: bool, a: usize, b: usize) -> bool {
    if packed {
        let free = |i: usize| -> u64 { view.gpus(i).iter().map(|g| u64::from(g.free)).sum() };
        let (fa, fb) = (free(a), free(b));
        if fa != fb {
            return fa < fb;
        }
    }
    tie_before(ctx, view, a, b)
}

/// Whether node `a` wins a score tie against node `b`.
fn tie_before(ctx: &Cycle, view: &ClusterView, a: usize, b: usize) -> bool {
    let (na, nb) = (&view.nodes()[a], &view.nodes()[b]);
    if na.rank != nb.rank {
        return na.rank < nb.rank;
    }
    tie_order(
        (na.rank, ctx.text(na.name), na.id),
        (nb.rank, ctx.text(nb.name), nb.id),
    ) == Ordering::Less
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::node_view::tests::{ctx, node};
    use gantry_sdk::{NodeState, ReasonCode, TaskGroup};

    fn group(count: u32, gpus: u32, gpu_milli: u32, cpu: u32) -> TaskGroup {
        TaskGroup {
            count,
            gpus,
            gpu_milli,
            cpu_milli: cpu,
            memory_mib: 1024,
            gpu_model_mask: 0,
        }
    }

    fn job(id: u64, tasks: Vec<TaskGroup>) -> Job {
        Job {
            id,
            tasks,
            ..Default::default()
        }
    }

    fn placer(policy: Policy, config: &str) -> SharingPlacer {
        let mut p = SharingPlacer::new(policy);
        p.configure(config).unwrap();
        p
    }

    /// Node ids ordered by rank under `seed` (the tie-break order).
    fn by_rank(seed: u64, ids: &[u32]) -> Vec<u32> {
        let c = ctx();
        let mut v: Vec<u32> = ids.to_vec();
        v.sort_by_key(|&i| crate::rank::rank(seed, c.text(2 + i)));
        v
    }

    #[test]
    fn ties_go_to_the_smallest_rank_and_pack() {
        let nodes: Vec<Node> = (0..5).map(|i| node(i, 0, &[1000; 2], 8000)).collect();
        let jobs: Vec<Job> = (0..3).map(|i| job(i, vec![group(1, 0, 0, 3000)])).collect();
        for policy in [Policy::GpuPacking, Policy::GpuClustering, Policy::Fgd] {
            let plan = placer(policy, r#"{"seed": 9}"#)
                .place(&ctx(), &jobs, &nodes, &[])
                .unwrap();
            let first = by_rank(9, &[0, 1, 2, 3, 4]);
            let got: Vec<u32> = plan.starts.iter().map(|s| s.tasks[0].node).collect();
            // CPU-only pods tie everywhere: the two first go to the best-ranked node,
            // the third (no CPU left there) to the next one.
            assert_eq!(got, vec![first[0], first[0], first[1]], "{policy:?}");
        }
    }

    #[test]
    fn sharing_gpu_choice_per_policy() {
        // One node, GPUs [1000, 600, 200, 0]; a 400-milli pod.
        let nodes = [node(0, 0, &[1000, 600, 200, 0], 64_000)];
        let jobs = [job(1, vec![group(1, 0, 400, 1000)])];
        let pick = |policy: Policy, config: &str| {
            let plan = placer(policy, config)
                .place(&ctx(), &jobs, &nodes, &[])
                .unwrap();
            plan.starts[0].tasks[0].gpus.clone()
        };
        for p in [
            Policy::DotProduct,
            Policy::GpuClustering,
            Policy::GpuPacking,
            Policy::BestFit,
        ] {
            assert_eq!(
                pick(p, "{}"),
                vec![GpuShare {
                    index: 1,
                    milli: 400
                }],
                "{p:?}"
            );
        }
        // FGD with the target of the fgd module's tests prefers GPU 0 (score 55 vs 53).
        let fgd = r#"{"target": [
            {"cpu_milli": 1000, "gpu_milli": 0, "gpus": 0, "count": 2},
            {"cpu_milli": 2000, "gpu_milli": 500, "gpus": 1, "count": 3},
            {"cpu_milli": 4000, "gpu_milli": 1000, "gpus": 2, "models": ["A"], "count": 1},
            {"cpu_milli": 1000, "gpu_milli": 300, "gpus": 1, "models": ["B"], "count": 1}]}"#;
        let nodes_fgd = [node(0, 0, &[1000, 600, 200, 0], 3000)];
        let plan = placer(Policy::Fgd, fgd)
            .place(&ctx(), &jobs, &nodes_fgd, &[])
            .unwrap();
        assert_eq!(plan.starts[0].tasks[0].gpus[0].index, 0);
        // Random: only GPUs 0 and 1 fit; both get drawn over many jobs.
        let many: Vec<Job> = (0..40).map(|i| job(i, vec![group(1, 0, 400, 1)])).collect();
        let mut seen = [false; 4];
        for j in &many {
            let plan = placer(Policy::Random, "{}")
                .place(&ctx(), std::slice::from_ref(j), &nodes, &[])
                .unwrap();
            seen[plan.starts[0].tasks[0].gpus[0].index as usize] = true;
        }
        assert_eq!(seen, [true, true, false, false]);
    }

    #[test]
    fn whole_gpu_pods_take_the_lowest_free_gpus() {
        let nodes = [node(0, 0, &[500, 1000, 1000, 1000], 64_000)];
        let jobs = [job(1, vec![group(1, 2, 0, 1000)])];
        for p in Policy::ALL {
            let plan = placer(p, "{}").place(&ctx(), &jobs, &nodes, &[]).unwrap();
            let idx: Vec<u32> = plan.starts[0].tasks[0]
                .gpus
                .iter()
                .map(|g| g.index)
                .collect();
            assert_eq!(idx, vec![1, 2], "{p:?}");
        }
    }

    #[test]
    fn gangs_are_all_or_nothing_and_strict_stops() {
        let nodes = [
            node(0, 0, &[1000, 1000], 64_000),
            node(1, 0, &[1000], 64_000),
        ];
        let jobs = [
            job(1, vec![group(2, 2, 0, 1000)]), // needs 4 GPUs as 2×2: only one node has 2
            job(2, vec![group(3, 1, 0, 1000)]), // 3 single GPUs: fits across both nodes
            job(3, vec![group(1, 1, 0, 1000)]), // nothing left
        ];
        for p in Policy::ALL {
            let plan = placer(p, "{}").place(&ctx(), &jobs, &nodes, &[]).unwrap();
            let started: Vec<u64> = plan.starts.iter().map(|s| s.job).collect();
            assert_eq!(started, vec![2], "{p:?}");
            assert_eq!(plan.starts[0].tasks.len(), 3);
            let pending: Vec<u64> = plan.pending.iter().map(|x| x.job).collect();
            assert_eq!(pending, vec![1, 3]);
            assert_eq!(plan.pending[0].reason.code, ReasonCode::InsufficientGpus);
            assert_eq!(plan.stopped_at, None);

            let plan = placer(p, r#"{"strict": true}"#)
                .place(&ctx(), &jobs, &nodes, &[])
                .unwrap();
            assert!(plan.starts.is_empty());
            assert_eq!(plan.stopped_at, Some(1));
            assert_eq!(plan.pending.len(), 1);
        }
    }

    #[test]
    fn clustering_reads_tags_from_running_jobs_and_earlier_tasks() {
        let nodes = [
            node(0, 0, &[1000, 1000, 1000, 1000], 64_000),
            node(1, 0, &[1000, 1000, 1000, 500], 64_000),
        ];
        // Node 1 runs a 2-GPU job (tag "2-gpu") and node 0 nothing: a share pod goes to
        // the untagged node 0 (b + 25 beats b + 0).
        let running = [RunningJob {
            job: job(99, vec![group(1, 2, 0, 1)]),
            tasks: vec![TaskAllocation {
                node: 1,
                gpus: vec![],
                cpu_milli: 1,
                memory_mib: 1,
            }],
            start_ms: 0,
            expected_end_ms: None,
            score: 0.0,
            revision: 0,
        }];
        let jobs = [
            job(1, vec![group(1, 0, 300, 1)]),
            job(2, vec![group(1, 2, 0, 1)]),
        ];
        let plan = placer(Policy::GpuClustering, "{}")
            .place(&ctx(), &jobs, &nodes, &running)
            .unwrap();
        assert_eq!(plan.starts[0].tasks[0].node, 0);
        // Job 2 (2 GPUs) then prefers node 1 (only "2-gpu") over node 0 (now "share").
        assert_eq!(plan.starts[1].tasks[0].node, 1);
    }

    #[test]
    fn unusable_nodes_and_gpus_and_models() {
        let mut nodes = vec![
            node(0, 0, &[1000], 64_000),
            node(1, 1, &[1000, 1000], 64_000),
        ];
        nodes[0].state = NodeState::Down;
        nodes[1].gpus[0].healthy = false;
        let mut only_a = group(1, 0, 500, 1);
        only_a.gpu_model_mask = 0b01;
        let jobs = [job(1, vec![group(1, 2, 0, 1)]), job(2, vec![only_a])];
        for p in Policy::ALL {
            let plan = placer(p, "{}").place(&ctx(), &jobs, &nodes, &[]).unwrap();
            assert!(plan.starts.is_empty(), "{p:?}");
            assert_eq!(plan.pending[1].reason.code, ReasonCode::GpuModelUnavailable);
        }
    }

    #[test]
    fn same_input_same_plan_and_seed_from_the_cycle() {
        let nodes: Vec<Node> = (0..6)
            .map(|i| node(i, i % 2, &[1000, 700, 300, 1000], 16_000 + 1000 * i))
            .collect();
        let jobs: Vec<Job> = (0..12)
            .map(|i| {
                job(
                    i,
                    vec![group(1 + (i % 2) as u32, (i % 3) as u32, 250, 2000)],
                )
            })
            .collect();
        for p in Policy::ALL {
            let a = placer(p, "{}").place(&ctx(), &jobs, &nodes, &[]).unwrap();
            let mut reused = placer(p, "{}");
            reused.place(&ctx(), &jobs, &nodes, &[]).unwrap();
            let b = reused.place(&ctx(), &jobs, &nodes, &[]).unwrap();
            assert_eq!(a, b, "{p:?}");
            let c = placer(p, r#"{"seed": 42}"#)
                .place(&ctx(), &jobs, &nodes, &[])
                .unwrap();
            assert_eq!(a, c, "ctx.seed is 42: {p:?}");
        }
    }

    #[test]
    fn cpu_only_tasks_go_where_the_gpus_are_already_taken() {
        // Three nodes with plenty of CPU: all GPUs free, half free, none free. A CPU-only
        // task ties on score everywhere and goes to the node without free GPU; with rank
        // ties (FGD's rule) it goes by rank instead.
        let nodes = [
            node(0, 0, &[1000; 4], 64_000),
            node(1, 0, &[1000, 1000, 0, 0], 64_000),
            node(2, 0, &[0; 4], 64_000),
        ];
        let jobs = [job(1, vec![group(1, 0, 0, 4000)])];
        let mut p = SharingPlacer::new(Policy::Stranding);
        p.configure(r#"{"seed": 1}"#).unwrap();
        let plan = p.place(&ctx(), &jobs, &nodes, &[]).unwrap();
        assert_eq!(plan.starts[0].tasks[0].node, 2);
        let by_rank: Vec<u32> = (0..20)
            .map(|seed| {
                let mut p = SharingPlacer::new(Policy::Stranding);
                p.configure(&format!(r#"{{"seed": {seed}, "cpu_only_ties": "rank"}}"#))
                    .unwrap();
                p.place(&ctx(), &jobs, &nodes, &[]).unwrap().starts[0].tasks[0].node
            })
            .collect();
        assert!(by_rank.iter().any(|&n| n != 2), "{by_rank:?}");
    }
}
