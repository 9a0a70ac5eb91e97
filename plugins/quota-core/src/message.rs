//! Human messages with numbers, in GPUs, for holds, rejections and evictions:
//! "queue team-a: 16 of 16 GPUs nominal in use, borrowing 8 of limit 8 from cohort
//! lab; job needs 2", and for a flavor "queue team-a flavor A100: 8 of 8 GPUs nominal
//! in use, …".
//!
//! Owns: wording. Does not own the arithmetic (`ledger`).

use crate::ledger::{Assessment, Ledger, Outcome};
use crate::quotas::Quotas;
use gantry_sdk::cluster::fmt_gpus;

/// "16 of 16 GPUs nominal in use" (use counted up to nominal).
fn nominal_use(a: &Assessment) -> String {
    format!(
        "{} of {} GPUs nominal in use",
        fmt_gpus(a.used.min(a.nominal)),
        fmt_gpus(a.nominal)
    )
}

/// " (counting 3 GPUs of jobs admitted this cycle)" when some were.
fn counting(a: &Assessment) -> String {
    if a.reserved == 0 {
        return String::new();
    }
    format!(
        " (counting {} GPUs of jobs admitted this cycle)",
        fmt_gpus(a.reserved)
    )
}

/// "borrowing 8 of limit 8 from cohort lab" / "borrowing 3 (no limit) from cohort lab".
fn loan(a: &Assessment, cohort: &str) -> String {
    match a.borrowing_limit {
        Some(l) => format!(
            "borrowing {} of limit {} from cohort {cohort}",
            fmt_gpus(a.borrowed),
            fmt_gpus(l)
        ),
        None => format!(
            "borrowing {} (no limit) from cohort {cohort}",
            fmt_gpus(a.borrowed)
        ),
    }
}

/// "queue team-a" for an account of totals, "queue team-a flavor A100" for a flavor.
pub fn label(quotas: &Quotas, account: usize) -> String {
    let name = quotas.queue_of(account).map_or("?", |q| q.name.as_str());
    match quotas.account(account).and_then(|a| a.flavor.as_deref()) {
        Some(model) => format!("queue {name} flavor {model}"),
        None => format!("queue {name}"),
    }
}

/// Describes an assessment: why the job does not fit, or how it fits.
pub fn describe(quotas: &Quotas, a: &Assessment) -> String {
    let cohort = quotas.cohort_of(a.account).unwrap_or("");
    let need = fmt_gpus(a.need);
    let head = format!("{}: {}", label(quotas, a.account), nominal_use(a));
    let state = match &a.outcome {
        Outcome::WithinNominal | Outcome::NoCohort => head,
        _ => format!("{head}, {}", loan(a, cohort)),
    } + &counting(a);
    match a.outcome {
        Outcome::WithinNominal => format!("{state}; job needs {need}, within nominal quota"),
        Outcome::NoCohort => {
            format!("{state}; no cohort to borrow from; job needs {need}")
        }
        Outcome::OverBorrowingLimit { borrow_after } => format!(
            "{state}; job needs {need}, which would make it borrow {}",
            fmt_gpus(borrow_after)
        ),
        Outcome::CohortShort { extra } => format!(
            "{state}; cohort {cohort} can lend {} more; job needs {need}, which would borrow {} more",
            fmt_gpus(a.cohort_free),
            fmt_gpus(extra)
        ),
        Outcome::Borrows { borrow_after } => format!(
            "{state}; job needs {need} and borrows, {} borrowed after it",
            fmt_gpus(borrow_after)
        ),
    }
}

/// Why a would-be borrower waits for a peer below its nominal quota.
pub fn peer_first(
    ledger: &Ledger<'_>,
    a: &Assessment,
    peer: usize,
    peer_pending_jobs: usize,
) -> String {
    let quotas = ledger.quotas();
    let cohort = quotas.cohort_of(a.account).unwrap_or("");
    let peer_nominal = quotas.account(peer).map_or(0, |p| p.nominal_milli);
    let peer_running = ledger.used(peer).saturating_sub(ledger.reserved(peer));
    format!(
        "{}: {}, {}{}; job needs {} and would borrow, but {} of cohort {cohort} is below its nominal quota ({} of {} GPUs in use) with {peer_pending_jobs} pending jobs ({} GPUs) that fit it; queues below nominal are served before borrowers",
        label(quotas, a.account),
        nominal_use(a),
        loan(a, cohort),
        counting(a),
        fmt_gpus(a.need),
        label(quotas, peer),
        fmt_gpus(peer_running),
        fmt_gpus(peer_nominal),
        fmt_gpus(ledger.reserved(peer)),
    )
}

/// Why a job is rejected at submit: larger than its account could ever hold.
pub fn never_fits(quotas: &Quotas, account: usize, need: u64) -> String {
    let Some(q) = quotas.account(account) else {
        return String::new();
    };
    let max = quotas.max_ever_milli(account);
    let how = match (quotas.cohort_of(account), q.borrowing_limit_milli) {
        (None, _) => "no cohort to borrow from".to_string(),
        (Some(c), Some(l)) if max - q.nominal_milli == l => {
            format!("borrowing limit {} in cohort {c}", fmt_gpus(l))
        }
        (Some(c), _) => format!(
            "{} the other queues of cohort {c} can lend",
            fmt_gpus(max - q.nominal_milli)
        ),
    };
    format!(
        "job needs {} GPUs but {} can never hold more than {} ({} nominal + {how})",
        fmt_gpus(need),
        label(quotas, account),
        fmt_gpus(max),
        fmt_gpus(q.nominal_milli)
    )
}
