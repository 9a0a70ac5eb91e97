//! The password of the history's PostgreSQL connection, kept out of configuration files
//! others may read and out of command lines (issue 43, finding 14): whether a connection
//! string carries one ([`url_has_password`]), and the string with a password given apart
//! (a 0600 file, the environment) put in ([`with_password`]), for both of PostgreSQL's
//! forms (`postgres://USER@HOST/DB` and `host=... user=...`).
//!
//! Owns: reading and writing the password part of a connection string. Does not own where
//! the password comes from (the daemon's `[history]`, the CLI's `gantry store migrate`)
//! nor the connection (`history_postgres.rs`).

/// Why a password cannot be put into a connection string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// The connection string does not parse.
    #[error("history url does not parse: {0}")]
    Unparsable(String),
    /// It already carries a password.
    #[error(
        "history url already carries a password: give it once (in the URL of a private file, or apart)"
    )]
    AlreadySet,
    /// A URL without a user name has no place for a password.
    #[error("history url names no user (postgres://USER@HOST/DB): a password needs one")]
    NoUser,
}

/// Whether the connection string `url` carries a password (a string that does not parse
/// carries none that could be used).
pub fn url_has_password(url: &str) -> bool {
    url.parse::<postgres::Config>()
        .is_ok_and(|c| c.get_password().is_some_and(|p| !p.is_empty()))
}

/// Bytes of a URL's user information that need no escape (RFC 3986 "unreserved").
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `url` with `password` added: in the user information of a URL (percent-encoded), or as
/// a quoted `password='...'` of the key-value form.
pub fn with_password(url: &str, password: &str) -> Result<String, PasswordError> {
    url.parse::<postgres::Config>()
        .map_err(|e| PasswordError::Unparsable(e.to_string()))?;
    if url_has_password(url) {
        return Err(PasswordError::AlreadySet);
    }
    let scheme = ["postgres://", "postgresql://"]
        .into_iter()
        .find(|s| url.starts_with(s));
    let Some(scheme) = scheme else {
        let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
        return Ok(format!("{url} password='{quoted}'"));
    };
    let rest = &url[scheme.len()..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return Err(PasswordError::NoUser);
    };
    let user = authority[..at].trim_end_matches(':');
    if user.is_empty() {
        return Err(PasswordError::NoUser);
    }
    Ok(format!(
        "{scheme}{user}:{}@{}",
        percent_encode(password),
        &rest[at + 1..]
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn password_of(url: &str) -> Vec<u8> {
        url.parse::<postgres::Config>()
            .unwrap()
            .get_password()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn a_password_in_either_form_is_seen() {
        assert!(url_has_password("postgres://g:pw@db/h"));
        assert!(url_has_password("host=db user=g password=pw dbname=h"));
        assert!(!url_has_password("postgres://g@db/h"));
        assert!(!url_has_password("postgres://g:@db/h"));
        assert!(!url_has_password("host=db user=g dbname=h"));
        assert!(!url_has_password("::not a url::"));
    }

    #[test]
    fn a_password_given_apart_goes_in_escaped_and_reads_back_the_same() {
        let odd = "p@ss:w/o rd'\\%";
        let url = with_password("postgres://gantry@127.0.0.1:5432/h?sslmode=disable", odd).unwrap();
        assert!(url.starts_with("postgres://gantry:"), "{url}");
        assert!(url.ends_with("@127.0.0.1:5432/h?sslmode=disable"), "{url}");
        assert_eq!(password_of(&url), odd.as_bytes());
        let kv = with_password("host=db user=g dbname=h", odd).unwrap();
        assert_eq!(password_of(&kv), odd.as_bytes());
        assert_eq!(
            with_password("postgres://g:pw@db/h", "x"),
            Err(PasswordError::AlreadySet)
        );
        assert_eq!(
            with_password("postgres://db/h", "x"),
            Err(PasswordError::NoUser)
        );
    }
}
