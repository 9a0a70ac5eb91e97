//! The fair-share factor from the host's decayed usage (`ctx.account_usage`,
//! `ctx.user_usage`, GPU-seconds already decayed by the host; never re-decayed here)
//! against the configured shares, in one of two modes:
//!
//! * classic: `F = 2^(−U/S)`, U the association's share of all usage, S its normalised
//!   share (an account's shares over all accounts' shares; a listed user's shares over
//!   its siblings' shares, times its account's S);
//! * Fair Tree (SLURM's): accounts ranked by level fair-share `S/U` among siblings,
//!   then users within each account (children of tied accounts ranked together);
//!   `F = rank / leaves`, the most under-served leaf getting 1.
//!
//! Owns: the association tree arithmetic for one cycle and its explanation. Does not
//! own the other factors or the weighting (`score`).

use crate::config::Config;
use crate::factors::gpu_hours;
use gantry_sdk::{Cycle, Usage};
use std::collections::BTreeMap;

/// A job's fair-share factor in [0, 1] and a human explanation with the numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// The factor.
    pub factor: f64,
    /// Why, e.g. "account vision used 40.0 GPU-h = 100% of usage, share 50%".
    pub why: String,
}

/// Decayed usage by name, and the sum over all names.
struct Usages<'a> {
    by_name: BTreeMap<&'a str, f64>,
    total: f64,
}

impl<'a> Usages<'a> {
    fn new(ctx: &'a Cycle, list: &[Usage]) -> Self {
        let mut by_name: BTreeMap<&str, f64> = BTreeMap::new();
        for u in list {
            let v = if u.gpu_seconds.is_finite() {
                u.gpu_seconds.max(0.0)
            } else {
                0.0
            };
            *by_name.entry(ctx.text(u.who)).or_default() += v;
        }
        let total = by_name.values().sum();
        Self { by_name, total }
    }

    fn of(&self, name: &str) -> f64 {
        self.by_name.get(name).copied().unwrap_or(0.0)
    }
}

/// `part / whole`, 0 when the whole is 0.
fn norm(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

/// Classic factor `2^(−U/S)`; 0 for an association without shares.
pub fn classic_factor(usage_norm: f64, share_norm: f64) -> f64 {
    if share_norm > 0.0 {
        (-usage_norm / share_norm).exp2()
    } else {
        0.0
    }
}

/// Level fair-share `S/U` among siblings: 0 without shares, infinite without usage.
pub fn level_fs(share_norm: f64, usage_norm: f64) -> f64 {
    if share_norm <= 0.0 {
        0.0
    } else if usage_norm <= 0.0 {
        f64::INFINITY
    } else {
        share_norm / usage_norm
    }
}

fn pct(x: f64) -> String {
    if x * 100.0 >= 10.0 || x == 0.0 {
        format!("{:.0}%", x * 100.0)
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

fn lfs_text(v: f64) -> String {
    if v.is_infinite() {
        "inf (no usage)".into()
    } else {
        format!("{v:.2}")
    }
}

/// One leaf of the Fair Tree: a listed user, or a whole account that lists no users.
struct Ranked {
    rank: u32,
    account_lfs: f64,
    leaf_lfs: f64,
}

/// Fair Tree ranks by (account, user); `None` user for an account without users.
type Ranks<'a> = BTreeMap<(&'a str, Option<&'a str>), Ranked>;

/// Fair-share for one cycle.
pub struct FairShare<'a> {
    config: &'a Config,
    accounts: Usages<'a>,
    users: Usages<'a>,
    share_sum: f64,
    /// Number of leaves and their Fair Tree ranks, when in Fair Tree mode.
    tree: Option<(u32, Ranks<'a>)>,
}

impl<'a> FairShare<'a> {
    /// Reads this cycle's usage; ranks the tree when `config.fair_tree`.
    pub fn new(config: &'a Config, ctx: &'a Cycle) -> Self {
        let mut fs = Self {
            config,
            accounts: Usages::new(ctx, &ctx.account_usage),
            users: Usages::new(ctx, &ctx.user_usage),
            share_sum: config.accounts.values().map(|a| a.shares).sum(),
            tree: None,
        };
        if config.fair_tree {
            fs.tree = Some(fs.rank_tree());
        }
        fs
    }

    /// The factor of a job of `user` charged to `account`.
    pub fn of(&self, account: &str, user: &str) -> Share {
        let Some(a) = self.config.accounts.get(account) else {
            return Share {
                factor: 0.0,
                why: format!("account {account} has no shares configured"),
            };
        };
        let leaf = match &a.users {
            None => None,
            Some(users) if users.contains_key(user) => Some(user),
            Some(_) => {
                return Share {
                    factor: 0.0,
                    why: format!("user {user} has no shares in account {account}"),
                };
            }
        };
        match &self.tree {
            Some((leaves, ranks)) => self.tree_share(*leaves, ranks, account, leaf),
            None => self.classic_share(account, leaf),
        }
    }

    fn account_share_norm(&self, account: &str) -> f64 {
        let shares = self.config.accounts.get(account).map_or(0.0, |a| a.shares);
        norm(shares, self.share_sum)
    }

    fn classic_share(&self, account: &str, user: Option<&str>) -> Share {
        let s_account = self.account_share_norm(account);
        let Some(user) = user else {
            let used = self.accounts.of(account);
            let u = norm(used, self.accounts.total);
            return Share {
                factor: classic_factor(u, s_account),
                why: format!(
                    "account {account} used {} GPU-h = {} of usage, share {}",
                    gpu_hours(used),
                    pct(u),
                    pct(s_account)
                ),
            };
        };
        let siblings = self
            .config
            .accounts
            .get(account)
            .and_then(|a| a.users.as_ref());
        let mine = siblings.and_then(|m| m.get(user)).copied().unwrap_or(0.0);
        let sum: f64 = siblings.map_or(0.0, |m| m.values().sum());
        let s = s_account * norm(mine, sum);
        let used = self.users.of(user);
        let u = norm(used, self.users.total);
        Share {
            factor: classic_factor(u, s),
            why: format!(
                "user {user} of account {account} used {} GPU-h = {} of usage, share {} ({} of account share {})",
                gpu_hours(used),
                pct(u),
                pct(s),
                pct(norm(mine, sum)),
                pct(s_account)
            ),
        }
    }

    fn tree_share(
        &self,
        leaves: u32,
        ranks: &Ranks<'_>,
        account: &str,
        user: Option<&str>,
    ) -> Share {
        let Some(r) = ranks.get(&(account, user)) else {
            return Share {
                factor: 0.0,
                why: format!("account {account} is not in the fair tree"),
            };
        };
        let used = self.accounts.of(account);
        let mut why = format!(
            "fair tree rank {} of {leaves}: account {account} level fair-share {} (share {}, used {} GPU-h)",
            r.rank,
            lfs_text(r.account_lfs),
            pct(self.account_share_norm(account)),
            gpu_hours(used)
        );
        if let Some(user) = user {
            why.push_str(&format!(
                ", user {user} level fair-share {} (used {} GPU-h)",
                lfs_text(r.leaf_lfs),
                gpu_hours(self.users.of(user))
            ));
        }
        Share {
            factor: norm(f64::from(r.rank), f64::from(leaves)),
            why,
        }
    }

    /// Leaves of one account with their level fair-share among siblings.
    fn children(&self, account: &'a str) -> Vec<(&'a str, Option<&'a str>, f64)> {
        let Some(a) = self.config.accounts.get(account) else {
            return Vec::new();
        };
        let Some(users) = &a.users else {
            // The account is a leaf: alone among its siblings, S = 1 and U = 1 (or 0).
            let u = if self.accounts.of(account) > 0.0 {
                1.0
            } else {
                0.0
            };
            return vec![(account, None, level_fs(1.0, u))];
        };
        let share_sum: f64 = users.values().sum();
        let usage_sum: f64 = users.keys().map(|u| self.users.of(u)).sum();
        users
            .iter()
            .map(|(name, &shares)| {
                let lfs = level_fs(
                    norm(shares, share_sum),
                    norm(self.users.of(name), usage_sum),
                );
                (account, Some(name.as_str()), lfs)
            })
            .collect()
    }

    fn rank_tree(&self) -> (u32, Ranks<'a>) {
        let config = self.config;
        let usage_sum: f64 = config.accounts.keys().map(|a| self.accounts.of(a)).sum();
        let mut accounts: Vec<(&'a str, f64)> = config
            .accounts
            .iter()
            .map(|(name, a)| {
                let s = norm(a.shares, self.share_sum);
                let u = norm(self.accounts.of(name), usage_sum);
                (name.as_str(), level_fs(s, u))
            })
            .collect();
        accounts.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let leaves: u32 = config
            .accounts
            .values()
            .map(|a| a.users.as_ref().map_or(1, |u| u.len() as u32))
            .sum();
        let mut ranks = BTreeMap::new();
        let mut next = leaves;
        // Siblings tied on level fair-share are ranked together: their children merge.
        for group in accounts.chunk_by(|a, b| a.1 == b.1) {
            let mut kids: Vec<(&'a str, Option<&'a str>, f64, f64)> = group
                .iter()
                .flat_map(|&(name, account_lfs)| {
                    self.children(name)
                        .into_iter()
                        .map(move |(a, u, lfs)| (a, u, lfs, account_lfs))
                })
                .collect();
            kids.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
            let mut prev: Option<(f64, u32)> = None;
            for (account, user, leaf_lfs, account_lfs) in kids {
                let rank = match prev {
                    Some((lfs, r)) if lfs == leaf_lfs => r,
                    _ => next,
                };
                prev = Some((leaf_lfs, rank));
                next = next.saturating_sub(1);
                ranks.insert(
                    (account, user),
                    Ranked {
                        rank,
                        account_lfs,
                        leaf_lfs,
                    },
                );
            }
        }
        (leaves, ranks)
    }
}
