//! One job's multifactor score: the weighted sum of its factors (age, fair-share, job
//! size, queue, QoS), minus its `nice`, and the note that explains it to the user
//! ("priority 3509.9 = fair-share 0.25×10000 [account vision used 40.0 GPU-h = 100%
//! of usage, share 50%] + age 0.01×1000 [1h40m of 7d] + size 1.00×1000 [4 of 4 GPUs]").
//!
//! Owns: weighting and the note. Does not own the factors themselves (`factors`,
//! `fairshare`) or the configuration (`config`).

use crate::config::Config;
use crate::factors::{self, Table};
use crate::fairshare::FairShare;
use gantry_sdk::{Cycle, Job, Scored};

/// The configuration with its tables normalised once.
#[derive(Debug, Clone, Default)]
pub struct Scorer {
    /// The configuration.
    pub config: Config,
    queues: Table,
    qos: Table,
}

/// One weighted term of the note.
struct Term {
    name: &'static str,
    factor: f64,
    weight: f64,
    detail: String,
}

impl Scorer {
    /// Normalises the queue and QoS tables of `config`.
    pub fn new(config: Config) -> Self {
        Self {
            queues: Table::new(&config.queues),
            qos: Table::new(&config.qos),
            config,
        }
    }

    /// Scores every job of a cycle, in order.
    pub fn score_all(&self, ctx: &Cycle, jobs: &[Job]) -> Vec<Scored> {
        let fs = FairShare::new(&self.config, ctx);
        jobs.iter().map(|j| self.score(ctx, &fs, j)).collect()
    }

    /// Scores one job.
    pub fn score(&self, ctx: &Cycle, fs: &FairShare<'_>, job: &Job) -> Scored {
        let c = &self.config;
        let w = &c.weights;
        let share = fs.of(ctx.text(job.account), ctx.text(job.user));
        let waited_s = ctx.now_ms.saturating_sub(job.submit_ms) / 1000;
        let demand = job.gpu_milli_total();
        let total = ctx.totals.gpu_milli_total;
        let queue = ctx.text(job.queue);
        let (queue_factor, queue_detail) = match self.queues.get(queue) {
            Some(f) => (f, format!("queue {queue}")),
            None => (0.0, format!("queue {queue} not configured")),
        };
        let (qos_factor, qos_detail) = match factors::label(ctx, job, factors::QOS_LABEL) {
            None => (0.0, "no qos label".to_string()),
            Some(q) => match self.qos.get(q) {
                Some(f) => (f, format!("qos {q}")),
                None => (0.0, format!("qos {q} not configured")),
            },
        };
        let terms = [
            Term {
                name: "fair-share",
                factor: share.factor,
                weight: w.fairshare,
                detail: share.why,
            },
            Term {
                name: "age",
                factor: factors::age(ctx.now_ms, job.submit_ms, c.max_age_s),
                weight: w.age,
                detail: format!(
                    "waited {} of {}",
                    factors::duration(waited_s),
                    factors::duration(c.max_age_s)
                ),
            },
            Term {
                name: "size",
                factor: factors::job_size(demand, total, c.favor_small),
                weight: w.jobsize,
                detail: format!(
                    "{} of {} GPUs{}",
                    factors::gpus(demand),
                    factors::gpus(total),
                    if c.favor_small {
                        ", favouring small"
                    } else {
                        ""
                    }
                ),
            },
            Term {
                name: "queue",
                factor: queue_factor,
                weight: w.queue,
                detail: queue_detail,
            },
            Term {
                name: "qos",
                factor: qos_factor,
                weight: w.qos,
                detail: qos_detail,
            },
        ];
        let (nice, nice_note) = match factors::nice(ctx, job) {
            Ok(n) => (n, None),
            Err(text) => (
                0,
                Some(format!("nice label {text:?} is not an integer, ignored")),
            ),
        };
        let score = terms.iter().map(|t| t.factor * t.weight).sum::<f64>() - nice as f64;
        Scored {
            score,
            tier: None,
            note: Some(note(score, &terms, nice, nice_note)),
        }
    }
}

fn note(score: f64, terms: &[Term], nice: i64, nice_note: Option<String>) -> String {
    let mut parts: Vec<String> = terms
        .iter()
        .filter(|t| t.weight > 0.0)
        .map(|t| {
            format!(
                "{} {:.2}×{} [{}]",
                t.name,
                t.factor,
                weight_text(t.weight),
                t.detail
            )
        })
        .collect();
    if parts.is_empty() {
        parts.push("all weights 0".into());
    }
    let mut text = format!("priority {score:.1} = {}", parts.join(" + "));
    if nice != 0 {
        text.push_str(&format!(" − nice {nice}"));
    }
    if let Some(n) = nice_note {
        text.push_str(&format!(" ({n})"));
    }
    text
}

fn weight_text(w: f64) -> String {
    if w.fract() == 0.0 && w.abs() < 1e15 {
        format!("{}", w as i64)
    } else {
        format!("{w}")
    }
}
