//! The allocation-free path for the commonest request, `server.ping`:
//! a scanner that recognises a ping envelope in its plainest form and
//! yields the id's bytes to echo, or gives up so the full decoder of
//! [`crate::gojson`] decides.
//!
//! It accepts only input whose Go decoding is certain without building a
//! tree: one object whose members are the exact lowercase names
//! `jsonrpc`, `id`, `method`, `params`, `auth`, each at most once (no
//! case folding, no duplicates, no unknown members); string values of
//! valid UTF-8 without escapes or control characters; an id that Go would write back
//! unchanged (a short string without `<`, `>`, `&`, an integer of at most
//! 15 digits, or `null`); params absent, `null` or an empty object. The
//! token and version must match and the method must be `server.ping`.
//! Anything else returns `None`, never a different answer: the full
//! path's reply for such a line is the same bytes.

/// The longest id echoed from the quick path, as written (quotes
/// included).
pub const ID_MAX: usize = 40;

/// The id of a quick ping, as it appears in the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortId {
    len: u8,
    bytes: [u8; ID_MAX],
}

impl ShortId {
    fn new(text: &[u8]) -> Option<ShortId> {
        let mut bytes = [0u8; ID_MAX];
        bytes.get_mut(..text.len())?.copy_from_slice(text);
        Some(ShortId {
            len: u8::try_from(text.len()).ok()?,
            bytes,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or_default()
    }
}

/// A byte scanner over one line.
struct Scan<'a> {
    rest: &'a [u8],
}

impl<'a> Scan<'a> {
    fn skip_space(&mut self) {
        while let Some((b' ' | b'\t' | b'\n' | b'\r', tail)) = self.rest.split_first() {
            self.rest = tail;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        let (&first, tail) = self.rest.split_first()?;
        (first == byte).then(|| self.rest = tail)
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.rest.first().copied()
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.skip_space();
        self.rest = self.rest.strip_prefix(word)?;
        Some(())
    }

    /// A string of valid UTF-8 without escapes or control characters
    /// (which Go decodes to the same bytes); returns its contents.
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let end = self.rest.iter().position(|&b| b == b'"')?;
        let (body, tail) = self.rest.split_at(end);
        if !body.iter().all(|&b| b >= 0x20 && b != 0x7f && b != b'\\') || std::str::from_utf8(body).is_err() {
            return None;
        }
        self.rest = tail.get(1..)?;
        Some(body)
    }

    /// An id Go writes back unchanged; returns it as written.
    fn plain_id(&mut self) -> Option<&'a [u8]> {
        let start = {
            self.skip_space();
            self.rest
        };
        match self.peek()? {
            b'"' => {
                let body = self.plain_string()?;
                // Go writes these (and non-ASCII U+2028, U+2029) escaped.
                if body.iter().any(|b| matches!(b, b'<' | b'>' | b'&') || !b.is_ascii()) {
                    return None;
                }
                start.get(..body.len() + 2)
            }
            b'n' => {
                self.literal(b"null")?;
                start.get(..4)
            }
            _ => {
                let negative = usize::from(self.rest.first() == Some(&b'-'));
                let digits = self
                    .rest
                    .iter()
                    .skip(negative)
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let first = self.rest.get(negative).copied();
                if digits == 0 || digits > 15 || (first == Some(b'0') && digits > 1) {
                    return None;
                }
                // A number must end here: no fraction or exponent.
                let after = self.rest.get(negative + digits).copied();
                if matches!(after, Some(b'.' | b'e' | b'E')) {
                    return None;
                }
                let (id, tail) = self.rest.split_at(negative + digits);
                self.rest = tail;
                Some(id)
            }
        }
    }

    /// params: `null` or `{}` only.
    fn empty_params(&mut self) -> Option<()> {
        match self.peek()? {
            b'n' => self.literal(b"null"),
            _ => {
                self.eat(b'{')?;
                self.eat(b'}')
            }
        }
    }
}

/// The id to echo if `line` is a plain, authorised `server.ping`.
pub fn ping(line: &[u8], token: &[u8]) -> Option<ShortId> {
    let mut scan = Scan { rest: line };
    scan.eat(b'{')?;
    let (mut jsonrpc, mut id, mut method, mut auth, mut params) = (None, None, None, None, false);
    if scan.peek()? != b'}' {
        loop {
            let key = scan.plain_string()?;
            scan.eat(b':')?;
            match key {
                b"jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(scan.plain_string()?),
                b"method" if method.is_none() => method = Some(scan.plain_string()?),
                b"auth" if auth.is_none() => auth = Some(scan.plain_string()?),
                b"id" if id.is_none() => id = Some(scan.plain_id()?),
                b"params" if !params => {
                    scan.empty_params()?;
                    params = true;
                }
                _ => return None,
            }
            match scan.peek()? {
                b',' => scan.eat(b',')?,
                _ => break,
            }
        }
    }
    scan.eat(b'}')?;
    scan.skip_space();
    if !scan.rest.is_empty() {
        return None;
    }
    if !super::constant_time_eq(auth?, token) || jsonrpc? != b"2.0" || method? != b"server.ping" {
        return None;
    }
    ShortId::new(id.unwrap_or(b"null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{check, success_line, Checked};

    const TOKEN: &[u8] = b"tok";

    /// What the full path answers for a ping line, if it is a valid ping.
    fn full(line: &str) -> Option<Vec<u8>> {
        match check(line.as_bytes(), TOKEN) {
            Checked::Valid(r) if r.method.to_string() == "server.ping" => {
                Some(success_line(&r.id, br#"{"pong":true}"#))
            }
            _ => None,
        }
    }

    fn quick(line: &str) -> Option<Vec<u8>> {
        let id = ping(line.as_bytes(), TOKEN)?;
        let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b",\"result\":{\"pong\":true}}\n");
        Some(out)
    }

    #[test]
    fn plain_pings_are_answered_as_the_full_path_answers_them() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","params":{},"auth":"tok"}"#,
            r#" { "auth" : "tok" , "method":"server.ping","jsonrpc":"2.0","params":null,"id":"a b"} "#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":123456789012345,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":"~ok","method":"server.ping","auth":"tok","params":{ }}"#,
        ] {
            assert!(quick(line).is_some(), "{line}");
            assert_eq!(quick(line), full(line), "{line}");
        }
    }

    #[test]
    fn anything_unusual_goes_to_the_full_path() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1.0,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1e3,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":01,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1234567890123456,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":"a<b","method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":"é","method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok","Auth":"bad"}"#,
            r#"{"JSONRPC":"2.0","id":1,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok","x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","params":{"a":1},"auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"bad"}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"to\u{7f}\"}",
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok\u0000"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.version","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok"} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok",}"#,
            r#"{"jsonrpc":"2.0","id":1 "method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":"0123456789012345678901234567890123456789","method":"server.ping","auth":"tok"}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\",\"method\":\"server.ping\",\"auth\":\"tok\"}",
        ] {
            assert_eq!(quick(line), None, "{line}");
        }
    }
}
