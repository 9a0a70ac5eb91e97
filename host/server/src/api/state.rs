//! The router's state and which of the controller's handles a handler may take: the whole
//! [`Controller`], or one of its five sub-handles (`State<Jobs>`, `State<Nodes>`, ...)
//! through axum's `FromRef`.
//!
//! Owns: that glue only. The handles, their methods and every `impl` of them are
//! `gantry_controller::facade`'s, in a crate that knows no axum; the `FromRef` impls stand
//! here because the router's state is the server's type (the facade guard test,
//! `host/controller/src/facade_tests.rs`, allows these and nothing else outside the facade).

use axum::extract::FromRef;
use gantry_controller::{Admin, Controller, Jobs, Nodes, Policy, Services};

/// The state every route of the API shares: the controller's facade.
#[derive(Clone, Debug)]
pub struct ApiState(Controller);

impl ApiState {
    /// The state of a router over `controller`.
    pub fn new(controller: Controller) -> Self {
        Self(controller)
    }
}

/// `impl FromRef<ApiState> for $handle`, taking it from the controller with `$take`.
macro_rules! handle_from_state {
    ($handle:ty, $take:expr) => {
        impl FromRef<ApiState> for $handle {
            fn from_ref(state: &ApiState) -> Self {
                $take(&state.0)
            }
        }
    };
}

handle_from_state!(Controller, Controller::clone);
handle_from_state!(Jobs, Controller::jobs);
handle_from_state!(Nodes, Controller::nodes);
handle_from_state!(Policy, Controller::policy);
handle_from_state!(Services, Controller::services);
handle_from_state!(Admin, Controller::admin);
