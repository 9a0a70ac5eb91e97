//! The `[limits]` section of the configuration: how much one submission, one user and one
//! task may take from the daemon, and how far a user may raise a job's priority.
//!
//! - `max_submission_bytes` (default 16 MiB): the serialized job spec times its array
//!   members; an array copies the whole spec into every member, so a 1 MiB spec of 10,000
//!   members would be 10 GB of records. Over it: 413 naming `array` (or `body`).
//! - `max_pending_per_user` (default 10,000): pending jobs one user may have; a submission
//!   that would pass it is refused with 429 naming `user`.
//! - `max_user_tier` (default `{"*" = 0}`): per queue (`"*"` for every other queue), the
//!   highest `tier` a caller of role user may ask for (and a caller without a token, whose
//!   identity is only what its request says); operators and admins may set any tier, and an
//!   admission plugin's patch may too (the policy's decision). Over it: 403 naming `tier`.
//! - `max_log_mib` (default 1024): the size of one task's log; the task's shim copies its
//!   output up to it, then writes `gantry: log cut at N MiB (limits.max_log_mib); further
//!   output discarded` and discards the rest (`executor::log_cap`). Also on agents, from
//!   their own config.
//!
//! Owns: these settings, their defaults and range checks. Does not own enforcing them
//! (`scheduler::submit_limits`) or the fixed field limits of a job (`model`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default `max_submission_bytes`: 16 MiB.
pub const DEFAULT_MAX_SUBMISSION_BYTES: u64 = 16 << 20;
/// Default `max_pending_per_user`.
pub const DEFAULT_MAX_PENDING_PER_USER: u32 = 10_000;
/// Default `max_log_mib`: 1 GiB per task log.
pub const DEFAULT_MAX_LOG_MIB: u64 = 1024;

/// What one submission, user or task may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Most bytes of one submission after array expansion: the job spec as JSON times its
    /// members (default 16 MiB; 64 KiB..=1 GiB).
    pub max_submission_bytes: u64,
    /// Most pending jobs of one user (default 10,000; 1..=10,000,000).
    pub max_pending_per_user: u32,
    /// Highest tier a user may ask for, per queue (`"*"` for every other queue; a queue in
    /// neither gets 0). Default `{"*" = 0}`.
    pub max_user_tier: BTreeMap<String, i32>,
    /// Most MiB of one task's log (default 1024; 1..=1048576).
    pub max_log_mib: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_submission_bytes: DEFAULT_MAX_SUBMISSION_BYTES,
            max_pending_per_user: DEFAULT_MAX_PENDING_PER_USER,
            max_user_tier: BTreeMap::from([("*".to_string(), 0)]),
            max_log_mib: DEFAULT_MAX_LOG_MIB,
        }
    }
}

impl LimitsConfig {
    /// Range checks, as messages naming the key.
    pub fn check(&self) -> Result<(), String> {
        if !(64 << 10..=1 << 30).contains(&self.max_submission_bytes) {
            return Err("limits.max_submission_bytes must be 65536..=1073741824".into());
        }
        if !(1..=10_000_000).contains(&self.max_pending_per_user) {
            return Err("limits.max_pending_per_user must be 1..=10000000".into());
        }
        if !(1..=1 << 20).contains(&self.max_log_mib) {
            return Err("limits.max_log_mib must be 1..=1048576".into());
        }
        if let Some(q) = self
            .max_user_tier
            .keys()
            .find(|q| q.is_empty() || q.len() > gantry_api::model::MAX_STRING)
        {
            return Err(format!(
                "limits.max_user_tier: `{}` is not a queue name (1..=256 bytes)",
                q.chars().take(64).collect::<String>()
            ));
        }
        Ok(())
    }

    /// The size limit of one task's log, bytes.
    pub fn max_log_bytes(&self) -> u64 {
        self.max_log_mib << 20
    }

    /// The highest tier a user may ask for in `queue`.
    pub fn user_tier_limit(&self, queue: &str) -> i32 {
        self.max_user_tier
            .get(queue)
            .or_else(|| self.max_user_tier.get("*"))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_check_and_queues_fall_back_to_the_star_then_zero() {
        let mut l = LimitsConfig::default();
        l.check().unwrap();
        assert_eq!(l.user_tier_limit("default"), 0);
        l.max_user_tier.insert("urgent".into(), 5);
        assert_eq!(l.user_tier_limit("urgent"), 5);
        l.max_user_tier.insert("*".into(), 2);
        assert_eq!(l.user_tier_limit("other"), 2);
        l.max_user_tier.clear();
        assert_eq!(l.user_tier_limit("other"), 0);
        l.max_pending_per_user = 0;
        assert!(l.check().unwrap_err().contains("max_pending_per_user"));
        l.max_pending_per_user = 1;
        l.max_submission_bytes = 10;
        assert!(l.check().unwrap_err().contains("max_submission_bytes"));
        l.max_submission_bytes = DEFAULT_MAX_SUBMISSION_BYTES;
        assert_eq!(l.max_log_bytes(), 1 << 30);
        l.max_log_mib = 0;
        assert!(l.check().unwrap_err().contains("max_log_mib"));
    }

    #[test]
    fn a_table_of_tiers_parses() {
        let l: LimitsConfig =
            toml::from_str("max_user_tier = {\"*\" = 0, urgent = 5}\nmax_pending_per_user = 3\n")
                .unwrap();
        assert_eq!(
            (l.user_tier_limit("urgent"), l.max_pending_per_user),
            (5, 3)
        );
        assert_eq!(l.max_submission_bytes, DEFAULT_MAX_SUBMISSION_BYTES);
    }
}
