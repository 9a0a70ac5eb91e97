//! `gantry-quota-core`: the Kueue-style GPU quota arithmetic that the `quota`
//! (admission) and `reclaim` (preemption) plugins share, so both read the same
//! `queues` config the same way and agree on who is borrowing.
//!
//! A queue has a nominal quota, either in total over all GPU models or per GPU model
//! ("flavors", Kueue's resource flavors). Each total or flavor is an **account**;
//! the accounts of one cohort and one flavor lend each other their unused nominal
//! quota (up to each lender's lending limit), and an account borrows at most its
//! borrowing limit. All quantities are GPUs in config (fractions allowed, rounded to
//! the nearest milli-GPU) and milli-GPU inside.
//!
//! Owns: the config schema of one queue ([`config`], errors in [`error`]), the set of
//! queues and accounts ([`quotas`]), which account a job or a queue's use is charged
//! to ([`charge`]), the ledger of use per account and the admission test of one job
//! against it ([`ledger`]), and the human messages with numbers ([`message`]). Does
//! not own job order, holds, evictions or anything about nodes (the plugins do that).
#![deny(missing_docs)]

pub mod charge;
pub mod config;
pub mod error;
pub mod ledger;
pub mod message;
pub mod quotas;

pub use charge::{Charge, Unpinned, job_charge, ledger_from_cycle};
pub use config::{Unlisted, gpus_to_milli};
pub use error::ConfigError;
pub use ledger::{Assessment, Ledger, Outcome};
pub use quotas::{Account, QueueQuota, Quotas};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_flavors;
