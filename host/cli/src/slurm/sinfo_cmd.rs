//! `sinfo`: nodes as SLURM shows them: the default summary (`PARTITION AVAIL TIMELIMIT
//! NODES STATE NODELIST`, Gantry's nodes in one partition, `default`), `-N` one line per
//! node, `-h`, `-o` with `%N %P %t %T %c %m %e %G %D %a %l %C`, and `-n` for some nodes.
//!
//! Owns: sinfo's options and layout. Does not own what a node reports (`NodeView`).

use super::args::{self, Opt, Takes};
use super::text_format::{Piece, cell, percent_format};
use crate::cli::Client;
use anyhow::Result;
use gantry_api::views::NodeView;

const OPTIONS: &[Opt] = &[
    ("Node", Some('N'), Takes::Nothing),
    ("noheader", Some('h'), Takes::Nothing),
    ("format", Some('o'), Takes::Value),
    ("nodes", Some('n'), Takes::Value),
    ("partition", Some('p'), Takes::Value),
    ("long", Some('l'), Takes::Nothing),
    ("all", Some('a'), Takes::Nothing),
    ("responding", Some('r'), Takes::Nothing),
    ("summarize", Some('s'), Takes::Nothing),
    ("help", None, Takes::Nothing),
];

/// The node's state in SLURM's words: `idle`, `mixed`, `allocated`, `drained`, `down`.
pub(super) fn node_state(n: &NodeView) -> &'static str {
    let busy = n.cpu_milli_allocated > 0 || n.gpus.iter().any(|g| g.allocated_milli > 0);
    let full = n.cpu_milli_allocated >= n.cpu_milli
        || (!n.gpus.is_empty() && n.gpus.iter().all(|g| g.allocated_milli >= 1000));
    match () {
        () if n.down_reason.is_some() || n.state == "down" => "down",
        () if n.drain.is_some() && busy => "draining",
        () if n.drain.is_some() => "drained",
        () if full => "allocated",
        () if busy => "mixed",
        () => "idle",
    }
}

/// The short form of a state (`%t`).
fn short_state(state: &str) -> &'static str {
    match state {
        "down" => "down",
        "draining" => "drng",
        "drained" => "drain",
        "allocated" => "alloc",
        "mixed" => "mix",
        _ => "idle",
    }
}

/// Field `letter` of a line about `nodes` (one node with `-N`, else a state's group).
fn value(letter: &str, nodes: &[&NodeView]) -> String {
    let Some(first) = nodes.first() else {
        return String::new();
    };
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let cpus: u32 = nodes.iter().map(|n| n.cpu_milli / 1000).sum();
    let alloc: u32 = nodes
        .iter()
        .map(|n| n.cpu_milli_allocated.div_ceil(1000))
        .sum();
    match letter {
        "N" => gantry_api::hostlist::compress(&names),
        "P" | "R" => "default*".into(),
        "t" => short_state(node_state(first)).into(),
        "T" => node_state(first).into(),
        "c" => (first.cpu_milli / 1000).to_string(),
        "m" => first.memory_mib.to_string(),
        "e" => first
            .memory_mib
            .saturating_sub(first.memory_mib_allocated)
            .to_string(),
        "G" => match first.gpus.len() {
            0 => "(null)".into(),
            n => format!("gpu:{n}"),
        },
        "D" => nodes.len().to_string(),
        "a" => "up".into(),
        "l" => "infinite".into(),
        "C" => format!("{alloc}/{}/0/{cpus}", cpus.saturating_sub(alloc)),
        _ => String::new(),
    }
}

/// The header of field `letter`.
fn header(letter: &str) -> &'static str {
    match letter {
        "N" => "NODELIST",
        "P" | "R" => "PARTITION",
        "t" | "T" => "STATE",
        "c" => "CPUS",
        "m" => "MEMORY",
        "e" => "FREE_MEM",
        "G" => "GRES",
        "D" => "NODES",
        "a" => "AVAIL",
        "l" => "TIMELIMIT",
        "C" => "CPUS(A/I/O/T)",
        _ => "",
    }
}

/// Runs `sinfo ARGS`.
pub(super) fn run(client: &Client, args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, false)?;
    let per_node = line.has("Node");
    let format = line.value("format").unwrap_or(if per_node {
        "%N %.6D %P %t"
    } else {
        "%P %.5a %.10l %.6D %.6t %N"
    });
    let wanted = match line.value("nodes") {
        Some(l) => Some(gantry_api::hostlist::expand(l).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let nodes = client.nodes()?;
    let nodes: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| wanted.as_ref().is_none_or(|w| w.contains(&n.name)))
        .collect();
    let groups: Vec<Vec<&NodeView>> = if per_node {
        nodes.iter().map(|n| vec![*n]).collect()
    } else {
        let mut groups: Vec<Vec<&NodeView>> = Vec::new();
        for n in &nodes {
            match groups
                .iter_mut()
                .find(|g| node_state(g[0]) == node_state(n))
            {
                Some(g) => g.push(n),
                None => groups.push(vec![n]),
            }
        }
        groups
    };
    let pieces = percent_format(format);
    let render = |f: &dyn Fn(&str) -> String| -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Field(c) => cell(&f(&c.field), c),
            })
            .collect()
    };
    if !line.has("noheader") {
        println!("{}", render(&|l| header(l).to_string()).trim_end());
    }
    for g in &groups {
        println!("{}", render(&|l| value(l, g)).trim_end());
    }
    Ok(0)
}
