//! `gantry token join`, `gantry token list` and `gantry token revoke ID`: join tokens for
//! nodes (`docs/admin/install.md`), through the daemon (admin role). `join` prints the
//! token's command for a node; `list` a table, never a secret.
//!
//! Owns: these commands' arguments and output. Does not own the tokens (the controller's
//! `enrolment`) or the API (`gantry_api::client`).

use crate::cli::Client;
use anyhow::Context;

/// `gantry token join` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenJoinArgs {
    /// How long the token is valid: seconds, or with m, h or d (at most 7d).
    #[arg(long, default_value = "1h")]
    pub ttl: String,
    /// How many nodes may join with it.
    #[arg(long, default_value_t = 1)]
    pub uses: u32,
    /// Print the token only.
    #[arg(long)]
    pub quiet: bool,
}

fn when(ms: u64) -> String {
    crate::policy_view::local_time(ms)
}

/// `gantry token join`.
pub fn join(client: &Client, args: &TokenJoinArgs) -> anyhow::Result<()> {
    let ttl_s = gantry_enrol::init::parse_ttl(&args.ttl)?;
    let made = client
        .create_join_token(ttl_s, args.uses)
        .context("cannot make a join token")?;
    if args.quiet {
        println!("{}", made.token);
        return Ok(());
    }
    match &made.command {
        Some(command) => {
            println!(
                "On each node ({} node(s), until {}):",
                made.view.uses_left,
                when(made.view.expires_ms)
            );
            println!("  {command}");
        }
        None => {
            println!("{}", made.token);
            eprintln!("([cluster] join_url is not set, so no join command is printed.)");
        }
    }
    Ok(())
}

/// `gantry token list`.
pub fn list(client: &Client) -> anyhow::Result<()> {
    let all = client.join_tokens()?;
    println!(
        "{:<14} {:<8} {:>4}  {:<20} {:<12} NODES",
        "ID", "STATE", "LEFT", "EXPIRES", "BY"
    );
    for t in all {
        println!(
            "{:<14} {:<8} {:>4}  {:<20} {:<12} {}",
            t.id,
            t.state,
            t.uses_left,
            when(t.expires_ms),
            t.created_by,
            t.used_by.join(",")
        );
    }
    Ok(())
}

/// `gantry token revoke ID`.
pub fn revoke(client: &Client, id: &str) -> anyhow::Result<()> {
    client.revoke_join_token(id)?;
    println!("revoked {id}");
    Ok(())
}
