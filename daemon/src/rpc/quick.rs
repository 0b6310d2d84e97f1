//! The allocation-free path for the commonest requests, `server.ping`
//! and `process.stdin`: a scanner that recognises such an envelope in its
//! plainest form and yields what the full decoder of [`crate::gojson`]
//! would bind (the id's bytes to echo, and for stdin the params borrowed
//! from the line), or gives up so the full decoder decides.
//!
//! It accepts only input whose Go decoding is certain without building a
//! tree: one object whose members are the exact lowercase names
//! `jsonrpc`, `id`, `method`, `params`, `auth`, each at most once (no
//! case folding, no duplicates, no unknown members); string values of
//! valid UTF-8 without escapes or control characters; an id that Go would write back
//! unchanged (a short string without `<`, `>`, `&`, an integer of at most
//! 15 digits, or `null`). The token and version must match. A ping's
//! params are absent, `null` or an empty object; a stdin call's params are
//! an object whose members are among the exact names `id`, `data` (plain
//! strings) and `offset` (`null` or a canonical unsigned integer that fits
//! in 64 bits), each at most once.
//! Anything else returns `None`, never a different answer: the full
//! path's reply for such a line is the same bytes. Only the parsing is
//! replaced: what a quick stdin call is answered comes from the same
//! handler as on the full path.

use crate::params::StdinParams;

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
}

/// A plain request the quick path answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick<'a> {
    /// `server.ping`, with the id to echo.
    Ping(ShortId),
    /// `process.stdin`, with the id to echo and the params as Go binds them.
    Stdin(ShortId, StdinParams<'a>),
}

/// The `params` member as scanned: a flat object of the members a quick
/// request may carry.
#[derive(Default)]
struct FlatParams<'a> {
    /// The member was `null`.
    null: bool,
    members: usize,
    stdin: StdinParams<'a>,
}

impl<'a> Scan<'a> {
    /// `offset`: `null`, or digits without sign, fraction, exponent or a
    /// leading zero, fitting in a `u64` (Go's `*uint64`).
    fn offset(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let digits = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (text, tail) = self.rest.split_at(digits);
        if digits == 0 || (text.first() == Some(&b'0') && digits > 1) {
            return None;
        }
        if matches!(tail.first(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut value: u64 = 0;
        for digit in text {
            value = value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
        }
        self.rest = tail;
        Some(Some(value))
    }

    /// params: `null`, or an object of at most `id`, `data` (plain strings)
    /// and `offset`, each once.
    fn flat_params(&mut self) -> Option<FlatParams<'a>> {
        let mut params = FlatParams::default();
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            params.null = true;
            return Some(params);
        }
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.eat(b'}')?;
            return Some(params);
        }
        let (mut id, mut data, mut offset) = (false, false, false);
        loop {
            let key = self.plain_string()?;
            self.eat(b':')?;
            match key {
                b"id" if !id => {
                    id = true;
                    params.stdin.id = self.plain_str()?;
                }
                b"data" if !data => {
                    data = true;
                    params.stdin.data = self.plain_str()?;
                }
                b"offset" if !offset => {
                    offset = true;
                    params.stdin.offset = self.offset()?;
                }
                _ => return None,
            }
            params.members += 1;
            match self.peek()? {
                b',' => self.eat(b',')?,
                _ => break,
            }
        }
        self.eat(b'}')?;
        Some(params)
    }

    /// [`Scan::plain_string`] as text.
    fn plain_str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.plain_string()?).ok()
    }
}

/// What the quick path answers for `line`, if it is a plain, authorised
/// `server.ping` or `process.stdin` (see the module comment).
pub fn request<'a>(line: &'a [u8], token: &[u8]) -> Option<Quick<'a>> {
    let mut scan = Scan { rest: line };
    scan.eat(b'{')?;
    let (mut jsonrpc, mut id, mut method, mut auth, mut params) = (None, None, None, None, None);
    if scan.peek()? != b'}' {
        loop {
            let key = scan.plain_string()?;
            scan.eat(b':')?;
            match key {
                b"jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(scan.plain_string()?),
                b"method" if method.is_none() => method = Some(scan.plain_string()?),
                b"auth" if auth.is_none() => auth = Some(scan.plain_string()?),
                b"id" if id.is_none() => id = Some(scan.plain_id()?),
                b"params" if params.is_none() => params = Some(scan.flat_params()?),
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
    if !super::constant_time_eq(auth?, token) || jsonrpc? != b"2.0" {
        return None;
    }
    let id = ShortId::new(id.unwrap_or(b"null"))?;
    match method? {
        // server.* ignores params; only the plainest forms are taken here.
        b"server.ping" => match params {
            None => Some(Quick::Ping(id)),
            Some(p) if p.null || p.members == 0 => Some(Quick::Ping(id)),
            Some(_) => None,
        },
        // Absent or `null` params are the params gate's business.
        b"process.stdin" => match params {
            Some(p) if !p.null => Some(Quick::Stdin(id, p.stdin)),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{check, success_line, Checked};

    const TOKEN: &[u8] = b"tok";

    /// The id to echo if `line` is a plain, authorised `server.ping`.
    fn ping(line: &[u8], token: &[u8]) -> Option<ShortId> {
        match request(line, token)? {
            Quick::Ping(id) => Some(id),
            Quick::Stdin(..) => None,
        }
    }

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
