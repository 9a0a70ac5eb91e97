//! The `[retention]` section of the configuration: how long an ended job stays in the
//! scheduler's memory, how long its record, events and logs stay on disk, how long
//! accounting records are kept, and how the deleting is paced.
//!
//! - `min_job_age_s` (default 300, SLURM's `MinJobAge`): an ended job leaves memory this
//!   long after it ended; it is then read from the history store (`gantry job ID`,
//!   `GET /v1/jobs` and the rest find it as before).
//! - `job_history_days` (default 365): an ended job's record, events and decisions are
//!   deleted this many days after it ended.
//! - `log_days` (default 90): a job's directory (its task logs) is deleted this many days
//!   after the job ended; the record stays until `job_history_days`.
//! - `accounting_days` (default 1825, five years): accounting records are what bills are
//!   made of, so they outlive the jobs.
//! - `gc_interval_s` (default 3600): how often the background collector runs; it deletes
//!   in batches of `gc_batch` (default 500), releasing every lock between batches.
//! - `store_cache_mib` (default 16): sled's page cache; the store's memory does not grow
//!   with its size past this (the kernel's page cache still holds the files).
//!
//! Owns: these settings, their defaults and range checks. Does not own the deleting
//! (`scheduler::retention`) or the store (`store`).

use serde::{Deserialize, Serialize};

/// How long jobs and what they leave behind are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Seconds an ended job stays in memory (default 300; 0..=604800).
    pub min_job_age_s: u64,
    /// Days an ended job's record, events and decisions are kept (default 365; 1..=36500).
    pub job_history_days: u64,
    /// Days a job's logs are kept after it ended (default 90; 1..=36500).
    pub log_days: u64,
    /// Days accounting records are kept (default 1825; 1..=36500).
    pub accounting_days: u64,
    /// Seconds between background collections (default 3600; 10..=604800).
    pub gc_interval_s: u64,
    /// Records deleted per batch (default 500; 1..=100000).
    pub gc_batch: usize,
    /// MiB of the store's page cache (default 16; 4..=65536).
    pub store_cache_mib: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            min_job_age_s: 300,
            job_history_days: 365,
            log_days: 90,
            accounting_days: 1825,
            gc_interval_s: 3600,
            gc_batch: 500,
            store_cache_mib: gantry_store::DEFAULT_CACHE_MIB,
        }
    }
}

/// Milliseconds in a day.
pub const DAY_MS: u64 = 24 * 3600 * 1000;

impl RetentionConfig {
    /// Range checks, as messages naming the key.
    pub fn check(&self) -> Result<(), String> {
        let days = 1..=36_500;
        let checks = [
            (
                "min_job_age_s",
                (0..=604_800).contains(&self.min_job_age_s),
                "0..=604800",
            ),
            (
                "job_history_days",
                days.contains(&self.job_history_days),
                "1..=36500",
            ),
            ("log_days", days.contains(&self.log_days), "1..=36500"),
            (
                "accounting_days",
                days.contains(&self.accounting_days),
                "1..=36500",
            ),
            (
                "gc_interval_s",
                (10..=604_800).contains(&self.gc_interval_s),
                "10..=604800",
            ),
            (
                "gc_batch",
                (1..=100_000).contains(&self.gc_batch),
                "1..=100000",
            ),
            (
                "store_cache_mib",
                (4..=65_536).contains(&self.store_cache_mib),
                "4..=65536",
            ),
        ];
        match checks.iter().find(|(_, ok, _)| !ok) {
            Some((key, _, range)) => Err(format!("retention.{key} must be {range}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_check_and_an_out_of_range_key_is_named() {
        RetentionConfig::default().check().unwrap();
        let r: RetentionConfig = toml::from_str("min_job_age_s = 0\nlog_days = 7\n").unwrap();
        assert_eq!(
            (r.min_job_age_s, r.log_days, r.job_history_days),
            (0, 7, 365)
        );
        let bad = RetentionConfig {
            job_history_days: 0,
            ..RetentionConfig::default()
        };
        assert_eq!(
            bad.check().unwrap_err(),
            "retention.job_history_days must be 1..=36500"
        );
        assert!(toml::from_str::<RetentionConfig>("keep = 1").is_err());
    }
}
