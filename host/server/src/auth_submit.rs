//! What a caller may ask for in a submission beyond what every user may: today, a `tier`
//! above its queue's `limits.max_user_tier`.
//!
//! The rule: operators and admins (a token of that role) are trusted with any tier;
//! everyone else is a user for this purpose. A caller without a token (`Caller::Open`, a
//! daemon with no `[[auth.tokens]]`) has no trusted identity, only what its request says,
//! so it is a user too (otherwise a user could raise its own priority by going around its
//! token), unless `auth.anonymous_role` trusts it as an operator or admin. Any other kind of caller is a user unless it is added here (fail closed).
//!
//! Owns: [`Caller::submitter`] (the controller's `scheduler::submitter::Submitter`). Does not own the limits
//! (`config_limits`) or enforcing them (`scheduler::submit_limits`).

use crate::auth::Caller;
use gantry_config::auth::Role;
use gantry_controller::submitter::Submitter;

impl Caller {
    /// How far this caller is trusted with the priority of the jobs it submits.
    pub fn submitter(&self) -> Submitter {
        match self {
            Caller::Token(id) if id.role >= Role::Operator => Submitter::Privileged,
            Caller::Open(role) if *role >= Role::Operator => Submitter::Privileged,
            _ => Submitter::User,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::auth::Tokens;
    use gantry_config::auth::{AuthConfig, token_sha256};

    /// The caller presenting a token of `role` (built from TOML, as the daemon reads it).
    fn token(role: &str) -> Caller {
        let config: AuthConfig = toml::from_str(&format!(
            "[[tokens]]\nname = \"t\"\nuser = \"u\"\naccounts = [\"a\"]\nrole = \"{role}\"\n\
             sha256 = \"{}\"\n",
            token_sha256("secret")
        ))
        .unwrap();
        Caller::Token(Tokens::new(&config).unwrap().lookup("secret").unwrap())
    }

    #[test]
    fn only_operators_and_admins_are_privileged_and_no_token_is_a_user() {
        assert_eq!(Caller::Open(Role::User).submitter(), Submitter::User);
        assert_eq!(Caller::Open(Role::Admin).submitter(), Submitter::Privileged);
        assert_eq!(token("user").submitter(), Submitter::User);
        assert_eq!(token("operator").submitter(), Submitter::Privileged);
        assert_eq!(token("admin").submitter(), Submitter::Privileged);
    }
}
