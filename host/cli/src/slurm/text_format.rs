//! SLURM's output format strings: `squeue -o "%.18i %9P %j"` (a `%` field with an optional
//! `.` for right alignment and a width, among literal text), `squeue -O "JobID:20,State"`
//! and `sacct -o "JobID,State%20"` (named fields with a width), and the cell each makes:
//! padded to its width and cut at it.
//!
//! Owns: reading those strings and sizing cells. Does not own what a field means.

/// One field of a format, and how wide it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    /// The field: a `%` letter (`i`) or a name (`JobID`, compared without case).
    pub field: String,
    /// The width to pad and cut to; `None`: as long as the value.
    pub width: Option<usize>,
    /// Aligned right (`%.18i`, `JobID:.20`).
    pub right: bool,
}

/// A `%` format: literal text and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    /// Text printed as it is.
    Text(String),
    /// A field.
    Field(Column),
}

/// Reads a `%` format (`squeue -o`, `sinfo -o`).
pub(super) fn percent_format(format: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            text.push('%');
            continue;
        }
        let right = chars.next_if_eq(&'.').is_some();
        let _ = chars.next_if_eq(&'-');
        let mut digits = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        let Some(letter) = chars.next() else {
            text.push('%');
            break;
        };
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(Piece::Field(Column {
            field: letter.to_string(),
            width: digits.parse().ok(),
            right,
        }));
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

/// Reads a list of named fields separated by commas, each with an optional width after
/// `width_mark` (`%` for sacct, `:` for squeue -O) and an optional `.` for right alignment.
pub(super) fn named_fields(format: &str, width_mark: char) -> Vec<Column> {
    format
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, size) = f.split_once(width_mark).unwrap_or((f, ""));
            let right = size.starts_with('.');
            Column {
                field: name.to_string(),
                width: size.trim_start_matches('.').parse().ok(),
                right,
            }
        })
        .collect()
}

/// `value` in a cell of `col`: cut to the width, padded to it.
pub(super) fn cell(value: &str, col: &Column) -> String {
    let Some(w) = col.width else {
        return value.to_string();
    };
    let cut: String = value.chars().take(w).collect();
    if col.right {
        format!("{cut:>w$}")
    } else {
        format!("{cut:<w$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_formats_keep_text_widths_and_alignment() {
        let p = percent_format("%.18i %9P|%j %%");
        let fields: Vec<(String, Option<usize>, bool)> = p
            .iter()
            .filter_map(|x| match x {
                Piece::Field(c) => Some((c.field.clone(), c.width, c.right)),
                Piece::Text(_) => None,
            })
            .collect();
        assert_eq!(
            fields,
            [
                ("i".into(), Some(18), true),
                ("P".into(), Some(9), false),
                ("j".into(), None, false)
            ]
        );
        assert_eq!(p.last(), Some(&Piece::Text(" %".into())));
    }

    #[test]
    fn named_fields_and_cells() {
        let f = named_fields("JobID,State%20,NodeList", '%');
        assert_eq!(f[1].width, Some(20));
        let o = named_fields("JobID:.8,Name", ':');
        assert_eq!(cell("123", &o[0]), "     123");
        assert_eq!(
            cell(
                "a-long-name",
                &Column {
                    field: "j".into(),
                    width: Some(4),
                    right: false
                }
            ),
            "a-lo"
        );
    }
}
