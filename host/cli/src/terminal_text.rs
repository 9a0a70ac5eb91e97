//! Text from a job (its log) shown on the user's terminal: a job may print control
//! sequences that set the terminal's title, move the cursor, rewrite what was shown or, on
//! some terminals, answer back into the input. When stdout is a terminal, `gantry logs`
//! shows every control character but newline and tab as a visible escape (`\x1b`, `\r`);
//! piped or redirected, the bytes pass unchanged (`docs/security.md`, issue 26).
//!
//! Owns the escaping. It does not decide when stdout is a terminal (the caller does).

use std::borrow::Cow;

/// `text` with every control character except `\n` and `\t` written as a visible escape.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let is_shown_raw = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(is_shown_raw) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if is_shown_raw(c) => out.push(c),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_obeyed() {
        assert!(matches!(escape_controls("plain\n\ttext"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\x1b]0;owned\x07b\r\n"),
            "a\\x1b]0;owned\\x07b\\r\n"
        );
        assert_eq!(escape_controls("\u{9b}2J"), "\\x9b2J");
    }
}
