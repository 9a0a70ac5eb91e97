//! The CLI side of authentication: where client commands find their token
//! (`--token-file`, `GANTRY_TOKEN`, `~/.config/gantry/token`) and `gantry token create`,
//! which makes a random token, prints it once and prints (or appends to a config file)
//! the `[[auth.tokens]]` entry holding its sha256.
//!
//! Owns: token sources and the create command. Does not own hashing, lookup or roles
//! (`gantry_config::auth`) or HTTP (`crate::cli::Client`).

use anyhow::{Context, bail};
use gantry_config::Config;
use gantry_config::auth::{Role, TokenEntry, generate_token, snippet, token_sha256};
use std::path::{Path, PathBuf};

/// Environment variable holding the API token.
pub const TOKEN_ENV: &str = "GANTRY_TOKEN";

/// Options of `gantry token create`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenCreateArgs {
    /// The user the token acts as (jobs submitted with it belong to this user).
    #[arg(long)]
    pub user: String,
    /// Accounts it may charge, comma-separated; the first is the default (default: the user).
    #[arg(long, value_delimiter = ',')]
    pub accounts: Vec<String>,
    /// user, operator or admin.
    #[arg(long, default_value = "user")]
    pub role: String,
    /// A unique label for the config and logs (default: user-role-<8 hex of its hash>).
    #[arg(long)]
    pub name: Option<String>,
    /// Append the entry to this gantry.toml (checked first) instead of printing it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The default token file: `$XDG_CONFIG_HOME/gantry/token` or `~/.config/gantry/token`.
pub fn default_token_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("gantry").join("token"))
}

fn read_token_file(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(token.to_string())
}

/// The token client commands send: `--token-file` if given, else `GANTRY_TOKEN`, else
/// the default token file if it exists, else none (a daemon without tokens).
pub fn read_token(file: Option<&Path>) -> anyhow::Result<Option<String>> {
    if let Some(path) = file {
        return read_token_file(path).map(Some);
    }
    if let Some(t) = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(Some(t.trim().to_string()));
    }
    match default_token_file() {
        Some(path) if path.exists() => read_token_file(&path).map(Some),
        _ => Ok(None),
    }
}

/// The config entry for a new token (`accounts` empty: the user's own account).
pub fn new_entry(args: &TokenCreateArgs, token: &str) -> anyhow::Result<TokenEntry> {
    let role = Role::parse(&args.role)
        .with_context(|| format!("--role `{}`: use user, operator or admin", args.role))?;
    if args.user.trim().is_empty() {
        bail!("--user must not be empty");
    }
    let mut accounts: Vec<String> = args
        .accounts
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    if accounts.is_empty() {
        accounts.push(args.user.clone());
    }
    let sha256 = token_sha256(token);
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-{}-{}", args.user, role.name(), &sha256[..8]));
    Ok(TokenEntry {
        name,
        sha256,
        user: args.user.clone(),
        accounts,
        role,
    })
}

/// Appends `entry` to the config file at `path` after checking the result still loads.
fn append_to_config(path: &Path, entry_toml: &str) -> anyhow::Result<()> {
    let old = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let sep = if old.is_empty() || old.ends_with("\n\n") {
        ""
    } else if old.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    let new = format!("{old}{sep}{entry_toml}");
    let config: Config = toml::from_str(&new)
        .with_context(|| format!("{} would not parse with the new entry", path.display()))?;
    config
        .check()
        .with_context(|| format!("{} would be invalid with the new entry", path.display()))?;
    std::fs::write(path, new).with_context(|| format!("cannot write {}", path.display()))
}

/// `gantry token create`: the token on stdout (once), the entry on stderr or in the file.
pub fn create(args: &TokenCreateArgs) -> anyhow::Result<()> {
    let token = generate_token().context("cannot read random bytes from /dev/urandom")?;
    let entry = new_entry(args, &token)?;
    let text = snippet(&entry).context("cannot write the TOML entry")?;
    match &args.config {
        Some(path) => {
            append_to_config(path, &text)?;
            eprintln!(
                "added token {} (user {}, role {}) to {}; restart the daemon to use it",
                entry.name,
                entry.user,
                entry.role.name(),
                path.display()
            );
        }
        None => eprintln!(
            "add this to the daemon's gantry.toml and restart it (only the hash is stored):\n\n{text}"
        ),
    }
    eprintln!(
        "the token (shown once; give it to {} as {TOKEN_ENV} or in ~/.config/gantry/token):",
        entry.user
    );
    println!("{token}");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(config: Option<PathBuf>) -> TokenCreateArgs {
        TokenCreateArgs {
            user: "alice".into(),
            accounts: vec!["ml".into(), " vision".into()],
            role: "operator".into(),
            name: None,
            config,
        }
    }

    #[test]
    fn entries_name_the_user_role_and_hash() {
        let e = new_entry(&args(None), "t").unwrap();
        assert_eq!(e.accounts, ["ml", "vision"]);
        assert_eq!(e.role, Role::Operator);
        assert!(e.name.starts_with("alice-operator-"), "{}", e.name);
        let mut bad = args(None);
        bad.role = "root".into();
        assert!(new_entry(&bad, "t").is_err());
        bad = args(None);
        bad.accounts.clear();
        assert_eq!(new_entry(&bad, "t").unwrap().accounts, ["alice"]);
    }

    #[test]
    fn appending_keeps_the_config_valid_and_refuses_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gantry.toml");
        std::fs::write(
            &path,
            "cycle_interval_ms = 200\n[plugins]\ndeadline_ms = 100",
        )
        .unwrap();
        let e = new_entry(&args(None), "t1").unwrap();
        append_to_config(&path, &snippet(&e).unwrap()).unwrap();
        let config = Config::load(Some(&path)).unwrap();
        assert_eq!(config.cycle_interval_ms, 200);
        assert_eq!(config.auth.tokens, vec![e.clone()]);
        let err = append_to_config(&path, &snippet(&e).unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains("same name"), "{err:#}");
        assert_eq!(Config::load(Some(&path)).unwrap().auth.tokens.len(), 1);
    }

    #[test]
    fn an_explicit_token_file_wins_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  gantry_abc\n").unwrap();
        assert_eq!(read_token(Some(&path)).unwrap().unwrap(), "gantry_abc");
        std::fs::write(&path, "\n").unwrap();
        assert!(read_token(Some(&path)).is_err());
    }
}
