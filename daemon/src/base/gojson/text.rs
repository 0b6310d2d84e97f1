//! Byte- and rune-level rules of Go's standard library that shape the wire:
//! invalid UTF-8 replacement and the case folding
//! `encoding/json` uses to match object keys to struct fields.

/// Appends `bytes` to `out`, replacing every byte that does not begin a
/// valid UTF-8 sequence with U+FFFD — Go's `utf8.DecodeRune` semantics,
/// which differ from `String::from_utf8_lossy` on truncated sequences
/// (`E2 82` is two replacement characters in Go, one in Rust).
pub(crate) fn push_go_lossy(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// Converts bytes to a string the way Go's JSON layer treats them.
pub(crate) fn go_lossy(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    push_go_lossy(&mut out, bytes);
    out
}

/// Go's `foldName`: `unicode.ToUpper(unicode.ToLower(r))` per rune. Struct
/// field names are ASCII, so the only runes that matter beyond ASCII are the
/// few whose fold is an ASCII letter (the long s, the Kelvin sign, the dotted
/// and dotless i); everything else can never match a field and is kept.
pub(crate) fn fold_key(key: &str) -> String {
    key.chars()
        .map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            '\u{17f}' => 'S',
            '\u{212a}' => 'K',
            '\u{130}' | '\u{131}' => 'I',
            _ => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_matches_go_decode_rune() {
        assert_eq!(go_lossy(b"ok"), "ok");
        assert_eq!(go_lossy(b"\xff\xfe"), "\u{fffd}\u{fffd}");
        assert_eq!(go_lossy(b"a\xe2\x82"), "a\u{fffd}\u{fffd}");
        assert_eq!(go_lossy(b"\xf0\x9f\x98"), "\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(go_lossy("é€😀".as_bytes()), "é€😀");
        assert_eq!(go_lossy(b"\xc0\x80"), "\u{fffd}\u{fffd}");
    }

    #[test]
    fn fold_matches_go_fold_name() {
        assert_eq!(fold_key("maxBytes"), "MAXBYTES");
        assert_eq!(fold_key("MAXBYTES"), "MAXBYTES");
        assert_eq!(fold_key("ſ"), "S");
        assert_eq!(fold_key("\u{212a}ey"), "KEY");
        assert_eq!(fold_key("pαth"), "PαTH");
    }
}
