//! The ledger: GPU use per quota account (a queue's totals, or one flavor of it:
//! see `quotas`), counting running jobs plus what a plugin has tentatively added this
//! call, and the Kueue test of one more job against it.
//!
//! The arithmetic, per account `q` (its peers are the accounts of the same flavor, or
//! the totals, of the other queues of its cohort), in milli-GPU:
//! * `borrowed(q) = max(0, used(q) - nominal(q))`
//! * `lendable(q) = min(max(0, nominal(q) - used(q)), lending_limit(q))` (limit
//!   defaults to nominal)
//! * what the cohort can still lend to `q`:
//!   `cohort_free(q) = sum over peers p of lendable(p) - sum over all members m
//!   (q included) of borrowed(m)`, floored at 0 (a borrower's loan comes out of the
//!   peers' lendable quota, whoever it borrowed from)
//! * a job needing `d` fits nominal when `used(q) + d <= nominal(q)`; otherwise it
//!   borrows `used(q) + d - nominal(q)` in total, which must be within the borrowing
//!   limit, and its increase over today's loan must be within `cohort_free(q)`.
//!
//! Owns: that arithmetic. Does not own which account a job or a queue's use is
//! charged to (`charge`), job order, or the messages' wording (`message`).

use crate::quotas::Quotas;

/// Use per account, indexed like [`Quotas::account`].
#[derive(Debug, Clone)]
pub struct Ledger<'a> {
    quotas: &'a Quotas,
    used: Vec<u64>,
    /// Part of `used` added this call by [`Ledger::reserve`] (for messages).
    reserved: Vec<u64>,
}

/// Where one more job would leave its account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It fits the account's unused nominal quota.
    WithinNominal,
    /// It fits by borrowing; `borrow_after` is the account's whole loan after it.
    Borrows {
        /// Milli-GPU above nominal after the job.
        borrow_after: u64,
    },
    /// It does not fit nominal and the account's queue has no cohort.
    NoCohort,
    /// Its loan would exceed the borrowing limit.
    OverBorrowingLimit {
        /// Milli-GPU above nominal after the job.
        borrow_after: u64,
    },
    /// The cohort cannot lend enough.
    CohortShort {
        /// Milli-GPU more than the account borrows today.
        extra: u64,
    },
}

/// The test of one job against its account, with every number a message needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assessment {
    /// Account index.
    pub account: usize,
    /// The job's GPU demand, milli.
    pub need: u64,
    /// The account's use before the job, milli.
    pub used: u64,
    /// Part of `used` admitted earlier in this call.
    pub reserved: u64,
    /// Nominal quota, milli.
    pub nominal: u64,
    /// Loan before the job, milli.
    pub borrowed: u64,
    /// Borrowing limit, milli (`None`: no limit).
    pub borrowing_limit: Option<u64>,
    /// What the cohort can still lend the account, milli.
    pub cohort_free: u64,
    /// The verdict.
    pub outcome: Outcome,
}

impl Assessment {
    /// Whether the job fits (within nominal or by borrowing).
    pub fn fits(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::WithinNominal | Outcome::Borrows { .. }
        )
    }

    /// Whether the job would make its account borrow (fits or not).
    pub fn borrows(&self) -> bool {
        !matches!(self.outcome, Outcome::WithinNominal)
    }
}

impl<'a> Ledger<'a> {
    /// Nothing in use.
    pub fn new(quotas: &'a Quotas) -> Self {
        Self {
            quotas,
            used: vec![0; quotas.account_count()],
            reserved: vec![0; quotas.account_count()],
        }
    }

    /// The quotas it counts against.
    pub fn quotas(&self) -> &'a Quotas {
        self.quotas
    }

    /// Adds use to account `index`.
    pub fn add(&mut self, index: usize, milli: u64) {
        if let Some(u) = self.used.get_mut(index) {
            *u = u.saturating_add(milli);
        }
    }

    /// Adds use to account `index` for a job admitted in this call.
    pub fn reserve(&mut self, index: usize, milli: u64) {
        self.add(index, milli);
        if let Some(r) = self.reserved.get_mut(index) {
            *r = r.saturating_add(milli);
        }
    }

    /// Removes use from account `index` (a victim about to be evicted).
    pub fn sub(&mut self, index: usize, milli: u64) {
        if let Some(u) = self.used.get_mut(index) {
            *u = u.saturating_sub(milli);
        }
    }

    /// Use of account `index`, milli.
    pub fn used(&self, index: usize) -> u64 {
        self.used.get(index).copied().unwrap_or(0)
    }

    /// Part of the use of `index` added with [`Ledger::reserve`].
    pub fn reserved(&self, index: usize) -> u64 {
        self.reserved.get(index).copied().unwrap_or(0)
    }

    fn nominal(&self, index: usize) -> u64 {
        self.quotas.account(index).map_or(0, |q| q.nominal_milli)
    }

    /// Use above nominal, milli.
    pub fn borrowed(&self, index: usize) -> u64 {
        self.used(index).saturating_sub(self.nominal(index))
    }

    /// Whether the account uses more than its nominal quota.
    pub fn is_borrowing(&self, index: usize) -> bool {
        self.borrowed(index) > 0
    }

    /// Unused nominal quota peers may borrow, milli.
    pub fn lendable(&self, index: usize) -> u64 {
        let Some(q) = self.quotas.account(index) else {
            return 0;
        };
        q.nominal_milli
            .saturating_sub(self.used(index))
            .min(q.lending_cap_milli())
    }

    /// What the cohort can still lend account `index`, milli (0 without a cohort).
    pub fn cohort_free(&self, index: usize) -> u64 {
        if self.quotas.cohort_of(index).is_none() {
            return 0;
        }
        let peers = self.quotas.cohort_peers(index);
        let (lend, loans) = peers.fold((0i128, 0i128), |(l, b), p| {
            (
                l + i128::from(self.lendable(p)),
                b + i128::from(self.borrowed(p)),
            )
        });
        let free = lend - loans - i128::from(self.borrowed(index));
        u64::try_from(free.max(0)).unwrap_or(u64::MAX)
    }

    /// Tests a job needing `need` milli against account `index`.
    pub fn assess(&self, index: usize, need: u64) -> Assessment {
        let q = self.quotas.account(index);
        let (nominal, borrowing_limit) =
            q.map_or((0, None), |q| (q.nominal_milli, q.borrowing_limit_milli));
        let cohort = self.quotas.cohort_of(index).is_some();
        let used = self.used(index);
        let borrowed = self.borrowed(index);
        let cohort_free = self.cohort_free(index);
        let after = used.saturating_add(need);
        let outcome = if after <= nominal {
            Outcome::WithinNominal
        } else if !cohort {
            Outcome::NoCohort
        } else {
            let borrow_after = after - nominal;
            let extra = borrow_after - borrowed;
            if borrowing_limit.is_some_and(|l| borrow_after > l) {
                Outcome::OverBorrowingLimit { borrow_after }
            } else if extra > cohort_free {
                Outcome::CohortShort { extra }
            } else {
                Outcome::Borrows { borrow_after }
            }
        };
        Assessment {
            account: index,
            need,
            used,
            reserved: self.reserved(index),
            nominal,
            borrowed,
            borrowing_limit,
            cohort_free,
            outcome,
        }
    }
}
