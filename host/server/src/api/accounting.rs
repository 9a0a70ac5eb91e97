//! `GET /v1/accounting?user=&account=&since=&until=&job=&limit=`: per-task usage records
//! (one per ended task process, oldest end first) and totals per user and per account
//! (GPU-hours, CPU-hours, records, jobs) over every matching record.
//!
//! `since` and `until` select by end time: ms since the Unix epoch or RFC 3339
//! (`2025-01-31T12:00:00Z`, `...+02:00`). `limit` (default 1000, at most 100000) caps the
//! records returned (the newest are kept, `truncated` says so); totals always cover all.
//!
//! Authorization: a `user` token sees only its own records (asking for another user is
//! 403 naming `user`); operators and admins see everyone's.
//!
//! Owns: the query, the report and its totals (its OpenAPI schema is generated from
//! `gantry_api::accounting::AccountingReport`). Does not own
//! the records (`scheduler::accounting`, `store::accounting`).

use super::blocking;
use super::error::ApiError;
use crate::auth::{Caller, Denied};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
pub use gantry_api::accounting::{AccountingReport, Totals};
use gantry_config::auth::Role;
use gantry_controller::Admin;
use gantry_store::{AccountingFilter, AccountingRecord};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// Records returned when the query gives no `limit`.
const DEFAULT_LIMIT: usize = 1000;
/// Most records one answer holds.
const MAX_LIMIT: usize = 100_000;

/// The query string.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AccountingQuery {
    user: Option<String>,
    account: Option<String>,
    since: Option<String>,
    until: Option<String>,
    job: Option<u64>,
    limit: Option<usize>,
}

/// Running sums for one name.
#[derive(Default)]
struct Sum {
    gpu_milli_seconds: u128,
    gpu_used_milli_seconds: u128,
    gpu_sampled_milli_seconds: u128,
    cpu_seconds: f64,
    records: u64,
    jobs: BTreeSet<u64>,
}

impl Sum {
    fn add(&mut self, r: &AccountingRecord) {
        self.gpu_milli_seconds += u128::from(r.gpu_milli_seconds);
        if let Some(used) = r.gpu_used_milli_seconds {
            self.gpu_used_milli_seconds += u128::from(used);
            self.gpu_sampled_milli_seconds += u128::from(r.gpu_milli_seconds);
        }
        self.cpu_seconds += r.cpu_seconds;
        self.records += 1;
        self.jobs.insert(r.job_id);
    }

    fn totals(&self, name: String) -> Totals {
        let gpu_seconds = self.gpu_milli_seconds as f64 / 1000.0;
        Totals {
            name,
            gpu_seconds,
            gpu_hours: gpu_seconds / 3600.0,
            gpu_used_hours: self.gpu_used_milli_seconds as f64 / 3_600_000.0,
            gpu_hours_sampled: self.gpu_sampled_milli_seconds as f64 / 3_600_000.0,
            cpu_seconds: self.cpu_seconds,
            cpu_hours: self.cpu_seconds / 3600.0,
            records: self.records,
            jobs: self.jobs.len() as u64,
        }
    }
}

/// The report of `records` (oldest end first), keeping the newest `limit` of them.
pub fn report(mut records: Vec<AccountingRecord>, limit: usize) -> AccountingReport {
    let mut all = Sum::default();
    let mut users: BTreeMap<&str, Sum> = BTreeMap::new();
    let mut accounts: BTreeMap<&str, Sum> = BTreeMap::new();
    for r in &records {
        all.add(r);
        users.entry(&r.user).or_default().add(r);
        accounts.entry(&r.account).or_default().add(r);
    }
    let table = |m: BTreeMap<&str, Sum>| -> Vec<Totals> {
        m.into_iter()
            .map(|(n, s)| s.totals(n.to_string()))
            .collect()
    };
    let (total, users, accounts) = (all.totals(String::new()), table(users), table(accounts));
    let truncated = records.len() > limit;
    if truncated {
        records.drain(..records.len() - limit);
    }
    AccountingReport {
        records,
        truncated,
        total,
        users,
        accounts,
    }
}

/// Parses ms since the Unix epoch, or an RFC 3339 time (`2025-01-31T12:00:00.5Z`,
/// `2025-01-31T12:00:00+02:00`; calendar arithmetic by `jiff`).
pub fn parse_time_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| format!("`{t}` is too large"));
    }
    let bad = || format!("`{t}` is neither ms since the Unix epoch nor an RFC 3339 time");
    // RFC 3339 wants the offset as `Z` or `±HH:MM`; jiff also reads ISO 8601's other forms.
    let b = t.as_bytes();
    let zulu = matches!(b.last(), Some(b'Z' | b'z'));
    let colon_offset =
        b.len() >= 6 && matches!(b[b.len() - 6], b'+' | b'-') && b[b.len() - 3] == b':';
    if b.len() < 20 || !(zulu || colon_offset) {
        return Err(bad());
    }
    let at: jiff::Timestamp = t.parse().map_err(|_| bad())?;
    u64::try_from(at.as_millisecond()).map_err(|_| format!("`{t}` is before 1970"))
}

/// The filter of `q` for `caller`: a `user` token is held to its own records.
fn filter(q: AccountingQuery, caller: &Caller) -> Result<AccountingFilter, ApiError> {
    let time = |field: &'static str, v: Option<String>| {
        v.map(|s| parse_time_ms(&s))
            .transpose()
            .map_err(|m| ApiError::field("invalid-field", field, m))
    };
    let mut f = AccountingFilter {
        user: q.user.filter(|u| !u.is_empty()),
        account: q.account.filter(|a| !a.is_empty()),
        job: q.job,
        since_ms: time("since", q.since)?,
        until_ms: time("until", q.until)?,
    };
    let (role, own) = caller.role_and_user();
    if role < Role::Operator {
        match &f.user {
            Some(u) if u != own => {
                return Err(Denied {
                    field: Some("user"),
                    message: format!(
                        "user {own} may read only their own accounting, not {u}'s; an operator may read anyone's"
                    ),
                }
                .into());
            }
            _ => f.user = Some(own.to_owned()),
        }
    }
    Ok(f)
}

pub(super) async fn list(
    State(s): State<Admin>,
    caller: Caller,
    q: Result<Query<AccountingQuery>, QueryRejection>,
) -> Result<Json<AccountingReport>, ApiError> {
    let q = q
        .map(|Query(v)| v)
        .map_err(|e| ApiError::field("invalid-query", "query", e.body_text()))?;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(ApiError::field(
            "invalid-field",
            "limit",
            format!("at most {MAX_LIMIT}"),
        ));
    }
    let f = filter(q, &caller)?;
    let records = blocking(move || s.accounting(&f))
        .await?
        .map_err(ApiError::internal)?;
    Ok(Json(report(records, limit)))
}

/// The OpenAPI query parameters of `GET /v1/accounting`.
pub(super) fn query_parameters() -> Vec<Value> {
    let p = |name: &str, schema: Value, description: &str| json!({"name": name, "in": "query", "required": false, "schema": schema, "description": description});
    let time = json!({"type": "string"});
    vec![
        p(
            "user",
            json!({"type": "string"}),
            "only this user's records (a user token: its own only)",
        ),
        p(
            "account",
            json!({"type": "string"}),
            "only this account's records",
        ),
        p(
            "since",
            time.clone(),
            "ended at or after: ms since the Unix epoch or RFC 3339",
        ),
        p(
            "until",
            time,
            "ended before: ms since the Unix epoch or RFC 3339",
        ),
        p(
            "job",
            json!({"type": "integer", "minimum": 0}),
            "only this job's records",
        ),
        p(
            "limit",
            json!({"type": "integer", "minimum": 0, "maximum": MAX_LIMIT}),
            "most records returned (default 1000); totals cover all",
        ),
    ]
}

#[cfg(test)]
mod tests;
