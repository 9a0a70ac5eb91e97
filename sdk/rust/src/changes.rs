//! What changed in a stage's lists since the same stage's previous call on this plugin
//! instance: an optional hint for plugins that keep derived state between calls (a view
//! of the nodes, counts over the running jobs) and want to update only what changed.
//!
//! Under contract 0.2 the SDK's mirror receives each list as a delta (`keep`: for each
//! element of the new list, the position of the same element in the previous list, or
//! [`FRESH`] for one that is new or changed). The exporter (`wasm_delta.rs`) makes those
//! `keep` vectors visible here for the length of one stage call. Everywhere else (a
//! plugin called natively, a 0.1 component, the first call, the call after a full
//! resend) there is no hint, and [`with_changes`] passes `None`: the plugin rebuilds.
//!
//! Owns: the per-call hint and its lifetime. Does not own the delta format
//! (`gantry_contract::delta`) or the mirror (`wasm_delta.rs`).

pub use gantry_contract::delta::FRESH;
use std::cell::RefCell;

/// For each list a stage received, how it relates to the list of the same argument in
/// the same stage's previous call: `kept[i]` is the previous position of element `i`, or
/// [`FRESH`] when element `i` is new or differs from everything kept.
///
/// A kept element is equal to the previous one in every field the plugin sees. An
/// element of the previous list that no `kept` entry names was removed or changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The jobs argument (pending jobs; `blocked` for preemption).
    pub jobs: Vec<u32>,
    /// The nodes argument (empty for stages without one).
    pub nodes: Vec<u32>,
    /// The running argument (empty for stages without one).
    pub running: Vec<u32>,
}

thread_local! {
    static CURRENT: RefCell<Option<Changes>> = const { RefCell::new(None) };
}

/// Runs `f` with the hint of the stage call in progress, or `None` when there is none
/// (natively, under contract 0.1, or after a full resend): then the plugin must treat
/// every list as new.
pub fn with_changes<R>(f: impl FnOnce(Option<&Changes>) -> R) -> R {
    CURRENT.with(|cell| f(cell.borrow().as_ref()))
}

/// Makes `changes` the hint while `f` runs (the exporter's side; tests of a plugin's
/// incremental path may call it too). The hint is cleared afterwards, also when `f`
/// panics.
pub fn during<R>(changes: Option<Changes>, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            CURRENT.with(|cell| *cell.borrow_mut() = None);
        }
    }
    CURRENT.with(|cell| *cell.borrow_mut() = changes);
    let _clear = Clear;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_lives_for_one_call() {
        with_changes(|c| assert!(c.is_none()));
        let hint = Changes {
            nodes: vec![0, FRESH],
            ..Changes::default()
        };
        let seen = during(Some(hint.clone()), || with_changes(|c| c.cloned()));
        assert_eq!(seen, Some(hint));
        with_changes(|c| assert!(c.is_none(), "cleared after the call"));
    }
}
