//! `#SBATCH` batch scripts: reads the directives of a script's leading comment block the way
//! `sbatch` does (stop at the first line that is neither blank nor a comment), in the
//! forms `--opt=value`, `--opt value`, `-X value`, `-Xvalue` and unique prefixes of long
//! names, several per line. The result is [`Options`]: what the directives set, each field
//! `None` when no directive set it, so that command-line flags can override exactly what
//! they give ([`Options::overridden_by`]). Within a script a later directive replaces an
//! earlier one. Every directive that is not applied is listed in [`Parsed::ignored`] with
//! its line and why; errors name the line and the directive.
//!
//! Owns: the directive syntax and the option table. Does not own reading files or sending
//! the job (`submit_cli`), the value forms (`values`), or turning options into a job spec
//! (`spec`). Pure: no I/O.

mod apply;
mod spec;
mod spelling;
#[cfg(test)]
mod tests;
pub mod values;

pub use spec::TaskShape;

use apply::Directive;
use gantry_api::model::job_options::{ArraySpec, Dependency, WarnSignal};
use gantry_contract::JobKind;

/// How many GPUs a task gets, in the form it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuAmount {
    /// Whole GPUs per task (`--gpus-per-task`, `gantry submit --gpus`).
    PerTask(u32),
    /// Whole GPUs per node, divided over the node's tasks (`--gres=gpu:N`, `--gpus-per-node`).
    PerNode(u32),
    /// Whole GPUs of the whole job, divided over its tasks (`--gpus`, `-G`).
    Total(u32),
    /// A fraction of one GPU per task, in milli-GPU (`gantry submit --gpu-milli`).
    MilliPerTask(u32),
}

/// How much CPU a task gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuAmount {
    /// Milli-cores per task (`--cpus-per-task` × 1000, `gantry submit --cpu-milli`).
    MilliPerTask(u32),
    /// Cores per GPU of the task (`--cpus-per-gpu`).
    PerGpu(u32),
}

/// How much memory a task gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemAmount {
    /// MiB per task (`gantry submit --mem-mib`).
    PerTask(u64),
    /// MiB per node, divided over the node's tasks (`--mem`).
    PerNode(u64),
    /// MiB per core of the task (`--mem-per-cpu`).
    PerCpu(u64),
    /// MiB per GPU of the task (`--mem-per-gpu`).
    PerGpu(u64),
}

/// What a script's directives (or the command line) ask for; `None` means not given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// `--job-name`, `-J`.
    pub name: Option<String>,
    /// `--partition`, `-p`: the queue.
    pub queue: Option<String>,
    /// `--account`, `-A`.
    pub account: Option<String>,
    /// `--chdir`, `-D`: the working directory.
    pub workdir: Option<String>,
    /// `--nodes`, `-N`.
    pub nodes: Option<u32>,
    /// `--ntasks`, `-n`: tasks of the whole job.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// GPUs (`--gres`, `--gpus`, `--gpus-per-task`, `--gpus-per-node`).
    pub gpus: Option<GpuAmount>,
    /// Allowed GPU models (the type in `gpu:TYPE:N`).
    pub gpu_models: Option<Vec<String>>,
    /// CPU (`--cpus-per-task`, `--cpus-per-gpu`).
    pub cpu: Option<CpuAmount>,
    /// Memory (`--mem`, `--mem-per-cpu`, `--mem-per-gpu`).
    pub memory: Option<MemAmount>,
    /// `--time`, `-t`, in seconds; 0 means no limit.
    pub time_limit_s: Option<u64>,
    /// `--array`, `-a`.
    pub array: Option<ArraySpec>,
    /// `--dependency`, `-d`.
    pub dependencies: Option<Vec<Dependency>>,
    /// `--requeue` (true) or `--no-requeue` (false).
    pub requeue: Option<bool>,
    /// `--signal`.
    pub signal: Option<WarnSignal>,
    /// `--hold`, `-H`: submitted held.
    pub hold: Option<bool>,
    /// `--begin`, `-b`: not to start before this time (ms since the epoch).
    pub begin_ms: Option<u64>,
    /// `--output`, `-o`: the file pattern for stdout.
    pub output: Option<String>,
    /// `--error`, `-e`: the file pattern for stderr.
    pub error: Option<String>,
    /// `--container-image` (Pyxis' spelling): the image the tasks run in.
    pub image: Option<String>,
    /// `--container-mounts=SRC:DST[:ro],...` (Pyxis' spelling).
    pub mounts: Option<Vec<gantry_api::model::ContainerMount>>,
    /// How often it may be requeued (command line only).
    pub max_requeues: Option<u32>,
    /// Priority tier (command line only).
    pub tier: Option<i32>,
    /// May be evicted (command line only).
    pub preemptible: Option<bool>,
    /// batch, interactive or service (command line only).
    pub kind: Option<JobKind>,
    /// `--export`: which of the submitting shell's variables the job gets (see `export`).
    pub export: Option<String>,
    /// `--wrap`: a command to run as the script (`sbatch` only).
    pub wrap: Option<String>,
    /// `--parsable`: print only the job id (`sbatch` only).
    pub parsable: Option<bool>,
    /// `--test-only`: check the request and submit nothing (`sbatch` only).
    pub test_only: Option<bool>,
    /// `--quiet`, `-Q`: print nothing but errors (`sbatch` only).
    pub quiet: Option<bool>,
}

impl Options {
    /// These options with every field that `flags` sets replaced by the flag's value.
    pub fn overridden_by(self, flags: Options) -> Options {
        Options {
            name: flags.name.or(self.name),
            queue: flags.queue.or(self.queue),
            account: flags.account.or(self.account),
            workdir: flags.workdir.or(self.workdir),
            nodes: flags.nodes.or(self.nodes),
            ntasks: flags.ntasks.or(self.ntasks),
            ntasks_per_node: flags.ntasks_per_node.or(self.ntasks_per_node),
            gpus: flags.gpus.or(self.gpus),
            gpu_models: flags.gpu_models.or(self.gpu_models),
            cpu: flags.cpu.or(self.cpu),
            memory: flags.memory.or(self.memory),
            time_limit_s: flags.time_limit_s.or(self.time_limit_s),
            array: flags.array.or(self.array),
            dependencies: flags.dependencies.or(self.dependencies),
            requeue: flags.requeue.or(self.requeue),
            signal: flags.signal.or(self.signal),
            hold: flags.hold.or(self.hold),
            begin_ms: flags.begin_ms.or(self.begin_ms),
            output: flags.output.or(self.output),
            error: flags.error.or(self.error),
            image: flags.image.or(self.image),
            mounts: flags.mounts.or(self.mounts),
            max_requeues: flags.max_requeues.or(self.max_requeues),
            tier: flags.tier.or(self.tier),
            preemptible: flags.preemptible.or(self.preemptible),
            kind: flags.kind.or(self.kind),
            export: flags.export.or(self.export),
            wrap: flags.wrap.or(self.wrap),
            parsable: flags.parsable.or(self.parsable),
            test_only: flags.test_only.or(self.test_only),
            quiet: flags.quiet.or(self.quiet),
        }
    }
}

/// A directive that was read but not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// 1-based line of the script.
    pub line: usize,
    /// The directive as written (e.g. `--mail-type=END`).
    pub directive: String,
    /// Why it was not applied.
    pub reason: String,
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ignored #SBATCH {} (line {}): {}",
            self.directive, self.line, self.reason
        )
    }
}

/// What a script's directives gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The applied directives.
    pub options: Options,
    /// Directives read but not applied, in script order.
    pub ignored: Vec<Ignored>,
    /// Directives applied in part or differently from SLURM, explained.
    pub notes: Vec<String>,
}

/// A directive that cannot be applied as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {directive}: {message}")]
pub struct SbatchError {
    /// 1-based line of the script.
    pub line: usize,
    /// The directive as written.
    pub directive: String,
    /// What is wrong.
    pub message: String,
}

impl SbatchError {
    /// The error as `FILE:LINE: DIRECTIVE: MESSAGE`.
    pub fn located(&self, file: &str) -> String {
        format!("{file}:{}: {}: {}", self.line, self.directive, self.message)
    }
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Value,
}

/// Long name, short letter, arity. Options not listed are reported as not supported.
const OPTIONS: &[(&str, Option<char>, Arity)] = &[
    ("job-name", Some('J'), Arity::Value),
    ("partition", Some('p'), Arity::Value),
    ("account", Some('A'), Arity::Value),
    ("chdir", Some('D'), Arity::Value),
    ("nodes", Some('N'), Arity::Value),
    ("ntasks", Some('n'), Arity::Value),
    ("ntasks-per-node", None, Arity::Value),
    ("gres", None, Arity::Value),
    ("gpus", Some('G'), Arity::Value),
    ("gpus-per-task", None, Arity::Value),
    ("gpus-per-node", None, Arity::Value),
    ("cpus-per-task", Some('c'), Arity::Value),
    ("cpus-per-gpu", None, Arity::Value),
    ("mem", None, Arity::Value),
    ("mem-per-cpu", None, Arity::Value),
    ("mem-per-gpu", None, Arity::Value),
    ("time", Some('t'), Arity::Value),
    ("output", Some('o'), Arity::Value),
    ("error", Some('e'), Arity::Value),
    ("input", Some('i'), Arity::Value),
    ("array", Some('a'), Arity::Value),
    ("dependency", Some('d'), Arity::Value),
    ("requeue", None, Arity::Flag),
    ("no-requeue", None, Arity::Flag),
    ("signal", None, Arity::Value),
    ("qos", Some('q'), Arity::Value),
    ("exclusive", None, Arity::Flag),
    ("oversubscribe", Some('s'), Arity::Flag),
    ("mail-type", None, Arity::Value),
    ("mail-user", None, Arity::Value),
    ("constraint", Some('C'), Arity::Value),
    ("nodelist", Some('w'), Arity::Value),
    ("exclude", Some('x'), Arity::Value),
    ("export", None, Arity::Value),
    ("licenses", Some('L'), Arity::Value),
    ("begin", Some('b'), Arity::Value),
    ("container-image", None, Arity::Value),
    ("container-mounts", None, Arity::Value),
    ("hold", Some('H'), Arity::Flag),
    ("time-min", None, Arity::Value),
    ("comment", None, Arity::Value),
    ("reservation", None, Arity::Value),
    ("parsable", None, Arity::Flag),
    ("wrap", None, Arity::Value),
    ("test-only", None, Arity::Flag),
    ("quiet", Some('Q'), Arity::Flag),
    ("open-mode", None, Arity::Value),
];

/// Reads the `#SBATCH` directives of a batch script.
pub fn parse(script: &str) -> Result<Parsed, SbatchError> {
    let mut parsed = Parsed::default();
    let mut in_block = true;
    for (i, line) in script.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim();
        match directive_text(line) {
            Some(rest) if in_block => parse_line(&mut parsed, n, rest)?,
            Some(rest) => parsed.ignored.push(Ignored {
                line: n,
                directive: rest.trim().to_string(),
                reason: "after the first command: like sbatch, Gantry reads directives only \
                         from the comment block at the top of the script"
                    .into(),
            }),
            None if directive_text(trimmed).is_some() && in_block => {
                parsed.ignored.push(Ignored {
                    line: n,
                    directive: trimmed.trim_start_matches("#SBATCH").trim().to_string(),
                    reason: "#SBATCH must start the line".into(),
                });
            }
            None if trimmed.is_empty() || trimmed.starts_with('#') => {}
            None => in_block = false,
        }
    }
    Ok(parsed)
}

/// The text after `#SBATCH` when `line` is a directive.
fn directive_text(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("#SBATCH")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest)
}

/// The option a name given on a directive line stands for: a long name, a unique prefix
/// of one, or a short letter.
fn lookup(name: &str, short: bool) -> Option<(&'static str, Arity)> {
    if short {
        return OPTIONS
            .iter()
            .find(|(_, s, _)| name.chars().eq(s.iter().copied()))
            .map(|(l, _, a)| (*l, *a));
    }
    if let Some((l, _, a)) = OPTIONS.iter().find(|(l, _, _)| *l == name) {
        return Some((l, *a));
    }
    let mut prefixed = OPTIONS.iter().filter(|(l, _, _)| l.starts_with(name));
    match (prefixed.next(), prefixed.next()) {
        (Some((l, _, a)), None) if !name.is_empty() => Some((l, *a)),
        _ => None,
    }
}

/// Why an option that [`lookup`] does not know is not applied: a real sbatch option that
/// Gantry does not serve is reported (`Ok`); an ambiguous prefix, a misspelling or a word
/// that is no sbatch option at all is refused (`Err`), as sbatch refuses it, naming the
/// nearest valid option.
fn unknown_reason(name: &str, short: bool) -> Result<String, String> {
    if short {
        return match spelling::sbatch_only_short(name) {
            Some(_) => Ok("not supported by Gantry".into()),
            None => Err(format!("invalid option -{name}: sbatch has no such option")),
        };
    }
    let candidates: Vec<String> = OPTIONS
        .iter()
        .filter(|(l, _, _)| !name.is_empty() && l.starts_with(name))
        .map(|(l, _, _)| format!("--{l}"))
        .collect();
    if candidates.len() > 1 {
        return Err(format!(
            "option --{name} is ambiguous: it could be {}",
            candidates.join(", ")
        ));
    }
    let names = || OPTIONS.iter().map(|(l, _, _)| *l);
    if let Some(meant) = spelling::nearest(name, names()) {
        return Err(format!("unknown option --{name}; did you mean --{meant}?"));
    }
    if spelling::sbatch_only(name).is_some() {
        return Ok("not supported by Gantry".into());
    }
    Err(match spelling::closest(name, names()) {
        Some(meant) => format!("unknown option --{name}; did you mean --{meant}?"),
        None => format!("unknown option --{name}: sbatch has no such option"),
    })
}

fn parse_line(parsed: &mut Parsed, line: usize, text: &str) -> Result<(), SbatchError> {
    let words = values::split_words(text).map_err(|message| SbatchError {
        line,
        directive: text.trim().to_string(),
        message,
    })?;
    parse_words(parsed, line, words)
}

/// Reads sbatch's command line: its options (the same table and forms as `#SBATCH` lines,
/// reported as line 0), then the script and the script's arguments. With `--wrap` there is
/// no script, and every word must be an option.
pub fn parse_command_line(args: &[String]) -> Result<CommandLine, SbatchError> {
    let mut words = args.iter().cloned().peekable();
    let mut options = Vec::new();
    while let Some(word) = words.next_if(|w| w.starts_with('-') && w.len() > 1) {
        if word == "--" {
            break;
        }
        let takes_value = match word.strip_prefix("--") {
            Some(long) if !long.contains('=') => {
                long_arity(long) == Some(Arity::Value)
                    || spelling::sbatch_only(long).is_some_and(|(_, v)| v)
            }
            Some(_) => false,
            None => {
                let letter = &word[1..word.chars().nth(1).map_or(1, |c| 1 + c.len_utf8())];
                let attached = word.len() > 1 + letter.len();
                !attached
                    && (lookup(letter, true).is_some_and(|(_, a)| a == Arity::Value)
                        || spelling::sbatch_only_short(letter) == Some(true))
            }
        };
        options.push(word);
        if takes_value && let Some(v) = words.next() {
            options.push(v);
        }
    }
    let mut parsed = Parsed::default();
    parse_words(&mut parsed, 0, options)?;
    let script = words.next();
    Ok(CommandLine {
        parsed,
        script,
        script_args: words.collect(),
    })
}

/// The arity of long option `name` (or a unique prefix of it) when Gantry lists it.
fn long_arity(name: &str) -> Option<Arity> {
    lookup(name, false).map(|(_, a)| a)
}

/// sbatch's command line, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandLine {
    /// What its options ask for.
    pub parsed: Parsed,
    /// The batch script's path, when one is given.
    pub script: Option<String>,
    /// The words after the script: its arguments (`$1`...).
    pub script_args: Vec<String>,
}

fn parse_words(parsed: &mut Parsed, line: usize, words: Vec<String>) -> Result<(), SbatchError> {
    let fail = |directive: &str, message: String| SbatchError {
        line,
        directive: directive.to_string(),
        message,
    };
    let mut words = words.into_iter().peekable();
    while let Some(word) = words.next() {
        let (name, inline, short) = if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string()), false),
                None => (long.to_string(), None, false),
            }
        } else if let Some(s) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let split = s.chars().next().map_or(0, char::len_utf8);
            let (letter, rest) = s.split_at(split);
            let rest = rest.strip_prefix('=').unwrap_or(rest);
            let inline = (!rest.is_empty()).then(|| rest.to_string());
            (letter.to_string(), inline, true)
        } else {
            parsed.ignored.push(Ignored {
                line,
                directive: word,
                reason: "not an option (options start with - or --)".into(),
            });
            continue;
        };
        let known = lookup(&name, short);
        let has_inline = inline.is_some();
        let value = match (known.map(|k| k.1), inline) {
            (Some(Arity::Flag), Some(_)) if known.is_some_and(|k| k.0 != "exclusive") => {
                return Err(fail(&word, "takes no value".into()));
            }
            (Some(Arity::Flag), v) => v,
            (Some(Arity::Value), Some(v)) => Some(v),
            (Some(Arity::Value), None) => match words.next() {
                Some(v) => Some(v),
                None => return Err(fail(&word, "needs a value".into())),
            },
            // An option Gantry does not list: a value only if sbatch's takes one.
            (None, Some(v)) => Some(v),
            (None, None) => {
                let takes = if short {
                    spelling::sbatch_only_short(&name) == Some(true)
                } else {
                    spelling::sbatch_only(&name).is_some_and(|(_, v)| v)
                };
                if takes { words.next() } else { None }
            }
        };
        let shown = match &value {
            Some(v) if !has_inline => format!("{word} {v}"),
            _ => word.clone(),
        };
        let Some((long, _)) = known else {
            let reason = unknown_reason(&name, short).map_err(|m| fail(&shown, m))?;
            parsed.ignored.push(Ignored {
                line,
                directive: shown,
                reason,
            });
            continue;
        };
        let mut at = Directive {
            parsed,
            line,
            shown: &shown,
        };
        at.apply(long, value.as_deref().unwrap_or_default())
            .map_err(|m| fail(&shown, m))?;
    }
    Ok(())
}
