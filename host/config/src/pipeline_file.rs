//! Pipeline files as users write them (`gantry policy set`, `gantry simulate --pipeline`,
//! `gantry replay`): JSON, or TOML when the name ends in `.toml`, read into the JSON the API
//! and the policy registry take.
//!
//! Owns reading and parsing the text. Checking the pipeline is `policy`'s.

use anyhow::Context;
use serde_json::Value;

/// Reads a pipeline file: JSON, or TOML when the name ends in `.toml`.
pub fn read_pipeline(path: &std::path::Path) -> anyhow::Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot open {}", path.display()))?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    let is_toml = path.extension().is_some_and(|e| e == "toml");
    parse_pipeline_text(&text, is_toml, &path.display().to_string())
}

/// Parses a pipeline file's text (TOML when `is_toml`, JSON otherwise) into JSON; `name`
/// names the file in errors. The text-level half of [`read_pipeline`], fed by the fuzz
/// target `pipeline`.
pub fn parse_pipeline_text(text: &str, is_toml: bool, name: &str) -> anyhow::Result<Value> {
    if is_toml {
        let v: toml::Value =
            toml::from_str(text).with_context(|| format!("{name} is not valid TOML"))?;
        return serde_json::to_value(v).with_context(|| format!("{name}: cannot convert to JSON"));
    }
    serde_json::from_str(text).with_context(|| format!("{name} is not valid JSON"))
}
