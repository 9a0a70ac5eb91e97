//! Unit tests of `auth`: hashing, lookup, entry checks, role and ownership rules, the
//! stamping of a job's user and account, the start-up mode and the config snippet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_config::auth::{TokenEntry, generate_token, snippet, token_sha256};

pub(crate) fn entry(
    name: &str,
    token: &str,
    user: &str,
    accounts: &[&str],
    role: Role,
) -> TokenEntry {
    TokenEntry {
        name: name.into(),
        sha256: token_sha256(token),
        user: user.into(),
        accounts: accounts.iter().map(|a| a.to_string()).collect(),
        role,
    }
}

fn table() -> Tokens {
    Tokens::new(&AuthConfig {
        allow_unauthenticated: false,
        local_roles: Default::default(),
        anonymous_role: Role::User,
        tokens: vec![
            entry("alice", "tok-alice", "alice", &["ml", "vision"], Role::User),
            entry("ops", "tok-ops", "olga", &["infra"], Role::Operator),
            entry("root", "tok-root", "ada", &["infra"], Role::Admin),
        ],
    })
    .unwrap()
}

fn caller(tokens: &Tokens, token: &str) -> Caller {
    Caller::Token(tokens.lookup(token).unwrap())
}

#[test]
fn hashing_is_sha256_hex() {
    assert_eq!(
        token_sha256("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn lookup_finds_only_configured_tokens() {
    let t = table();
    assert!(t.enabled());
    assert_eq!(t.len(), 3);
    assert_eq!(t.lookup("tok-alice").unwrap().user, "alice");
    assert_eq!(t.lookup("tok-root").unwrap().role, Role::Admin);
    assert!(t.lookup("tok-alic").is_none());
    assert!(t.lookup("").is_none());
    assert!(t.lookup(&token_sha256("tok-alice")).is_none());
    assert!(!Tokens::default().enabled());
}

#[test]
fn uppercase_hashes_are_accepted() {
    let mut e = entry("a", "x", "a", &["a"], Role::User);
    e.sha256 = e.sha256.to_uppercase();
    let t = Tokens::new(&AuthConfig {
        allow_unauthenticated: false,
        local_roles: Default::default(),
        anonymous_role: Role::User,
        tokens: vec![e],
    })
    .unwrap();
    assert!(t.lookup("x").is_some());
}

#[test]
fn malformed_entries_are_refused_with_their_index() {
    let good = entry("a", "x", "a", &["a"], Role::User);
    let cases: Vec<(TokenEntry, &str)> = vec![
        (
            TokenEntry {
                sha256: "abc".into(),
                ..good.clone()
            },
            "64 hex",
        ),
        (
            TokenEntry {
                accounts: vec![],
                ..good.clone()
            },
            "accounts",
        ),
        (
            TokenEntry {
                user: String::new(),
                ..good.clone()
            },
            "user",
        ),
        (good.clone(), "same name"),
    ];
    for (bad, want) in cases {
        let config = AuthConfig {
            allow_unauthenticated: false,
            local_roles: Default::default(),
            anonymous_role: Role::User,
            tokens: vec![good.clone(), bad],
        };
        let e = Tokens::new(&config).unwrap_err().to_string();
        assert!(e.contains("auth.tokens[1]") && e.contains(want), "{e}");
    }
}

#[test]
fn roles_include_the_ones_below() {
    let t = table();
    let (alice, ops, root) = (
        caller(&t, "tok-alice"),
        caller(&t, "tok-ops"),
        caller(&t, "tok-root"),
    );
    assert!(alice.require(Role::User, "submit").is_ok());
    let denied = alice
        .require(Role::Admin, "changing the pipeline")
        .unwrap_err();
    assert!(denied.message.contains("needs role admin"), "{denied:?}");
    assert!(ops.require(Role::Operator, "x").is_ok());
    assert!(ops.require(Role::Admin, "x").is_err());
    assert!(root.require(Role::Admin, "x").is_ok());
    // Without identity: the role the config gives (default user).
    let anonymous = Tokens::default().anonymous();
    assert_eq!(anonymous, Caller::Open(Role::User));
    assert!(anonymous.require(Role::User, "submit").is_ok());
    let denied = anonymous.require(Role::Operator, "draining").unwrap_err();
    assert!(denied.message.contains("without identity"), "{denied:?}");
    assert!(Caller::Open(Role::Admin).require(Role::Admin, "x").is_ok());
}

#[test]
fn only_owners_and_operators_touch_a_job() {
    let t = table();
    assert!(caller(&t, "tok-alice").require_owner("alice", "x").is_ok());
    let d = caller(&t, "tok-alice")
        .require_owner("bob", "cancel")
        .unwrap_err();
    assert!(d.message.contains("belongs to user bob"), "{d:?}");
    assert!(caller(&t, "tok-ops").require_owner("bob", "x").is_ok());
    assert!(caller(&t, "tok-root").require_owner("bob", "x").is_ok());
    assert!(Caller::Open(Role::Admin).require_owner("bob", "x").is_ok());
    assert!(Caller::Open(Role::User).require_owner("bob", "x").is_err());
    assert!(
        Caller::Open(Role::User)
            .require_owner(crate::auth::ANONYMOUS_USER, "x")
            .is_ok()
    );
}

#[test]
fn the_token_decides_user_and_account() {
    let alice = caller(&table(), "tok-alice");
    let (mut user, mut account) = (String::new(), String::new());
    alice.stamp(&mut user, &mut account).unwrap();
    assert_eq!((user.as_str(), account.as_str()), ("alice", "ml"));

    let (mut user, mut account) = ("alice".to_string(), "vision".to_string());
    alice.stamp(&mut user, &mut account).unwrap();
    assert_eq!(account, "vision");

    let (mut user, mut account) = ("bob".to_string(), String::new());
    assert_eq!(
        alice.stamp(&mut user, &mut account).unwrap_err().field,
        Some("user")
    );
    let (mut user, mut account) = (String::new(), "infra".to_string());
    assert_eq!(
        alice.stamp(&mut user, &mut account).unwrap_err().field,
        Some("account")
    );

    // Without identity the name given is not taken: one user for limits and accounting.
    let (mut user, mut account) = ("bob".to_string(), "any".to_string());
    Caller::Open(Role::User)
        .stamp(&mut user, &mut account)
        .unwrap();
    assert_eq!(
        (user.as_str(), account.as_str()),
        (crate::auth::ANONYMOUS_USER, crate::auth::ANONYMOUS_USER)
    );
    // Unless the operator trusts anonymous callers as admins (a single-user machine).
    let (mut user, mut account) = ("anyone".to_string(), "any".to_string());
    Caller::Open(Role::Admin)
        .stamp(&mut user, &mut account)
        .unwrap();
    assert_eq!((user.as_str(), account.as_str()), ("anyone", "any"));
}

#[test]
fn no_tokens_only_on_loopback_unless_allowed() {
    let none = Tokens::default();
    let mut config = AuthConfig::default();
    let local: SocketAddr = "127.0.0.1:8420".parse().unwrap();
    let public: SocketAddr = "0.0.0.0:8420".parse().unwrap();
    assert_eq!(
        startup_mode(&none, &config, local).unwrap(),
        Mode::OpenLoopback
    );
    let e = startup_mode(&none, &config, public)
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow_unauthenticated"), "{e}");
    config.allow_unauthenticated = true;
    assert_eq!(
        startup_mode(&none, &config, public).unwrap(),
        Mode::OpenAllowed
    );
    assert_eq!(
        startup_mode(&table(), &config, public).unwrap(),
        Mode::Tokens(3)
    );
}

#[test]
fn role_names_round_trip() {
    for r in [Role::User, Role::Operator, Role::Admin] {
        assert_eq!(Role::parse(r.name()), Some(r));
    }
    assert_eq!(Role::parse("root"), None);
}

#[test]
fn generated_tokens_are_random_and_the_snippet_parses_back() {
    let a = generate_token().unwrap();
    let b = generate_token().unwrap();
    assert_ne!(a, b);
    assert_eq!(a.len(), "gantry_".len() + 64);
    let e = entry("ci \"bot\"", &a, "ci", &["ml", "infra"], Role::Operator);
    let text = snippet(&e).unwrap();
    assert!(text.starts_with("[[auth.tokens]]"), "{text}");
    let config: gantry_config::Config = toml::from_str(&text).unwrap();
    assert_eq!(config.auth.tokens, vec![e]);
    let t = Tokens::new(&config.auth).unwrap();
    assert_eq!(t.lookup(&a).unwrap().role, Role::Operator);
}
