//! The decoded form of a request line, and the parser that produces it.
//!
//! The parser follows Go's `encoding/json` scanner rather than RFC 8259 to
//! the letter, because the reference daemon is a Go program:
//!
//! * object members are kept in source order, duplicates included, so that
//!   struct binding can apply Go's "last key wins" rule;
//! * numbers are kept as their literal text, so that binding into an integer
//!   field can reject `1.5` and `1e3` exactly like `strconv.ParseInt`;
//! * invalid UTF-8 and unpaired `\uD800`-style escapes become U+FFFD, one per
//!   bad byte, instead of failing;
//! * nesting deeper than 10 000 levels is a syntax error (Go's limit), and
//!   the parser is iterative, so hostile input cannot overflow the stack.

use super::text::push_go_lossy;

/// A JSON value as Go's decoder sees it before binding.
///
/// `Clone`, `PartialEq`, `Debug` and `Drop` are written out instead of
/// derived: derived ones recurse once per nesting level, and a hostile
/// line nests 10 000 levels. They live in [`super::walk`], beside the
/// traversal they use.
#[derive(Default)]
pub(crate) enum Value {
    #[default]
    Null,
    Bool(bool),
    /// The number exactly as written in the input (already grammar-checked).
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// Members in input order; duplicate keys are preserved.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// A short name of the JSON type, for error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

/// Go's `maxNestingDepth`.
pub(crate) const MAX_DEPTH: usize = 10_000;

/// Why a line is not one JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub offset: usize,
    pub what: &'static str,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}", self.what, self.offset)
    }
}

impl std::error::Error for SyntaxError {}

/// Parses exactly one JSON value surrounded by optional JSON whitespace.
pub(crate) fn parse(input: &[u8]) -> Result<Value, SyntaxError> {
    let mut p = Parser { input, pos: 0 };
    let value = p.parse_value()?;
    p.skip_ws();
    if p.pos != input.len() {
        return Err(p.error("invalid character after top-level value"));
    }
    Ok(value)
}

/// A container being filled while the parser descends.
enum Open {
    Array(Vec<Value>),
    Object(Vec<(String, Value)>, String),
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &'static str) -> SyntaxError {
        SyntaxError { offset: self.pos, what }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.input.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn parse_value(&mut self) -> Result<Value, SyntaxError> {
        let mut stack: Vec<Open> = Vec::new();
        loop {
            // Parse one value start; containers push onto the stack.
            self.skip_ws();
            let mut done = match self.peek() {
                Some(b'[' | b'{') if stack.len() >= MAX_DEPTH => {
                    return Err(self.error("exceeded max depth"));
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Open::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Vec::new())
                    } else {
                        let key = self.parse_key()?;
                        stack.push(Open::Object(Vec::new(), key));
                        continue;
                    }
                }
                Some(b'"') => Value::String(self.parse_string()?),
                Some(b't') => self.literal(b"true", Value::Bool(true))?,
                Some(b'f') => self.literal(b"false", Value::Bool(false))?,
                Some(b'n') => self.literal(b"null", Value::Null)?,
                Some(b'-' | b'0'..=b'9') => Value::Number(self.parse_number()?),
                Some(_) => return Err(self.error("invalid character looking for beginning of value")),
                None => return Err(self.error("unexpected end of JSON input")),
            };
            // Attach the finished value to its parent, closing as many
            // containers as the input closes.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(done);
                };
                self.skip_ws();
                match top {
                    Open::Array(items) => {
                        items.push(done);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                break;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Open::Array(items)) = stack.pop() else {
                                    unreachable!("top of stack is an array")
                                };
                                done = Value::Array(items);
                            }
                            None => return Err(self.error("unexpected end of JSON input")),
                            _ => return Err(self.error("invalid character after array element")),
                        }
                    }
                    Open::Object(members, key) => {
                        members.push((std::mem::take(key), done));
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.parse_key()?;
                                break;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Open::Object(members, _)) = stack.pop() else {
                                    unreachable!("top of stack is an object")
                                };
                                done = Value::Object(members);
                            }
                            None => return Err(self.error("unexpected end of JSON input")),
                            _ => return Err(self.error("invalid character after object value")),
                        }
                    }
                }
            }
        }
    }

    /// Parses `"key" :` and leaves the cursor before the value.
    fn parse_key(&mut self) -> Result<String, SyntaxError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("invalid character looking for beginning of object key string"));
        }
        let key = self.parse_string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.error("invalid character after object key"));
        }
        self.pos += 1;
        Ok(key)
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Result<Value, SyntaxError> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn parse_number(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid character in numeric literal")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid character after decimal point in numeric literal"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid character in exponent of numeric literal"));
            }
        }
        // The slice is ASCII by construction.
        Ok(String::from_utf8_lossy(&self.input[start..self.pos]).into_owned())
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.input.get(at..at + 4)?;
        let mut value = 0u32;
        for &d in digits {
            value = value * 16 + (d as char).to_digit(16)?;
        }
        Some(value)
    }

    /// Parses a string literal starting at the opening quote.
    fn parse_string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        let mut raw_start = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unexpected end of JSON input"));
            };
            match b {
                b'"' => {
                    push_go_lossy(&mut out, &self.input[raw_start..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    push_go_lossy(&mut out, &self.input[raw_start..self.pos]);
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error("unexpected end of JSON input"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let Some(first) = self.hex4(self.pos) else {
                                return Err(self.error("invalid character in \\u hexadecimal character escape"));
                            };
                            self.pos += 4;
                            out.push(self.finish_u_escape(first));
                        }
                        _ => return Err(self.error("invalid character in string escape code")),
                    }
                    raw_start = self.pos;
                }
                0x00..=0x1f => return Err(self.error("invalid character in string literal")),
                _ => self.pos += 1,
            }
        }
    }

    /// Resolves a `\uXXXX` escape, consuming a following low surrogate when
    /// it completes a pair. Anything unpaired becomes U+FFFD, as in Go.
    fn finish_u_escape(&mut self, first: u32) -> char {
        if (0xD800..0xE000).contains(&first) {
            if first < 0xDC00 && self.input.get(self.pos..self.pos + 2) == Some(b"\\u") {
                if let Some(second) = self.hex4(self.pos + 2) {
                    if (0xDC00..0xE000).contains(&second) {
                        self.pos += 6;
                        let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        return char::from_u32(combined).unwrap_or(char::REPLACEMENT_CHARACTER);
                    }
                }
            }
            return char::REPLACEMENT_CHARACTER;
        }
        char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.to_string())
    }

    #[test]
    fn parses_nested_values_in_order_with_duplicates() {
        let v = parse(br#" {"b":1,"a":[true,false,null],"b":"x"} "#).unwrap();
        assert_eq!(
            v,
            Value::Object(vec![
                ("b".into(), Value::Number("1".into())),
                (
                    "a".into(),
                    Value::Array(vec![Value::Bool(true), Value::Bool(false), Value::Null])
                ),
                ("b".into(), s("x")),
            ])
        );
    }

    #[test]
    fn keeps_number_literals_verbatim() {
        for lit in ["0", "-0", "1.5", "1e3", "-12.5E-7", "12345678901234567890", "1e400"] {
            assert_eq!(parse(lit.as_bytes()).unwrap(), Value::Number(lit.into()));
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "",
            " ",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "-",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "[1 2]",
            "tru",
            "nul",
            "\"a",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "{} x",
            "[1,2]]",
            "{1:2}",
            "NaN",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn replaces_invalid_utf8_per_byte_like_go() {
        // E2 82 is a truncated three-byte sequence: Go yields two U+FFFD.
        let v = parse(b"\"x\xe2\x82y\xff\"").unwrap();
        assert_eq!(v, s("x\u{fffd}\u{fffd}y\u{fffd}"));
        // A UTF-8-encoded surrogate is three bad bytes.
        assert_eq!(parse(b"\"\xed\xa0\x80\"").unwrap(), s("\u{fffd}\u{fffd}\u{fffd}"));
    }

    #[test]
    fn resolves_surrogate_escapes_like_go() {
        assert_eq!(parse(br#""\ud83d\ude00""#).unwrap(), s("\u{1f600}"));
        assert_eq!(parse(br#""\ud800x""#).unwrap(), s("\u{fffd}x"));
        assert_eq!(parse(br#""\ud800\ud800""#).unwrap(), s("\u{fffd}\u{fffd}"));
        assert_eq!(parse(br#""\udc00""#).unwrap(), s("\u{fffd}"));
        assert_eq!(parse(br#""\u00e9\n\/""#).unwrap(), s("é\n/"));
    }

    #[test]
    fn depth_limit_is_an_error_not_a_crash() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).is_err());
        let deep_object = "{\"a\":".repeat(MAX_DEPTH) + "{}" + &"}".repeat(MAX_DEPTH);
        assert!(parse(deep_object.as_bytes()).is_err());
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(ok.as_bytes()).is_ok());
        let unclosed = "{\"a\":".repeat(200_000);
        assert!(parse(unclosed.as_bytes()).is_err());
    }
}
