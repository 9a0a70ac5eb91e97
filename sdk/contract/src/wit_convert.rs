//! The one mapping between this crate's types and the Rust types generated from `wit/`:
//! [`wit_conversions!`](crate::wit_conversions) expands, in the crate that generated them,
//! `From`/`FromIterator` impls in both directions. The host (wasmtime's `bindgen!`,
//! `host/plugin-runtime/src/convert.rs`) lowers inputs and lifts outputs; the guest
//! (wit-bindgen's `generate!`, `sdk/rust/src/wasm.rs`) lifts inputs and lowers outputs.
//! Both generators give the same names (snake_case fields, UpperCamel variants) and the
//! same owned types (`String`, `Vec`, `Option`), so one expansion serves both.
//!
//! Inputs travel in the WIT's flat lists (`job-list`, `node-list`, `running-list`: one
//! list per part, each record naming its range); this crate's types nest. Lowering is by
//! reference (the host keeps its snapshot), lifting by value (strings move).
//!
//! 0.2's `score` and `place` answer in flat lists too (`scores` and `placed`, in
//! `flat_answers`: expanded next to this macro in 0.2's bindings only).
//!
//! Owns: the field-by-field mapping (the flat lists in `flat` and `flat_answers`) and its
//! helpers. Does not
//! own the bindings or any wasm dependency (the macro only names the modules the caller
//! passes in); keep it in step with `wit/<version>/` (a missing field is a compile error
//! on both sides).

mod flat;
mod flat_answers;

/// `items[first .. first + count]`, or empty when the range is out of bounds (a guest
/// never trusts the ranges it is sent).
#[doc(hidden)]
pub fn span<T>(items: &[T], first: u32, count: u32) -> &[T] {
    let (first, count) = (first as usize, count as usize);
    items.get(first..first.saturating_add(count)).unwrap_or(&[])
}

/// `items[first .. first + count]`, or `None` when the range is out of bounds (the host
/// refuses a plugin's answer that names one).
#[doc(hidden)]
pub fn checked_span<T>(items: &[T], first: u32, count: u32) -> Option<&[T]> {
    let (first, count) = (first as usize, count as usize);
    items.get(first..first.checked_add(count)?)
}

/// A length or offset as a WIT `u32` (saturating; lists that long cannot be sent anyway).
#[doc(hidden)]
pub fn u32_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Converts every element of `v`.
pub fn vec_into<A: Into<B>, B>(v: Vec<A>) -> Vec<B> {
    v.into_iter().map(Into::into).collect()
}

/// Expands the conversions between `gantry_contract`'s types and the types generated from
/// `wit/` into the calling crate (where the generated types are local). Name the generated
/// modules: `types` (the `types` interface), `host`, and the exported interfaces; and how
/// `score` and `place` answer: `answers: nested` (0.1's `list<scored>` and `plan`) or
/// `answers: flat` (0.2's and 0.3's `scores` and `placed`); and whether the fields new in
/// 0.3 (`gpu.parent`, `eviction.warn-s`) are there: `since_0_3: absent` (0.1, 0.2: sent
/// without them, read as `None` and 0) or `since_0_3: present`.
///
/// ```ignore
/// gantry_contract::wit_conversions! {
///     types: wit, host: host, plugin: plugin, admission: admission,
///     priority: priority, placement: placement, preemption: preemption, answers: nested,
///     since_0_3: absent,
/// }
/// ```
///
/// Inputs: `From<&Cycle>` / `From<wit::Cycle>`, `FromIterator<&Job>` for `wit::JobList` /
/// `From<wit::JobList> for Vec<Job>`, `From<&[Node]>` for `wit::NodeList` / `From<wit::NodeList>
/// for Vec<Node>`, `From<&[RunningJob]>` for `wit::RunningList` / `From<wit::RunningList> for
/// Vec<RunningJob>`. Outputs, both ways by value: `Metadata`, `SubmitVerdict`, `Verdict`,
/// `Eviction`, `LogLevel` and what they hold; `Scored` and `Plan` both ways (nested), or
/// `From<Plan>` for `placed`, `TryFrom<placed>` for `Plan`, `From<Vec<Scored>>` for
/// `scores` and `TryFrom<scores>` for `Vec<Scored>` (flat).
#[macro_export]
macro_rules! wit_conversions {
    (
        types: $w:ident,
        host: $host:ident,
        plugin: $plugin:ident,
        admission: $adm:ident,
        priority: $pri:ident,
        placement: $pla:ident,
        preemption: $pre:ident,
        answers: $answers:ident,
        since_0_3: $since:ident $(,)?
    ) => {
        $crate::wit_conversions!(@common $w, $host, $plugin, $adm, $pri, $pla, $pre);
        $crate::wit_conversions!(@answers $answers, $w, $pri, $pla);
        $crate::wit_conversions!(@since_0_3 $since, $w, $pre);
    };
    (@since_0_3 absent, $w:ident, $pre:ident) => {
        $crate::wit_conversions!(@copy $crate::Gpu, $w::Gpu, {
            index, model, memory_mib, free_milli, healthy
        } only_ours { parent });
        $crate::wit_conversions!(@record $crate::Eviction, $pre::Eviction, {
            job, for_job, reason, grace_s ;
        } only_ours { warn_s });
    };
    (@since_0_3 present, $w:ident, $pre:ident) => {
        $crate::wit_conversions!(@copy $crate::Gpu, $w::Gpu, {
            index, model, memory_mib, free_milli, healthy, parent
        });
        $crate::wit_conversions!(@record $crate::Eviction, $pre::Eviction, {
            job, for_job, reason, grace_s, warn_s ;
        });
    };
    (@answers nested, $w:ident, $pri:ident, $pla:ident) => {
        $crate::wit_conversions!(@record $crate::Scored, $pri::Scored, { score, tier, note ; });
        $crate::wit_conversions!(@record $crate::TaskAllocation, $w::TaskAllocation, {
            node, cpu_milli, memory_mib ; gpus
        });
        $crate::wit_conversions!(@record $crate::Start, $pla::Start, { job ; tasks });
        $crate::wit_conversions!(@record $crate::Plan, $pla::Plan, {
            stopped_at ; starts, pending
        });
    };
    (@answers flat, $w:ident, $pri:ident, $pla:ident) => {
        $crate::__wit_flat_plan!($w, $pla);
        $crate::__wit_flat_scores!($pri);
    };
    (@common $w:ident, $host:ident, $plugin:ident, $adm:ident, $pri:ident, $pla:ident, $pre:ident) => {
        // Records of plain values.
        $crate::wit_conversions!(@copy $crate::Usage, $w::Usage, { who, gpu_seconds });
        $crate::wit_conversions!(@copy $crate::GpuUse, $w::GpuUse, { who, gpu_milli });
        $crate::wit_conversions!(@copy $crate::ClusterTotals, $w::ClusterTotals, {
            nodes, gpu_milli_total, gpu_milli_free, cpu_milli_total, memory_mib_total
        });
        $crate::wit_conversions!(@copy $crate::Label, $w::Label, { key, value });
        $crate::wit_conversions!(@copy $crate::TaskGroup, $w::TaskGroup, {
            count, gpus, gpu_milli, cpu_milli, memory_mib, gpu_model_mask
        });
        $crate::wit_conversions!(@copy $crate::GpuShare, $w::GpuShare, { index, milli });

        // Enums and variants.
        $crate::wit_conversions!(@variant $crate::JobKind, $w::JobKind, {
            Batch, Interactive, Service ;
        });
        $crate::wit_conversions!(@variant $crate::NodeState, $w::NodeState, {
            Up, Draining, Down ;
        });
        $crate::wit_conversions!(@variant $crate::ReasonCode, $w::ReasonCode, {
            HeldByPolicy, InsufficientGpus, InsufficientCpu, InsufficientMemory,
            GpuModelUnavailable, BlockedByHigherPriority, WaitingForPreemption, Preempted,
            Other ;
        });
        $crate::wit_conversions!(@variant $crate::Stage, $plugin::Stage, {
            Admission, Priority, Placement, Preemption ;
        });
        $crate::wit_conversions!(@variant $crate::LogLevel, $host::Level, {
            Trace, Debug, Info, Warn, Error ;
        });
        $crate::wit_conversions!(@variant $crate::SubmitVerdict, $adm::SubmitVerdict, {
            Accept ; AcceptWith, Reject
        });
        $crate::wit_conversions!(@variant $crate::Verdict, $adm::Verdict, { Admit ; Hold });

        // Output records (by value; `;` precedes the fields that are lists to convert).
        $crate::wit_conversions!(@record $crate::Metadata, $plugin::PluginInfo, {
            name, version, contract, config_hint ; stages
        });
        $crate::wit_conversions!(@record $crate::Reason, $w::Reason, { code, message ; });
        $crate::wit_conversions!(@record $crate::JobPatch, $adm::JobPatch, {
            queue, tier, time_limit_s, preemptible, labels ;
        });
        $crate::wit_conversions!(@record $crate::Pending, $pla::Pending, { job, reason ; });


        $crate::wit_conversions!(@cycle $crate::Cycle, $w);
        $crate::__wit_flat_lists!($w);
    };

    // Both ways, by reference and by value, for records whose fields are all `Copy`;
    // `only_ours` names fields an older WIT lacks (dropped going out, default coming in).
    (@copy $a:ty, $b:ty, { $($f:ident),+ $(,)? } $(only_ours { $($o:ident),* })?) => {
        impl ::core::convert::From<&$a> for $b {
            fn from(x: &$a) -> Self {
                Self { $($f: x.$f,)+ }
            }
        }
        impl ::core::convert::From<&$b> for $a {
            fn from(x: &$b) -> Self {
                Self { $($f: x.$f,)+ $($($o: Default::default(),)*)? }
            }
        }
        impl ::core::convert::From<$a> for $b {
            fn from(x: $a) -> Self {
                Self::from(&x)
            }
        }
        impl ::core::convert::From<$b> for $a {
            fn from(x: $b) -> Self {
                Self::from(&x)
            }
        }
    };

    // Both ways for an enum: unit variants, then `;`, then variants with one payload.
    (@variant $a:ty, $b:ty, { $($u:ident),* ; $($t:ident),* $(,)? }) => {
        impl ::core::convert::From<$a> for $b {
            fn from(x: $a) -> Self {
                type Src = $a;
                match x {
                    $(Src::$u => Self::$u,)*
                    $(Src::$t(v) => Self::$t(v.into()),)*
                }
            }
        }
        impl ::core::convert::From<$b> for $a {
            fn from(x: $b) -> Self {
                type Src = $b;
                match x {
                    $(Src::$u => Self::$u,)*
                    $(Src::$t(v) => Self::$t(v.into()),)*
                }
            }
        }
    };

    // Both ways by value: fields converted with `into`, then `;`, then lists.
    (@record $a:ty, $b:ty, { $($f:ident),* ; $($l:ident),* $(,)? } $(only_ours { $($o:ident),* })?) => {
        impl ::core::convert::From<$a> for $b {
            fn from(x: $a) -> Self {
                Self {
                    $($f: x.$f.into(),)*
                    $($l: $crate::wit_convert::vec_into(x.$l),)*
                }
            }
        }
        impl ::core::convert::From<$b> for $a {
            fn from(x: $b) -> Self {
                Self {
                    $($f: x.$f.into(),)*
                    $($l: $crate::wit_convert::vec_into(x.$l),)*
                    $($($o: Default::default(),)*)?
                }
            }
        }
    };

    (@cycle $c:ty, $w:ident) => {
        impl ::core::convert::From<&$crate::QueueStatus> for $w::QueueStatus {
            fn from(q: &$crate::QueueStatus) -> Self {
                Self {
                    queue: q.queue,
                    gpu_milli_quota: q.gpu_milli_quota,
                    gpu_milli_used: q.gpu_milli_used,
                    pending_jobs: q.pending_jobs,
                    gpu_milli_used_by_model: q.gpu_milli_used_by_model.clone(),
                }
            }
        }
        impl ::core::convert::From<$w::QueueStatus> for $crate::QueueStatus {
            fn from(q: $w::QueueStatus) -> Self {
                Self {
                    queue: q.queue,
                    gpu_milli_quota: q.gpu_milli_quota,
                    gpu_milli_used: q.gpu_milli_used,
                    pending_jobs: q.pending_jobs,
                    gpu_milli_used_by_model: q.gpu_milli_used_by_model,
                }
            }
        }
        impl ::core::convert::From<&$c> for $w::Cycle {
            fn from(x: &$c) -> Self {
                Self {
                    id: x.id,
                    now_ms: x.now_ms,
                    seed: x.seed,
                    strings: x.strings.clone(),
                    gpu_models: x.gpu_models.clone(),
                    user_usage: x.user_usage.iter().map(Into::into).collect(),
                    account_usage: x.account_usage.iter().map(Into::into).collect(),
                    user_gpus: x.user_gpus.iter().map(Into::into).collect(),
                    account_gpus: x.account_gpus.iter().map(Into::into).collect(),
                    queues: x.queues.iter().map(Into::into).collect(),
                    totals: (&x.totals).into(),
                }
            }
        }
        impl ::core::convert::From<$w::Cycle> for $c {
            fn from(x: $w::Cycle) -> Self {
                Self {
                    id: x.id,
                    now_ms: x.now_ms,
                    seed: x.seed,
                    strings: x.strings,
                    gpu_models: x.gpu_models,
                    user_usage: x.user_usage.iter().map(Into::into).collect(),
                    account_usage: x.account_usage.iter().map(Into::into).collect(),
                    user_gpus: x.user_gpus.iter().map(Into::into).collect(),
                    account_gpus: x.account_gpus.iter().map(Into::into).collect(),
                    queues: $crate::wit_convert::vec_into(x.queues),
                    totals: (&x.totals).into(),
                    strings_lineage: 0,
                }
            }
        }
    };
}
