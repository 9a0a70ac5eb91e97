//! One image for every rank: a job of several tasks in an image named by a registry tag has
//! the tag resolved to its manifest digest once, by the controller, before any task starts,
//! and every task is launched with `name@digest`. A tag moved while the ranks start (a
//! push of `:latest` during a gang's launch) cannot give ranks different code.
//!
//! The question goes to the registry (`skopeo inspect`, with this node's `[containers]`
//! registry settings) on the runtime's blocking pool: a cycle never waits for a registry. When it
//! cannot be asked (no skopeo here, the registry unreachable from the controller), the
//! tasks pull the tag themselves and an event says the digest was not pinned.
//!
//! Owns: when to pin, and pinning. Does not own the launch (`launch`) nor pulls
//! (`gantry_node::container`).

use super::{Scheduler, lock};
use gantry_api::model::JobRecord;
use gantry_node::container::{image_ref::Source, registry};

impl Scheduler {
    /// The registry tag `job`'s tasks must share, if it has one: more than one task, in an
    /// image named by a registry tag (not a digest, a local layout or an archive).
    fn tag_to_pin(job: &JobRecord) -> Option<String> {
        if job.tasks.len() < 2 {
            return None;
        }
        match Source::parse(job.spec.image.as_deref()?).ok()? {
            Source::Registry {
                reference,
                by_digest: false,
            } => Some(reference),
            _ => None,
        }
    }

    /// Launches `job` (a copy of a job whose start was committed): at once, or, when its
    /// tasks must share a tag's digest, on a blocking thread that resolves it first.
    pub(crate) fn launch_started(&self, job: JobRecord) {
        let Some(tag) = Self::tag_to_pin(&job) else {
            self.launch(job);
            return;
        };
        // Its tasks count as being launched meanwhile, so a heartbeat from an agent does
        // not send them again unpinned.
        let keys: Vec<_> = (0..job.tasks.len())
            .map(|i| Self::task_key(&job, i))
            .collect();
        for key in &keys {
            lock(&self.inner.remote_runs).launch_sent(*key);
        }
        let s = self.clone();
        let pin_then_launch = move || {
            let job = s.pin_image(job, &tag);
            for key in &keys {
                lock(&s.inner.remote_runs).launch_answered(key);
            }
            s.launch(job);
        };
        // On the runtime's blocking pool (the launch that follows needs the runtime).
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(pin_then_launch)),
            Err(_) => pin_then_launch(),
        }
    }

    /// `job` with its image replaced by `tag`'s digest for this run (the stored spec keeps
    /// the tag, so a requeued job asks again); unchanged, with an event, when it cannot be
    /// resolved.
    fn pin_image(&self, mut job: JobRecord, tag: &str) -> JobRecord {
        let resolved = match self.inner.executor.containers() {
            Some(containers) => registry::resolve_digest(containers, tag),
            None => Err("containers are not set up on the controller".into()),
        };
        match resolved {
            Ok(pinned) => {
                self.event(
                    job.id,
                    "image-pinned",
                    format!("{tag} is {pinned} for all {} tasks", job.tasks.len()),
                );
                job.spec.image = Some(pinned);
            }
            Err(why) => self.event(
                job.id,
                "image-not-pinned",
                format!("each task pulls {tag} itself: {why}"),
            ),
        }
        job
    }
}
