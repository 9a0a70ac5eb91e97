//! The value forms of `#SBATCH` options: the words of a directive line (shell-like
//! quoting), SLURM time limits, memory sizes, GPU counts (`[type:]N`) and `--gres` lists.
//!
//! Owns: turning one value's text into a number or a typed request, with a message saying
//! what form was expected. Does not own which option takes which form (`sbatch`).

/// Splits a directive's text into words as a shell would: whitespace separates, `'...'`
/// is literal, `"..."` keeps spaces and honours `\"` and `\\`, `\` outside quotes escapes
/// the next character, and an unquoted word starting with `#` begins a comment.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => return Ok(words),
            Some(_) => {}
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a ' quote is not closed".into()),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                            word.extend(chars.next());
                        }
                        Some(c) => word.push(c),
                        None => return Err("a \" quote is not closed".into()),
                    }
                },
                '\\' => word.extend(chars.next()),
                c => word.push(c),
            }
        }
        words.push(word);
    }
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{text}` is not a whole number of {what}"));
    }
    t.parse()
        .map_err(|_| format!("`{text}` is too large a number of {what}"))
}

/// Parses a SLURM time limit into seconds: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`,
/// `D-HH:MM:SS`; `UNLIMITED`, `INFINITE` and `0` mean no limit (0).
pub fn parse_time(text: &str) -> Result<u64, String> {
    const FORMS: &str = "use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED";
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(0);
    }
    let too_large = || format!("`{text}` is too long a time");
    let unit = |s: &str, what: &str| number(s, what).map_err(|e| format!("{e} ({FORMS})"));
    let (days, clock) = match t.split_once('-') {
        Some((d, rest)) => (Some(unit(d, "days")?), rest),
        None => (None, t),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    // Seconds in each field, from the left, for the forms with and without days.
    let scales: &[u64] = match (days.is_some(), parts.len()) {
        (false, 1) => &[60],
        (false, 2) => &[60, 1],
        (false, 3) | (true, 3) => &[3600, 60, 1],
        (true, 1) => &[3600],
        (true, 2) => &[3600, 60],
        _ => return Err(format!("`{text}`: {FORMS}")),
    };
    let mut total = days
        .unwrap_or(0)
        .checked_mul(86_400)
        .ok_or_else(too_large)?;
    for (part, scale) in parts.iter().zip(scales) {
        let n = unit(part, "time units")?;
        total = n
            .checked_mul(*scale)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_large)?;
    }
    Ok(total)
}

/// Parses a SLURM memory size into MiB: a number with an optional unit `K`, `M`, `G` or
/// `T` (any case; no unit means MiB). Kilobytes round up to whole MiB.
pub fn parse_mem_mib(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n = number(num, "MiB").map_err(|_| {
        format!("`{text}` is not a size like 4096, 500M, 16G or 1T (no unit means MiB)")
    })?;
    // SLURM also takes the unit with a B (`16GB`, as submitit writes it).
    let mib = match unit.to_ascii_uppercase().as_str() {
        "K" | "KB" => Some(n.div_ceil(1024)),
        "" | "M" | "MB" => Some(n),
        "G" | "GB" => n.checked_mul(1024),
        "T" | "TB" => n.checked_mul(1024 * 1024),
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}` (use K, M, G or T)"
            ));
        }
    };
    mib.ok_or_else(|| format!("`{text}` is too large a size"))
}

/// A positive count (`--nodes`, `--ntasks`...).
pub fn parse_count(text: &str) -> Result<u32, String> {
    let n = number(text, "items")?;
    match u32::try_from(n) {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is too large")),
    }
}

/// A GPU request `[type:]N` (`--gpus`, `--gpus-per-task`, `--gpus-per-node`): the count and
/// the model, if one is named.
pub fn parse_gpu_count(text: &str) -> Result<(u32, Option<String>), String> {
    let t = text.trim();
    let (model, count) = match t.rsplit_once(':') {
        Some((m, c)) if !m.trim().is_empty() => (Some(m.trim().to_string()), c),
        Some(_) => return Err(format!("`{text}`: the GPU type before `:` is empty")),
        None => (None, t),
    };
    let n = number(count, "GPUs").map_err(|e| format!("{e} (use N or TYPE:N)"))?;
    let n = u32::try_from(n).map_err(|_| format!("`{text}` is too many GPUs"))?;
    Ok((n, model))
}

/// One entry of a `--gres` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gres {
    /// `gpu[:type][:N]`: GPUs per node.
    Gpu {
        /// GPUs per node (default 1).
        count: u32,
        /// The model, if named.
        model: Option<String>,
    },
    /// Any other generic resource, which Gantry does not have.
    Other(String),
}

/// Parses a `--gres` list: `gpu:2`, `gpu:a100:4`, `gpu`, `gpu:a100,license:1`...
pub fn parse_gres(text: &str) -> Result<Vec<Gres>, String> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(format!("`{text}` has an empty entry"));
        }
        let mut fields = entry.split(':');
        let name = fields.next().unwrap_or_default();
        let name = name.strip_prefix("gres/").unwrap_or(name);
        if name != "gpu" {
            out.push(Gres::Other(entry.to_string()));
            continue;
        }
        let rest: Vec<&str> = fields.collect();
        let (model, count) = match rest.as_slice() {
            [] => (None, 1),
            [c] if c.bytes().all(|b| b.is_ascii_digit()) => (None, gres_count(c, entry)?),
            [m] => (Some(m.to_string()), 1),
            [m, c] => (Some(m.to_string()), gres_count(c, entry)?),
            _ => return Err(format!("`{entry}`: use gpu, gpu:N or gpu:TYPE:N")),
        };
        if model.as_deref().is_some_and(str::is_empty) {
            return Err(format!("`{entry}`: the GPU type is empty"));
        }
        out.push(Gres::Gpu { count, model });
    }
    Ok(out)
}

fn gres_count(text: &str, entry: &str) -> Result<u32, String> {
    let n = number(text, "GPUs").map_err(|e| format!("`{entry}`: {e}"))?;
    u32::try_from(n).map_err(|_| format!("`{entry}` is too many GPUs"))
}

/// Parses `--nodes`: `N` or a range `MIN-MAX`; Gantry takes the minimum.
pub fn parse_nodes(text: &str) -> Result<(u32, bool), String> {
    match text.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (parse_count(lo)?, parse_count(hi)?);
            if hi < lo {
                return Err(format!("`{text}`: the range ends before it starts"));
            }
            Ok((lo, lo != hi))
        }
        None => Ok((parse_count(text)?, false)),
    }
}
