//! [`sharing_plugin!`](crate::sharing_plugin): the whole body of a thin plugin crate
//! (`random`, `dot-product`, `gpu-clustering`, `gpu-packing`, `best-fit`, `fgd`): a
//! type wrapping [`SharingPlacer`](crate::SharingPlacer) for one [`Policy`](crate::Policy),
//! its `Plugin` and `Placement` impls, and the wasm export.
//!
//! Owns: that boilerplate. Does not own any policy logic.

/// Declares `pub struct $name` placing with `$policy`, and exports it as a placement
/// plugin. The calling crate must depend on `gantry-sdk`; its package version becomes
/// the plugin's version.
#[macro_export]
macro_rules! sharing_plugin {
    ($(#[$meta:meta])* $name:ident, $policy:expr) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name($crate::SharingPlacer);

        impl Default for $name {
            fn default() -> Self {
                Self($crate::SharingPlacer::new($policy))
            }
        }

        impl gantry_sdk::Plugin for $name {
            fn metadata(&self) -> gantry_sdk::Metadata {
                self.0.metadata(env!("CARGO_PKG_VERSION"))
            }

            fn configure(&mut self, config_json: &str) -> Result<(), String> {
                self.0.configure(config_json)
            }
        }

        impl gantry_sdk::Placement for $name {
            fn place(
                &mut self,
                ctx: &gantry_sdk::Cycle,
                jobs: &[gantry_sdk::Job],
                nodes: &[gantry_sdk::Node],
                running: &[gantry_sdk::RunningJob],
            ) -> Result<gantry_sdk::Plan, String> {
                self.0.place(ctx, jobs, nodes, running)
            }
        }

        gantry_sdk::export_plugin!($name, stages: [placement]);
    };
}
