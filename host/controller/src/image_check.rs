//! Submit-time checks of a job in an image: its mounts under `[containers] allowed_mounts`,
//! its local layout or archive under `image_dirs`, and, when this node is the cluster's only
//! one, a registry that answers over plain HTTP while `insecure_registries` does not list it
//! (the pull would fail after the start; `gantry_node::container::plain_registry`) and that
//! it can run images at all (an OCI runtime, skopeo and umoci). Agents' nodes decide at
//! launch.
//!
//! Owns: those refusals (400, naming the field). Does not own the syntax of `image` and
//! `mounts` (`gantry_api::model::container`) nor running an image (`gantry_node::container`).

use super::Scheduler;
use super::jobs::{SubmitError, field_error};
use gantry_api::model::JobSpec;

impl Scheduler {
    /// Refuses, naming the field, an image job whose mounts are not under `[containers]
    /// allowed_mounts`, whose local layout is not under `image_dirs`, or which cannot run
    /// anywhere: this node cannot run images and it is the cluster's only one.
    pub(crate) fn check_image(&self, spec: &JobSpec) -> Result<(), SubmitError> {
        let Some(image) = &spec.image else {
            return Ok(());
        };
        let Some(containers) = self.inner.executor.containers() else {
            return Err(SubmitError::Field(field_error(
                "image",
                "containers are not set up",
            )));
        };
        for (i, m) in spec.mounts.iter().enumerate() {
            if !containers.mount_allowed(&m.source) {
                return Err(SubmitError::Field(field_error(
                    format!("mounts[{i}].source"),
                    format!(
                        "{} is not under a directory of [containers] allowed_mounts ({})",
                        m.source,
                        allowed_list(&containers.config.allowed_mounts)
                    ),
                )));
            }
        }
        let source = gantry_node::container::image_ref::Source::parse(image);
        if let Some(dir) = source.as_ref().ok().and_then(|s| s.local_path())
            && !containers.layout_allowed(dir)
        {
            return Err(SubmitError::Field(field_error(
                "image",
                format!(
                    "{} is not under a directory of [containers] image_dirs ({})",
                    dir.display(),
                    allowed_list(&containers.config.image_dirs)
                ),
            )));
        }
        // Pulls happen where the tasks run, with that node's `[containers]`: asked only when
        // this node is the cluster's only one, as below.
        if let Ok(gantry_node::container::image_ref::Source::Registry { reference, .. }) = &source
            && self.only_local_node()
            && !containers.insecure(reference)
            && let Some(host) = gantry_node::container::plain_registry::probed_host(reference)
            && gantry_node::container::plain_registry::speaks_plain_http(host)
        {
            return Err(SubmitError::Field(field_error(
                "image",
                format!(
                    "the registry {host} answers over plain HTTP, and pulls use HTTPS unless \
                     [containers] insecure_registries lists it: ask an administrator to add \
                     \"{host}\" to containers.insecure_registries, or push the image to a \
                     registry with TLS"
                ),
            )));
        }
        if self.only_local_node()
            && let Some(why) = self.inner.executor.containers_unavailable()
        {
            return Err(SubmitError::Field(field_error("image", why)));
        }
        Ok(())
    }
}

fn allowed_list(dirs: &[std::path::PathBuf]) -> String {
    if dirs.is_empty() {
        return "none configured".into();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
