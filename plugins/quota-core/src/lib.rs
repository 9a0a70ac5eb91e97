//! `gantry-quota-core`: the Kueue-style GPU quota arithmetic that the `quota`
//! (admission) and `reclaim` (preemption) plugins share, so both read the same
//! `queues` config the same way and agree on who is borrowing.
//!
//! A queue has a nominal quota; queues of one cohort lend each other their unused
//! nominal quota (up to each lender's lending limit), and a queue borrows at most its
//! borrowing limit. All quantities are GPUs in config (fractions allowed, rounded to
//! the nearest milli-GPU) and milli-GPU inside.
//!
//! Owns: the config schema of one queue ([`config`]), the ledger of use per queue and
//! the admission test of one job against it ([`ledger`]), and the human messages with
//! numbers ([`message`]). Does not own: job order, holds, evictions or anything about
//! nodes (the plugins do that).
#![deny(missing_docs)]

pub mod config;
pub mod ledger;
pub mod message;

pub use config::{ConfigError, QueueQuota, Quotas, Unlisted, gpus_to_milli};
pub use ledger::{Assessment, Ledger, Outcome};

#[cfg(test)]
mod tests;
