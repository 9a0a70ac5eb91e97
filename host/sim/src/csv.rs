//! A small reader for the simulator's CSV inputs (header row, comma-separated, no
//! quoting: the trace and Gantry's own job CSV need none). Every error names the file,
//! the line and the column.
//!
//! Owns: splitting and typed field access. Does not own any schema.

use std::path::{Path, PathBuf};

/// A bad input file, naming where.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The file cannot be read.
    #[error("{path}: {cause}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        cause: std::io::Error,
    },
    /// A required column is missing from the header.
    #[error("{path}:1: missing column `{column}` (header: {header})")]
    MissingColumn {
        /// File.
        path: PathBuf,
        /// Column.
        column: String,
        /// The header as read.
        header: String,
    },
    /// A field is missing or malformed.
    #[error("{path}:{line}: field `{column}`: {message}")]
    Field {
        /// File.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Column.
        column: String,
        /// What is wrong.
        message: String,
    },
}

/// A CSV file split into a header and rows.
#[derive(Debug)]
pub struct Table {
    path: PathBuf,
    header: Vec<String>,
    lines: Vec<(usize, String)>,
}

/// One row, with its line number for errors.
#[derive(Debug)]
pub struct Row<'a> {
    table: &'a Table,
    line: usize,
    fields: Vec<&'a str>,
}

impl Table {
    /// Reads `path`; blank lines and lines starting with `#` are skipped.
    pub fn read(path: &Path) -> Result<Self, CsvError> {
        let text = std::fs::read_to_string(path).map_err(|cause| CsvError::Io {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(Self::parse(path, &text))
    }

    /// Splits `text` (named `path` in errors).
    pub fn parse(path: &Path, text: &str) -> Self {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim_end_matches('\r').to_string()))
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
        let header = lines
            .next()
            .map(|(_, h)| h.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        Self {
            path: path.to_path_buf(),
            header,
            lines: lines.collect(),
        }
    }

    /// Index of a required column.
    pub fn column(&self, name: &str) -> Result<usize, CsvError> {
        self.optional_column(name)
            .ok_or_else(|| CsvError::MissingColumn {
                path: self.path.clone(),
                column: name.into(),
                header: self.header.join(","),
            })
    }

    /// Index of an optional column.
    pub fn optional_column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The header's column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The data rows.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.lines.iter().map(|(line, text)| Row {
            table: self,
            line: *line,
            fields: text.split(',').map(str::trim).collect(),
        })
    }
}

impl Row<'_> {
    /// The error for column `col` of this row.
    pub fn error(&self, col: usize, message: impl Into<String>) -> CsvError {
        CsvError::Field {
            path: self.table.path.clone(),
            line: self.line,
            column: self.table.header.get(col).cloned().unwrap_or_default(),
            message: message.into(),
        }
    }

    /// The text of column `col` ("" for an empty field; an error when the row is short).
    pub fn text(&self, col: usize) -> Result<&str, CsvError> {
        self.fields.get(col).copied().ok_or_else(|| {
            self.error(
                col,
                format!(
                    "missing: the row has {} fields, the header {}",
                    self.fields.len(),
                    self.table.header.len()
                ),
            )
        })
    }

    /// Column `col` parsed as `T` (an empty field is an error).
    pub fn parse<T: std::str::FromStr>(&self, col: usize) -> Result<T, CsvError>
    where
        T::Err: std::fmt::Display,
    {
        let text = self.text(col)?;
        text.parse()
            .map_err(|e| self.error(col, format!("`{text}` is not valid: {e}")))
    }

    /// Column `col` parsed as `T`, or `default` when the column is absent or empty.
    pub fn parse_or<T: std::str::FromStr>(
        &self,
        col: Option<usize>,
        default: T,
    ) -> Result<T, CsvError>
    where
        T::Err: std::fmt::Display,
    {
        match col {
            Some(c) if !self.text(c)?.is_empty() => self.parse(c),
            _ => Ok(default),
        }
    }
}
