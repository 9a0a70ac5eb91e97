//! What a caller may see of other users' jobs: a `user`-role caller (a token, or a local
//! account on the Unix socket) sees its own jobs whole, and of everyone else's only what the
//! queue needs to be understood (name, user, account, queue, resources, state, reasons) —
//! never their `env`, `argv`, `script` or `workdir`, which hold paths and secrets.
//! Operators and admins see everything. A caller without an identity (no tokens configured,
//! over loopback TCP) is not narrowed here: that mode trusts every local process to read, and
//! says so at start and in `docs/security.md`.
//!
//! Owns: the redaction. Does not own who may act on a job (`crate::auth`).

use crate::auth::{Caller, Role};
use crate::model::JobRecord;

/// What stands in for a hidden `argv` or `script`.
const HIDDEN: &str = "(hidden: another user's job)";

/// Hides the private fields of `job` from `caller` unless it may see them.
pub(super) fn redact(caller: &Caller, job: &mut JobRecord) {
    let Caller::Token(id) = caller else {
        return;
    };
    if id.role >= Role::Operator || id.user == job.spec.user {
        return;
    }
    job.spec.env.clear();
    job.spec.argv = vec![HIDDEN.to_owned()];
    if job.spec.script.is_some() {
        job.spec.script = Some(HIDDEN.to_owned());
    }
    job.spec.workdir = None;
}

/// [`redact`] over a list.
pub(super) fn redact_all(caller: &Caller, jobs: &mut [JobRecord]) {
    for job in jobs {
        redact(caller, job);
    }
}
