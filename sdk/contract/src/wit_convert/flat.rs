//! The flat lists of `wit/` (`job-list`, `node-list`, `running-list`: one list per part,
//! each record naming its range) against this crate's nested `Job`, `Node` and
//! `RunningJob`: lowered by reference into one list per part, lifted back into nested
//! values (allocations stay on the receiving side). Expanded by
//! [`wit_conversions!`](crate::wit_conversions); see `sdk/contract/src/wit_convert.rs`.
//!
//! Owns: that part of the mapping. Does not own the per-record mapping it uses.

/// The flat-list part of [`wit_conversions!`](crate::wit_conversions); `$w` names the
/// generated `types` module.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_flat_lists {
    ($w:ident) => {
        impl<'a> ::core::iter::FromIterator<&'a $crate::Job> for $w::JobList {
            fn from_iter<I: IntoIterator<Item = &'a $crate::Job>>(jobs: I) -> Self {
                use $crate::wit_convert::u32_len;
                let jobs = jobs.into_iter();
                let n = jobs.size_hint().0;
                let mut out = Self {
                    jobs: Vec::with_capacity(n),
                    groups: Vec::with_capacity(n),
                    labels: Vec::new(),
                };
                for x in jobs {
                    let (first_group, first_label) =
                        (u32_len(out.groups.len()), u32_len(out.labels.len()));
                    out.groups.extend(x.tasks.iter().map($w::TaskGroup::from));
                    out.labels.extend(x.labels.iter().map($w::Label::from));
                    out.jobs.push($w::Job {
                        id: x.id,
                        name: x.name,
                        user: x.user,
                        account: x.account,
                        queue: x.queue,
                        tier: x.tier,
                        submit_ms: x.submit_ms,
                        time_limit_s: x.time_limit_s,
                        kind: x.kind.into(),
                        preemptible: x.preemptible,
                        first_group,
                        group_count: u32_len(x.tasks.len()),
                        first_label,
                        label_count: u32_len(x.labels.len()),
                    });
                }
                out
            }
        }
        impl ::core::convert::From<$w::JobList> for Vec<$crate::Job> {
            fn from(l: $w::JobList) -> Self {
                use $crate::wit_convert::span;
                l.jobs
                    .iter()
                    .map(|x| $crate::Job {
                        id: x.id,
                        name: x.name,
                        user: x.user,
                        account: x.account,
                        queue: x.queue,
                        tier: x.tier,
                        submit_ms: x.submit_ms,
                        time_limit_s: x.time_limit_s,
                        kind: x.kind.into(),
                        preemptible: x.preemptible,
                        labels: span(&l.labels, x.first_label, x.label_count)
                            .iter()
                            .map(Into::into)
                            .collect(),
                        tasks: span(&l.groups, x.first_group, x.group_count)
                            .iter()
                            .map(Into::into)
                            .collect(),
                        revision: 0,
                    })
                    .collect()
            }
        }
        impl ::core::convert::From<&[$crate::Node]> for $w::NodeList {
            fn from(v: &[$crate::Node]) -> Self {
                use $crate::wit_convert::u32_len;
                let mut out = Self {
                    nodes: Vec::with_capacity(v.len()),
                    gpus: Vec::with_capacity(v.len() * 8),
                    labels: Vec::new(),
                };
                for x in v {
                    let (first_gpu, first_label) =
                        (u32_len(out.gpus.len()), u32_len(out.labels.len()));
                    out.gpus.extend(x.gpus.iter().map($w::Gpu::from));
                    out.labels.extend(x.labels.iter().map($w::Label::from));
                    out.nodes.push($w::Node {
                        id: x.id,
                        name: x.name,
                        state: x.state.into(),
                        cpu_milli_total: x.cpu_milli_total,
                        cpu_milli_free: x.cpu_milli_free,
                        memory_mib_total: x.memory_mib_total,
                        memory_mib_free: x.memory_mib_free,
                        first_gpu,
                        gpu_count: u32_len(x.gpus.len()),
                        first_label,
                        label_count: u32_len(x.labels.len()),
                    });
                }
                out
            }
        }
        impl ::core::convert::From<$w::NodeList> for Vec<$crate::Node> {
            fn from(l: $w::NodeList) -> Self {
                use $crate::wit_convert::span;
                l.nodes
                    .iter()
                    .map(|x| $crate::Node {
                        id: x.id,
                        name: x.name,
                        state: x.state.into(),
                        labels: span(&l.labels, x.first_label, x.label_count)
                            .iter()
                            .map(Into::into)
                            .collect(),
                        cpu_milli_total: x.cpu_milli_total,
                        cpu_milli_free: x.cpu_milli_free,
                        memory_mib_total: x.memory_mib_total,
                        memory_mib_free: x.memory_mib_free,
                        gpus: span(&l.gpus, x.first_gpu, x.gpu_count)
                            .iter()
                            .map(Into::into)
                            .collect(),
                        revision: 0,
                    })
                    .collect()
            }
        }
        impl ::core::convert::From<&[$crate::RunningJob]> for $w::RunningList {
            fn from(v: &[$crate::RunningJob]) -> Self {
                use $crate::wit_convert::u32_len;
                let mut out = Self {
                    jobs: v.iter().map(|r| &r.job).collect(),
                    running: Vec::with_capacity(v.len()),
                    tasks: Vec::with_capacity(v.len()),
                    shares: Vec::new(),
                };
                for r in v {
                    let first_task = u32_len(out.tasks.len());
                    for a in &r.tasks {
                        let first_share = u32_len(out.shares.len());
                        out.shares.extend(a.gpus.iter().map($w::GpuShare::from));
                        out.tasks.push($w::TaskSlot {
                            node: a.node,
                            first_share,
                            share_count: u32_len(a.gpus.len()),
                            cpu_milli: a.cpu_milli,
                            memory_mib: a.memory_mib,
                        });
                    }
                    out.running.push($w::Running {
                        start_ms: r.start_ms,
                        expected_end_ms: r.expected_end_ms,
                        score: r.score,
                        first_task,
                        task_count: u32_len(r.tasks.len()),
                    });
                }
                out
            }
        }
        impl ::core::convert::From<$w::RunningList> for Vec<$crate::RunningJob> {
            fn from(l: $w::RunningList) -> Self {
                use $crate::wit_convert::span;
                let $w::RunningList {
                    jobs,
                    running,
                    tasks,
                    shares,
                } = l;
                Vec::<$crate::Job>::from(jobs)
                    .into_iter()
                    .zip(running)
                    .map(|(job, r)| $crate::RunningJob {
                        job,
                        tasks: span(&tasks, r.first_task, r.task_count)
                            .iter()
                            .map(|t| $crate::TaskAllocation {
                                node: t.node,
                                gpus: span(&shares, t.first_share, t.share_count)
                                    .iter()
                                    .map(Into::into)
                                    .collect(),
                                cpu_milli: t.cpu_milli,
                                memory_mib: t.memory_mib,
                            })
                            .collect(),
                        start_ms: r.start_ms,
                        expected_end_ms: r.expected_end_ms,
                        score: r.score,
                        revision: 0,
                    })
                    .collect()
            }
        }
    };
}
