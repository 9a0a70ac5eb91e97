//! Conversions between `gantry-contract`'s types and the types `bindgen!` generates, from
//! the one mapping the guest SDK also expands (`sdk/contract/src/wit_convert.rs`): inputs
//! are lowered contract → WIT by reference (`wit::Cycle::from(&cycle)`,
//! `jobs.iter().collect::<wit::JobList>()`, `wit::NodeList::from(nodes)`,
//! `wit::RunningList::from(running)`), outputs lifted WIT → contract by value.
//!
//! Owns nothing but that expansion.

use crate::bindings::gantry::policy::host;
use crate::bindings::{admission, placement, plugin, preemption, priority, wit};

gantry_contract::wit_conversions! {
    types: wit,
    host: host,
    plugin: plugin,
    admission: admission,
    priority: priority,
    placement: placement,
    preemption: preemption,
    answers: nested,
    since_0_3: absent,
}
