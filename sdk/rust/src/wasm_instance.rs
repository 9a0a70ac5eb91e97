//! The one instance of the exported plugin type in a component, and the answer of a stage
//! it does not implement, shared by the exporters of both contract versions (`wasm.rs`,
//! `wasm_delta.rs`). Only compiled for wasm32.

use crate::DynPlugin;
use std::any::Any;
use std::cell::RefCell;

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Runs `f` on the one instance of `T`, making it on first use.
pub(crate) fn with_plugin<T: DynPlugin + Default + 'static, R>(f: impl FnOnce(&mut T) -> R) -> R {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let any = slot.get_or_insert_with(|| Box::new(T::default()));
        match any.downcast_mut::<T>() {
            Some(p) => f(p),
            None => {
                *any = Box::new(T::default());
                f(any.downcast_mut::<T>().unwrap_or_else(|| unreachable!()))
            }
        }
    })
}

/// The error a stage the plugin does not implement answers with.
pub(crate) fn not_implemented(stage: &str) -> String {
    format!("this plugin does not implement the {stage} stage")
}
