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
//! Owns: the query, the report and its totals, the report's OpenAPI schema. Does not own
//! the records (`scheduler::accounting`, `store::accounting`).

use super::blocking;
use super::error::ApiError;
use crate::auth::{Caller, Denied, Role};
use crate::scheduler::Scheduler;
use crate::store::{AccountingFilter, AccountingRecord};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
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

/// Sums over a set of records.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// The user or account (empty for the grand total).
    pub name: String,
    /// GPU-seconds (milli-GPU-seconds / 1000).
    pub gpu_seconds: f64,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// CPU-seconds used.
    pub cpu_seconds: f64,
    /// CPU-hours used.
    pub cpu_hours: f64,
    /// Records (ended task processes).
    pub records: u64,
    /// Distinct jobs.
    pub jobs: u64,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountingReport {
    /// Matching records, oldest end first (the newest `limit` of them).
    pub records: Vec<AccountingRecord>,
    /// Whether records were left out by `limit`.
    pub truncated: bool,
    /// Over all matching records.
    pub total: Totals,
    /// Per user, by name.
    pub users: Vec<Totals>,
    /// Per account, by name.
    pub accounts: Vec<Totals>,
}

/// Running sums for one name.
#[derive(Default)]
struct Sum {
    gpu_milli_seconds: u128,
    cpu_seconds: f64,
    records: u64,
    jobs: BTreeSet<u64>,
}

impl Sum {
    fn add(&mut self, r: &AccountingRecord) {
        self.gpu_milli_seconds += u128::from(r.gpu_milli_seconds);
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

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses ms since the Unix epoch, or an RFC 3339 time (`2025-01-31T12:00:00.5Z`,
/// `2025-01-31T12:00:00+02:00`).
pub fn parse_time_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| format!("`{t}` is too large"));
    }
    let bad = || format!("`{t}` is neither ms since the Unix epoch nor an RFC 3339 time");
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad());
    }
    let num = |from: usize, to: usize| -> Result<i64, String> {
        let s = t.get(from..to).ok_or_else(bad)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let mut rest = &t[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let ms: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = ms.parse().map_err(|_| bad())?;
        rest = &frac[digits..];
    }
    let offset_s = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (num(t.len() - 5, t.len() - 3)?, num(t.len() - 2, t.len())?);
            let s = h * 3600 + m * 60;
            if *sign == b'+' { s } else { -s }
        }
        _ => return Err(bad()),
    };
    let days_in_month = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month[(month - 1) as usize]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    u64::try_from(secs * 1000 + millis).map_err(|_| format!("`{t}` is before 1970"))
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
    if let Caller::Token(id) = caller
        && id.role < Role::Operator
    {
        match &f.user {
            Some(u) if *u != id.user => {
                return Err(Denied {
                    field: Some("user"),
                    message: format!(
                        "user {} may read only their own accounting, not {u}'s; an operator may read anyone's",
                        id.user
                    ),
                }
                .into());
            }
            _ => f.user = Some(id.user.clone()),
        }
    }
    Ok(f)
}

pub(super) async fn list(
    State(s): State<Scheduler>,
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

/// The OpenAPI schema of [`AccountingReport`].
pub(super) fn report_schema() -> Value {
    let totals = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "gpu_seconds": {"type": "number"},
        "gpu_hours": {"type": "number"}, "cpu_seconds": {"type": "number"},
        "cpu_hours": {"type": "number"}, "records": {"type": "integer", "minimum": 0},
        "jobs": {"type": "integer", "minimum": 0},
    }});
    let int = json!({"type": "integer", "minimum": 0});
    let record = json!({"type": "object", "properties": {
        "job_id": int, "task_index": int, "run": int, "job_name": {"type": "string"},
        "user": {"type": "string"}, "account": {"type": "string"}, "queue": {"type": "string"},
        "node": {"type": "string"},
        "gpus": {"type": "array", "items": {"type": "object", "properties": {"index": int, "milli": int}}},
        "cpu_milli": int, "memory_mib": int, "start_ms": int, "end_ms": int,
        "gpu_milli_seconds": {"type": "integer", "minimum": 0, "description": "Σ milli-GPU × wall seconds"},
        "cpu_seconds": {"type": "number"}, "memory_peak_mib": int,
        "exit": {"description": "`{\"Exited\": code}`, `{\"Signaled\": signal}` or `\"Lost\"`"},
        "oom_killed": {"type": "boolean"},
    }});
    json!({"type": "object", "properties": {
        "records": {"type": "array", "items": record},
        "truncated": {"type": "boolean"},
        "total": totals, "users": {"type": "array", "items": totals},
        "accounts": {"type": "array", "items": totals},
    }})
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
