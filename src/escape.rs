//! Text from the workspace (file names) on a terminal: a confined command chooses
//! those names, so control characters are shown escaped, never sent raw (an escape
//! sequence could retitle, rewrite or query the person's terminal, and a newline
//! could forge a line of veilfs's own).

/// `bytes` as text for a terminal: a byte that is not UTF-8 as `\xNN`, and every control
/// character (C0, DEL, C1) as `\xNN` or `\u{NNNN}`.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        // A byte that is not UTF-8 is shown as the byte it is, never as U+FFFD
        // (which two different names would share).
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `text` with every control character escaped (see [`printable`]).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || invisible(c) {
            let n = c as u32;
            if n < 0x100 {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:04x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `v` as one line of JSON with every control and invisible character (see
/// [`escape`]) written as a `\uXXXX` escape: serde writes C1 controls and DEL
/// raw, and a log or a `--json` line may end up on a terminal.
pub fn json(v: &serde_json::Value) -> String {
    let raw = v.to_string();
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if (c.is_control() || invisible(c)) && (c as u32) >= 0x20 {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Format characters that change how a line is shown without showing themselves:
/// bidirectional overrides, embeddings and isolates (which can make a terminal
/// show text in another order), zero-width characters and the byte-order mark.
fn invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x061C | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
            | 0xFEFF | 0xFFF9..=0xFFFB
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable(b"a\x1b]0;x\x07\nb"), "a\\x1b]0;x\\x07\\x0ab");
        assert_eq!(printable(b"caf\xc3\xa9 \x7f"), "café \\x7f");
        assert_eq!(escape("\u{9b}6n"), "\\x9b6n");
        assert_eq!(printable(b"\xff.key"), "\\xff.key");
        // Bidirectional overrides and zero-width characters are escaped too.
        assert_eq!(escape("a\u{202e}txt.exe"), "a\\u{202e}txt.exe");
        assert_eq!(escape("x\u{200b}\u{2066}y"), "x\\u{200b}\\u{2066}y");
        let v = serde_json::json!({ "path": "a\u{9b}31m\u{7f}\u{202e}b\u{1b}" });
        let j = super::json(&v);
        assert_eq!(j, r#"{"path":"a\u009b31m\u007f\u202eb\u001b"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&j).unwrap(), v);
    }
}
