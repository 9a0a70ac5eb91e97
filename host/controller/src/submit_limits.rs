//! The submission checks that depend on who submits and on what the daemon already holds,
//! run before anything is copied, snapshotted or stored:
//!
//! - a user's `tier` at most its queue's `limits.max_user_tier` (403 naming `tier`);
//!   operators and admins may set any tier, and an admission plugin's patch may too;
//! - the spec as JSON (without its array's index list) times its array members, plus the
//!   index list once, at most `limits.max_submission_bytes` (413
//!   naming `array`, or `body` for a single job);
//! - the user's pending jobs plus the new ones at most `limits.max_pending_per_user` (429
//!   naming `user`). Counted when the request is checked: submissions of one user in
//!   flight at the same moment may pass it by at most their number.
//!
//! Owns: these checks and their messages. Does not own the settings (`config_limits`),
//! who is privileged (`auth_submit`), field ranges (`model`) or HTTP statuses (`api`).

use super::jobs::SubmitError;
use super::{Scheduler, lock};
use crate::submitter::Submitter;
use gantry_api::model::{FieldError, JobSpec};

fn field(field: &str, message: String) -> FieldError {
    FieldError {
        field: field.into(),
        message,
    }
}

/// Counts the bytes written to it.
#[derive(Default)]
struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a submission stores and holds: the bytes of `spec` as JSON once per member, its
/// array's index list once (only the array's first member keeps the list; the others carry
/// their own index, `jobs.rs: new_records`).
pub fn submission_bytes(spec: &JobSpec) -> u64 {
    let json_bytes = |s: &JobSpec| {
        let mut counter = Counter::default();
        // Serializing a JobSpec to a writer that never fails cannot fail; count 0 if it did.
        let _ = serde_json::to_writer(&mut counter, s);
        counter.0
    };
    let Some(array) = &spec.array else {
        return json_bytes(spec);
    };
    let mut member = spec.clone();
    member.array = None;
    let members = array.indices.len() as u64;
    json_bytes(&member)
        .saturating_mul(members)
        .saturating_add(json_bytes(spec).saturating_sub(json_bytes(&member)))
}

impl Scheduler {
    /// Every check of this module, in the order a caller should hear about them. The pending
    /// jobs the submission adds stay reserved for its user until the returned reservation is
    /// dropped (once the jobs are in the job table, or the submission failed), so that
    /// submissions of one user racing each other cannot pass the limit together.
    pub(super) fn check_submit_limits(
        &self,
        spec: &JobSpec,
        submitter: Submitter,
    ) -> Result<PendingReservation<'_>, SubmitError> {
        self.check_tier(spec, submitter)?;
        self.check_size(spec)?;
        self.check_pending(spec)
    }

    pub(super) fn check_tier(
        &self,
        spec: &JobSpec,
        submitter: Submitter,
    ) -> Result<(), SubmitError> {
        if submitter == Submitter::Privileged {
            return Ok(());
        }
        let max = self.inner.config.limits.user_tier_limit(&spec.queue);
        if spec.tier <= max {
            return Ok(());
        }
        Err(SubmitError::Forbidden(field(
            "tier",
            format!(
                "tier {} is above {max}, the highest a user may ask for in queue {} \
                 (limits.max_user_tier); only an operator or admin token may set a higher \
                 tier (a request without a token counts as a user)",
                spec.tier, spec.queue
            ),
        )))
    }

    fn check_size(&self, spec: &JobSpec) -> Result<(), SubmitError> {
        let max = self.inner.config.limits.max_submission_bytes;
        let bytes = submission_bytes(spec);
        if bytes <= max {
            return Ok(());
        }
        let err = match &spec.array {
            Some(a) => field(
                "array",
                format!(
                    "an array copies its spec into every member: {} members of a {}-byte \
                     spec are {bytes} bytes, over limits.max_submission_bytes ({max}); \
                     submit fewer members or a smaller spec (put large data in a file)",
                    a.indices.len(),
                    bytes / a.indices.len().max(1) as u64
                ),
            ),
            None => field(
                "body",
                format!("the job spec is {bytes} bytes, over limits.max_submission_bytes ({max})"),
            ),
        };
        Err(SubmitError::TooLarge(err))
    }

    fn check_pending(&self, spec: &JobSpec) -> Result<PendingReservation<'_>, SubmitError> {
        let max = u64::from(self.inner.config.limits.max_pending_per_user);
        let new = spec.array.as_ref().map_or(1, |a| a.indices.len()) as u64;
        let pending = {
            let mut st = lock(&self.inner.state);
            let pending = st.jobs.pending_of(&spec.user)
                + st.reserved_pending.get(&spec.user).copied().unwrap_or(0);
            if pending + new <= max {
                *st.reserved_pending.entry(spec.user.clone()).or_default() += new;
                return Ok(PendingReservation {
                    scheduler: self,
                    user: spec.user.clone(),
                    count: new,
                });
            }
            pending
        };
        Err(SubmitError::TooMany(field(
            "user",
            format!(
                "user {} has {pending} pending jobs and this submission adds {new}; \
                 limits.max_pending_per_user is {max}: wait for some to start, or cancel some",
                spec.user
            ),
        )))
    }
}

/// Pending jobs reserved for a submission under way (see `check_submit_limits`); given
/// back when dropped.
pub(super) struct PendingReservation<'a> {
    scheduler: &'a Scheduler,
    user: String,
    count: u64,
}

impl Drop for PendingReservation<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.scheduler.inner.state);
        if let Some(n) = st.reserved_pending.get_mut(&self.user) {
            *n = n.saturating_sub(self.count);
            if *n == 0 {
                st.reserved_pending.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::job_options::ArraySpec;

    #[test]
    fn an_array_counts_its_spec_once_per_member_and_its_index_list_once() {
        let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        let one = submission_bytes(&spec);
        assert_eq!(one, serde_json::to_vec(&spec).unwrap().len() as u64);
        spec.array = Some(ArraySpec::parse("0-1999").unwrap());
        let whole = serde_json::to_vec(&spec).unwrap().len() as u64;
        assert_eq!(submission_bytes(&spec), one * 2000 + (whole - one));
        // A 2,000-member array of a small spec fits the default 16 MiB with room to spare
        // (it was counted as 2,000 copies of the index list: over 20 MB).
        assert!(
            submission_bytes(&spec) < 1 << 20,
            "{}",
            submission_bytes(&spec)
        );
    }
}
