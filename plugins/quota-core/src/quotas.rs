//! All configured queues and their quota **accounts**: a queue with totals has one
//! account (all GPU models together); a queue with `flavors` has one account per GPU
//! model. Accounts are what the ledger counts; the accounts of one cohort and one
//! flavor lend to each other.
//!
//! Owns: assembling [`Quotas`] from the `queues` map (with the check that a cohort
//! does not mix totals and flavors) and the lookups: queue by name, account by queue
//! and model, cohort peers of an account, the most an account can ever hold. Does not
//! own parsing one entry (`config`) or use (`ledger`).

use crate::config::{ConfigError, Limits, parse_queue};
use std::collections::BTreeMap;
use std::ops::Range;

/// One quota account: a queue's totals, or one flavor (GPU model) of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Index of its queue.
    pub queue: usize,
    /// The GPU model of a flavor; `None` for a queue's totals over all models.
    pub flavor: Option<String>,
    /// Nominal quota, milli.
    pub nominal_milli: u64,
    /// Most it may use above nominal; `None` is no limit.
    pub borrowing_limit_milli: Option<u64>,
    /// Most of its unused nominal quota others may borrow; `None` is all of it.
    pub lending_limit_milli: Option<u64>,
}

impl Account {
    /// The lending limit, `nominal` when unset.
    pub fn lending_cap_milli(&self) -> u64 {
        self.lending_limit_milli.unwrap_or(self.nominal_milli)
    }
}

/// One configured queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueQuota {
    /// Queue name.
    pub name: String,
    /// Its cohort; `None`: it neither borrows nor lends.
    pub cohort: Option<String>,
    /// Whether it has quotas per GPU model (`flavors`).
    pub flavored: bool,
    /// Its accounts' indices: one (totals) or one per flavor in model name order.
    pub accounts: Range<usize>,
}

/// All configured queues in name order, and their accounts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    queues: Vec<QueueQuota>,
    accounts: Vec<Account>,
    by_name: BTreeMap<String, usize>,
}

impl Quotas {
    /// Validates the `queues` map of a plugin's config.
    pub fn from_map(map: &BTreeMap<String, serde_json::Value>) -> Result<Self, ConfigError> {
        let mut out = Self::default();
        // cohort -> (first queue with totals, first queue with flavors)
        let mut kinds: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
        for (name, value) in map {
            let key = format!("queues.{name}");
            let spec = parse_queue(&key, name, value)?;
            if let Some(c) = &spec.cohort {
                let kind = kinds.entry(c.clone()).or_default();
                let slot = if spec.flavored {
                    &mut kind.1
                } else {
                    &mut kind.0
                };
                slot.get_or_insert_with(|| name.clone());
                if let (Some(t), Some(f)) = kind {
                    return Err(ConfigError::MixedCohort {
                        key,
                        cohort: c.clone(),
                        totals_queue: t.clone(),
                        flavored_queue: f.clone(),
                    });
                }
            }
            let queue = out.queues.len();
            let start = out.accounts.len();
            out.accounts
                .extend(spec.limits.into_iter().map(|l: Limits| Account {
                    queue,
                    flavor: l.flavor,
                    nominal_milli: l.nominal_milli,
                    borrowing_limit_milli: l.borrowing_limit_milli,
                    lending_limit_milli: l.lending_limit_milli,
                }));
            out.queues.push(QueueQuota {
                name: name.clone(),
                cohort: spec.cohort,
                flavored: spec.flavored,
                accounts: start..out.accounts.len(),
            });
            out.by_name.insert(name.clone(), queue);
        }
        Ok(out)
    }

    /// Whether no queue is configured.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Number of queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// The index of a queue by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The queue at `index` (indices come from [`Quotas::index`]).
    pub fn queue(&self, index: usize) -> Option<&QueueQuota> {
        self.queues.get(index)
    }

    /// All queues, in name order (index order).
    pub fn queues(&self) -> &[QueueQuota] {
        &self.queues
    }

    /// Number of accounts.
    pub fn account_count(&self) -> usize {
        self.accounts.len()
    }

    /// The account at `index`.
    pub fn account(&self, index: usize) -> Option<&Account> {
        self.accounts.get(index)
    }

    /// The queue an account belongs to.
    pub fn queue_of(&self, account: usize) -> Option<&QueueQuota> {
        self.account(account).and_then(|a| self.queue(a.queue))
    }

    /// The cohort of an account's queue.
    pub fn cohort_of(&self, account: usize) -> Option<&str> {
        self.queue_of(account).and_then(|q| q.cohort.as_deref())
    }

    /// Whether queue `index` has quotas per GPU model.
    pub fn is_flavored(&self, index: usize) -> bool {
        self.queue(index).is_some_and(|q| q.flavored)
    }

    /// The only account of a queue with totals (`None` for a flavored queue).
    pub fn totals_account(&self, index: usize) -> Option<usize> {
        self.queue(index)
            .filter(|q| !q.flavored)
            .map(|q| q.accounts.start)
    }

    /// The account of flavor `model` of a flavored queue (`None` when the queue has
    /// totals or no such flavor).
    pub fn flavor_account(&self, index: usize, model: &str) -> Option<usize> {
        let q = self.queue(index).filter(|q| q.flavored)?;
        q.accounts.clone().find(|&a| {
            self.account(a)
                .and_then(|x| x.flavor.as_deref())
                .is_some_and(|f| f == model)
        })
    }

    /// The account of queue `index` of the same kind as `account` (its totals, or
    /// the same flavor): where a job of that queue would be charged for it.
    pub fn counterpart(&self, account: usize, index: usize) -> Option<usize> {
        match self.account(account)?.flavor.as_deref() {
            None => self.totals_account(index),
            Some(model) => self.flavor_account(index, model),
        }
    }

    /// The GPU models of a flavored queue's flavors, in name order (empty for totals).
    pub fn flavor_names(&self, index: usize) -> Vec<&str> {
        let Some(q) = self.queue(index).filter(|q| q.flavored) else {
            return Vec::new();
        };
        q.accounts
            .clone()
            .filter_map(|a| self.account(a).and_then(|x| x.flavor.as_deref()))
            .collect()
    }

    /// Accounts that lend to and borrow from `account`: those of the same flavor (or
    /// totals) of the other queues of its queue's cohort (none without a cohort).
    pub fn cohort_peers(&self, account: usize) -> impl Iterator<Item = usize> + '_ {
        let own = self.account(account);
        let cohort = self.cohort_of(account);
        self.accounts
            .iter()
            .enumerate()
            .filter(move |(_, x)| {
                own.is_some_and(|o| o.queue != x.queue && o.flavor == x.flavor)
                    && cohort.is_some()
                    && self.queue(x.queue).and_then(|q| q.cohort.as_deref()) == cohort
            })
            .map(|(i, _)| i)
    }

    /// The most an account could ever hold: nominal plus what it could borrow if every
    /// peer were idle (the peers' lending limits, capped by its borrowing limit).
    pub fn max_ever_milli(&self, account: usize) -> u64 {
        let Some(a) = self.account(account) else {
            return 0;
        };
        let lendable: u64 = self
            .cohort_peers(account)
            .filter_map(|p| self.account(p))
            .map(Account::lending_cap_milli)
            .sum();
        let borrow = a
            .borrowing_limit_milli
            .map_or(lendable, |b| b.min(lendable));
        a.nominal_milli + borrow
    }
}
