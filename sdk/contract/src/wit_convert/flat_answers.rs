//! Contract 0.2's flat answers (`wit/0.2.0/stages.wit`): `placed`, a
//! [`Plan`](crate::Plan) whose starts' tasks and GPU shares travel in one flat list each,
//! and `scores`, a score per job plus the few tier overrides and notes by job index.
//! Lowered from the plugin's answer by value (the plugin's side) and lifted back with
//! every range and index checked (the host's side: one outside its list is an error
//! naming it, never a panic). Expanded by [`wit_conversions!`](crate::wit_conversions)
//! with `answers: flat` (the bindings of 0.2 and 0.3); 0.1 answers nested records.
//!
//! Owns: that part of the mapping. Does not own the answers' checks beyond their ranges
//! (`host/engine/src/validate.rs`, `host/engine/src/stage_calls.rs`).

/// The `scores` conversions; `$pri` names the `priority` interface's generated module.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_flat_scores {
    ($pri:ident) => {
        impl ::core::convert::From<Vec<$crate::Scored>> for $pri::Scores {
            fn from(scored: Vec<$crate::Scored>) -> Self {
                use $crate::wit_convert::u32_len;
                let mut out = Self {
                    scores: Vec::with_capacity(scored.len()),
                    tiers: Vec::new(),
                    notes: Vec::new(),
                };
                for (i, s) in scored.into_iter().enumerate() {
                    out.scores.push(s.score);
                    if let Some(tier) = s.tier {
                        out.tiers.push($pri::TierOverride {
                            job: u32_len(i),
                            tier,
                        });
                    }
                    if let Some(note) = s.note {
                        out.notes.push($pri::JobNote {
                            job: u32_len(i),
                            note,
                        });
                    }
                }
                out
            }
        }

        impl ::core::convert::TryFrom<$pri::Scores> for Vec<$crate::Scored> {
            type Error = String;
            fn try_from(s: $pri::Scores) -> Result<Self, String> {
                let mut out: Vec<$crate::Scored> = s
                    .scores
                    .into_iter()
                    .map(|score| $crate::Scored {
                        score,
                        tier: None,
                        note: None,
                    })
                    .collect();
                let n = out.len();
                for t in s.tiers {
                    match out.get_mut(t.job as usize) {
                        Some(x) if x.tier.is_none() => x.tier = Some(t.tier),
                        Some(_) => {
                            return Err(format!("scores: job {} has two tier overrides", t.job));
                        }
                        None => {
                            return Err(format!(
                                "scores: a tier override names job {} of {n} scored",
                                t.job
                            ));
                        }
                    }
                }
                for m in s.notes {
                    match out.get_mut(m.job as usize) {
                        Some(x) if x.note.is_none() => x.note = Some(m.note),
                        Some(_) => return Err(format!("scores: job {} has two notes", m.job)),
                        None => {
                            return Err(format!(
                                "scores: a note names job {} of {n} scored",
                                m.job
                            ));
                        }
                    }
                }
                Ok(out)
            }
        }
    };
}

/// The `placed` conversions; `$w` names the generated `types` module and `$pla` the
/// `placement` interface's.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_flat_plan {
    ($w:ident, $pla:ident) => {
        impl ::core::convert::From<$crate::Plan> for $pla::Placed {
            fn from(plan: $crate::Plan) -> Self {
                use $crate::wit_convert::u32_len;
                let tasks_total = plan.starts.iter().map(|s| s.tasks.len()).sum();
                let mut out = Self {
                    starts: Vec::with_capacity(plan.starts.len()),
                    tasks: Vec::with_capacity(tasks_total),
                    shares: Vec::with_capacity(tasks_total),
                    pending: plan.pending.into_iter().map(Into::into).collect(),
                    stopped_at: plan.stopped_at,
                };
                for s in &plan.starts {
                    out.starts.push($pla::StartSlot {
                        job: s.job,
                        first_task: u32_len(out.tasks.len()),
                        task_count: u32_len(s.tasks.len()),
                    });
                    for t in &s.tasks {
                        out.tasks.push($w::TaskSlot {
                            node: t.node,
                            first_share: u32_len(out.shares.len()),
                            share_count: u32_len(t.gpus.len()),
                            cpu_milli: t.cpu_milli,
                            memory_mib: t.memory_mib,
                        });
                        out.shares.extend(t.gpus.iter().map($w::GpuShare::from));
                    }
                }
                out
            }
        }

        impl ::core::convert::TryFrom<$pla::Placed> for $crate::Plan {
            type Error = String;
            fn try_from(p: $pla::Placed) -> Result<Self, String> {
                use $crate::wit_convert::checked_span;
                let mut starts = Vec::with_capacity(p.starts.len());
                for s in &p.starts {
                    let tasks = checked_span(&p.tasks, s.first_task, s.task_count)
                        .ok_or_else(|| {
                            format!(
                                "placed: the tasks of job {}'s start ({} from {}) are not within the {} tasks sent",
                                s.job,
                                s.task_count,
                                s.first_task,
                                p.tasks.len()
                            )
                        })?;
                    let mut allocations = Vec::with_capacity(tasks.len());
                    for t in tasks {
                        let shares = checked_span(&p.shares, t.first_share, t.share_count)
                            .ok_or_else(|| {
                                format!(
                                    "placed: the GPU shares of a task of job {} ({} from {}) are not within the {} shares sent",
                                    s.job,
                                    t.share_count,
                                    t.first_share,
                                    p.shares.len()
                                )
                            })?;
                        allocations.push($crate::TaskAllocation {
                            node: t.node,
                            gpus: shares.iter().map(Into::into).collect(),
                            cpu_milli: t.cpu_milli,
                            memory_mib: t.memory_mib,
                        });
                    }
                    starts.push($crate::Start {
                        job: s.job,
                        tasks: allocations,
                    });
                }
                Ok($crate::Plan {
                    starts,
                    pending: p.pending.into_iter().map(Into::into).collect(),
                    stopped_at: p.stopped_at,
                })
            }
        }
    };
}
