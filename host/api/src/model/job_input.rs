//! The input of an interactive job (`gantry run`, like `srun --pty`): `"stdin": true` feeds
//! the first task's stdin with what the client sends (`POST /v1/jobs/{id}/input`), and
//! `"tty": {"rows": R, "cols": C}` gives it a terminal of that size (which implies stdin).
//! Only an `interactive` job may ask: a batch job has no client to read from, and a service
//! none that stays.
//!
//! Owns: these two fields' rules and their meaning for the executor ([`JobSpec::task_input`]).
//! Does not own the relay (`gantry-node`'s `task_input` and `shim_input`).

use super::{FieldError, JobSpec, bad};
use crate::task::TaskInput;
use gantry_contract::JobKind;
use serde::{Deserialize, Serialize};

/// Largest terminal side a job may ask for.
const MAX_SIDE: u16 = 10_000;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TtySize {
    /// Lines, 1..=10000.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000))]
    pub rows: u16,
    /// Columns, 1..=10000.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000))]
    pub cols: u16,
}

impl TtySize {
    /// Checks both sides; `field` names the size in an error.
    pub fn check(&self, field: &str) -> Result<(), FieldError> {
        for (side, v) in [("rows", self.rows), ("cols", self.cols)] {
            if v == 0 || v > MAX_SIDE {
                return Err(bad(
                    format!("{field}.{side}"),
                    format!("must be 1..={MAX_SIDE}"),
                ));
            }
        }
        Ok(())
    }
}

impl JobSpec {
    /// Checks `stdin` and `tty`.
    pub(super) fn validate_input(&self) -> Result<(), FieldError> {
        if let Some(tty) = &self.tty {
            tty.check("tty")?;
        }
        if self.kind != JobKind::Interactive {
            if self.tty.is_some() {
                return Err(bad("tty", "only an `interactive` job gets a terminal"));
            }
            if self.stdin {
                return Err(bad("stdin", "only an `interactive` job reads input"));
            }
        }
        Ok(())
    }

    /// What the job's first task reads (every other task reads `/dev/null`).
    pub fn task_input(&self) -> TaskInput {
        match (self.tty, self.stdin) {
            (Some(size), _) => TaskInput::Tty {
                rows: size.rows,
                cols: size.cols,
            },
            (None, true) => TaskInput::Pipe,
            (None, false) => TaskInput::None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(v: serde_json::Value) -> Result<JobSpec, FieldError> {
        let mut spec: JobSpec = serde_json::from_value(v).unwrap();
        spec.validate().map(|()| spec)
    }

    #[test]
    fn only_an_interactive_job_reads_input_and_a_terminal_implies_it() {
        let tty = spec(serde_json::json!({
            "argv": ["bash"], "kind": "interactive", "tty": {"rows": 40, "cols": 120}
        }))
        .unwrap();
        assert_eq!(
            tty.task_input(),
            TaskInput::Tty {
                rows: 40,
                cols: 120
            }
        );
        let piped =
            spec(serde_json::json!({"argv": ["cat"], "kind": "interactive", "stdin": true}));
        assert_eq!(piped.unwrap().task_input(), TaskInput::Pipe);
        let batch = spec(serde_json::json!({"argv": ["cat"]})).unwrap();
        assert_eq!(batch.task_input(), TaskInput::None);

        let err = spec(serde_json::json!({"argv": ["cat"], "stdin": true})).unwrap_err();
        assert_eq!(err.field, "stdin");
        let err = spec(serde_json::json!({
            "argv": ["sh"], "kind": "service", "tty": {"rows": 1, "cols": 1}
        }))
        .unwrap_err();
        assert_eq!(err.field, "tty");
        let err = spec(serde_json::json!({
            "argv": ["sh"], "kind": "interactive", "tty": {"rows": 0, "cols": 80}
        }))
        .unwrap_err();
        assert_eq!(err.field, "tty.rows");
    }
}
