//! The allocation-free path for the commonest requests, `server.ping`
//! and `process.stdin`: a scanner that recognises such an envelope in its
//! plainest form and yields what the full decoder of [`crate::base::gojson`]
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

use crate::protocol::params::StdinParams;

/// The longest id echoed from the quick path, as written (quotes
/// included).
pub(crate) const ID_MAX: usize = 40;

/// The id of a quick ping, as it appears in the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShortId {
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

    pub(crate) fn as_bytes(&self) -> &[u8] {
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
pub(crate) enum Quick<'a> {
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
pub(crate) fn request<'a>(line: &'a [u8], token: &[u8]) -> Option<Quick<'a>> {
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
    use crate::protocol::rpc::{check, success_line, Checked};
    use base64::Engine;
    use proptest::strategy::Strategy;

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
        match check(line.as_bytes(), TOKEN, crate::protocol::build::NEWEST) {
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

    /// What the full decoder binds for a line: the id as Go writes it
    /// back, and for `process.stdin` the params through the params gate.
    fn full_binding(line: &[u8]) -> Option<(Vec<u8>, Option<crate::protocol::params::ProcessParams>)> {
        use crate::protocol::method::{Method, ProcessMethod, ServerMethod};
        let Checked::Valid(r) = check(line, TOKEN, crate::protocol::build::NEWEST) else {
            return None;
        };
        let mut id = Vec::new();
        crate::base::gojson::write_value(&mut id, &r.id);
        match r.method {
            Method::Server(ServerMethod::Ping) => Some((id, None)),
            Method::Process(ProcessMethod::Stdin) => {
                let params = crate::serve::dispatch::bind_params(
                    &r.params,
                    crate::protocol::params::ProcessParams::from_go_value,
                )
                .ok()?;
                Some((id, Some(params)))
            }
            _ => None,
        }
    }

    /// Asserts the quick path either gives up on `line` or yields exactly
    /// what the full decoder binds; returns whether it took the line.
    fn agrees_with_the_full_path(line: &[u8]) -> bool {
        let Some(quick) = request(line, TOKEN) else {
            return false;
        };
        let shown = String::from_utf8_lossy(line);
        let (id, params) =
            full_binding(line).unwrap_or_else(|| panic!("quick took a line the full path rejects: {shown}"));
        match quick {
            Quick::Ping(quick_id) => {
                assert_eq!(quick_id.as_bytes(), id.as_slice(), "{shown}");
                assert!(params.is_none(), "{shown}");
            }
            Quick::Stdin(quick_id, quick_params) => {
                assert_eq!(quick_id.as_bytes(), id.as_slice(), "{shown}");
                let params = params.unwrap_or_else(|| panic!("quick stdin for another method: {shown}"));
                assert_eq!(quick_params, params.stdin(), "{shown}");
            }
        }
        true
    }

    const STDIN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"process.stdin","params":{"id":"p","data":"aGk=","offset":2},"auth":"tok"}"#;

    #[test]
    fn plain_stdin_calls_are_taken_with_their_params() {
        for line in [
            STDIN,
            r#"{"jsonrpc":"2.0","id":1,"method":"process.stdin","params":{"id":"p","data":"aGk="},"auth":"tok"}"#,
            r#"{"auth":"tok","params":{"offset":null,"data":"","id":"p"},"method":"process.stdin","jsonrpc":"2.0"}"#,
            r#" {"jsonrpc" : "2.0", "id" : "x y", "method" : "process.stdin", "params" : { "offset" : 18446744073709551615 } , "auth" : "tok" } "#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"process.stdin","params":{},"auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"process.stdin","params":{"id":"é","data":"!!","offset":0},"auth":"tok"}"#,
        ] {
            assert!(agrees_with_the_full_path(line.as_bytes()), "{line}");
        }
        let Some(Quick::Stdin(id, params)) = request(STDIN.as_bytes(), TOKEN) else {
            panic!("not taken");
        };
        assert_eq!(id.as_bytes(), b"1");
        assert_eq!(
            params,
            StdinParams {
                id: "p",
                data: "aGk=",
                offset: Some(2)
            }
        );
    }

    #[test]
    fn unusual_stdin_calls_go_to_the_full_path() {
        for (from, to) in [
            // Case-folded, repeated or unknown members.
            (r#""data""#, r#""Data""#),
            (r#""id":"p""#, r#""id":"p","id":"p""#),
            (r#""offset":2"#, r#""offset":2,"offset":2"#),
            (r#""offset":2"#, r#""offset":2,"cwd":"/""#),
            (r#""auth":"tok""#, r#""auth":"tok","x":1"#),
            (r#""method""#, r#""Method""#),
            // Escapes and control characters in strings.
            ("aGk=", r"aG\u0073="),
            ("aGk=", r"aG\r\nk="),
            (r#""id":"p""#, r#""id":"\u0070""#),
            (r#""id":"p""#, "\"id\":\"p\t\""),
            ("process.stdin", r"process.std\u0069n"),
            // Ids Go re-encodes, or too long to carry inline.
            (r#""id":1"#, r#""id":1.0"#),
            (r#""id":1"#, r#""id":01"#),
            (r#""id":1"#, r#""id":"a<b""#),
            (r#""id":1"#, r#""id":{"a":1}"#),
            (r#""id":1"#, r#""id":"0123456789012345678901234567890123456789""#),
            // Offsets that are not canonical unsigned integers.
            (r#""offset":2"#, r#""offset":02"#),
            (r#""offset":2"#, r#""offset":2.0"#),
            (r#""offset":2"#, r#""offset":2e0"#),
            (r#""offset":2"#, r#""offset":-2"#),
            (r#""offset":2"#, r#""offset":-0"#),
            (r#""offset":2"#, r#""offset":"2""#),
            (r#""offset":2"#, r#""offset":18446744073709551616"#),
            // Params the gate decides, or of the wrong kind.
            (r#""params":{"id":"p","data":"aGk=","offset":2},"#, ""),
            (r#"{"id":"p","data":"aGk=","offset":2}"#, "null"),
            (r#"{"id":"p","data":"aGk=","offset":2}"#, "[]"),
            (r#""id":"p""#, r#""id":null"#),
            (r#""data":"aGk=""#, r#""data":5"#),
            // Envelope rules: token, version, method, trailing bytes.
            (r#""auth":"tok""#, r#""auth":"bad""#),
            (r#""auth":"tok""#, ""),
            ("2.0", "1.0"),
            ("process.stdin", "process.kill"),
            (r#""tok"}"#, r#""tok"} x"#),
            (r#""tok"}"#, r#""tok",}"#),
        ] {
            assert!(STDIN.contains(from), "{from}");
            let line = STDIN.replacen(from, to, 1);
            assert_eq!(request(line.as_bytes(), TOKEN), None, "{line}");
        }
    }

    /// The proptest strategy of generated request lines, in its parts:
    /// values (strings, base64 data, offsets, ids), member sets and objects.
    mod lines {
        use base64::Engine;
        use proptest::prelude::*;

        type Member = (&'static str, String);

        /// Whitespace between tokens, mostly none.
        fn space() -> impl Strategy<Value = &'static str> + Clone {
            prop::sample::select(vec!["", "", "", " ", "\t", "\n ", "\r"])
        }

        /// A string value: one of `plain`, quoted, or now and then one with
        /// an escape or a control character, or not a string at all.
        fn string(plain: Vec<&'static str>) -> impl Strategy<Value = String> {
            prop_oneof![
                20 => prop::sample::select(plain).prop_map(|s| format!("\"{s}\"")),
                1 => prop::sample::select(vec![
                    r#""a\u0041""#, r#""\/""#, "\"\u{e9}\"", "\"\u{2028}\"", "\"a\tb\"", r#""""#, "null", "1", "[]", "{}", "true",
                ]).prop_map(str::to_string),
            ]
        }

        /// A `data` value: standard base64 of some bytes, or a bad one.
        fn base64() -> impl Strategy<Value = String> {
            prop_oneof![
                12 => prop::collection::vec(any::<u8>(), 0..40)
                    .prop_map(|b| format!("\"{}\"", base64::engine::general_purpose::STANDARD.encode(b))),
                1 => prop::sample::select(vec![
                    r#""aGk""#, r#""aGk=aGk=""#, r#""a-_=""#, r#""aG\r\nk=""#, r#""aG\u006b=""#, r#""!!""#, "\"\u{e9}\"", "null", "7",
                ]).prop_map(str::to_string),
            ]
        }

        /// An `offset` value: any u64, a small one, or a non-canonical one.
        fn offset() -> impl Strategy<Value = String> {
            prop_oneof![
                3 => any::<u64>().prop_map(|o| o.to_string()),
                3 => (0u64..20).prop_map(|o| o.to_string()),
                2 => prop::sample::select(vec![
                    "null", "0", "-0", "00", "01", "1.0", "1e2", "1E2", "-1", "18446744073709551615", "18446744073709551616",
                    "99999999999999999999", "\"3\"", "true", "[]", "0.5",
                ]).prop_map(str::to_string),
            ]
        }

        /// The request id: integers, strings, and ids Go re-encodes.
        fn request_id() -> impl Strategy<Value = String> {
            prop_oneof![
                3 => (-1000i64..1000).prop_map(|i| i.to_string()),
                1 => any::<i64>().prop_map(|i| i.to_string()),
                2 => string(vec!["a", "a b", "~", "0123456789012345678901234567890123456", ""]),
                1 => prop::sample::select(vec!["null", "1.0", "1e3", "-0", "01", "[1]", "{}", "true", "123456789012345", "1234567890123456"])
                    .prop_map(str::to_string),
            ]
        }

        /// Each member is present once, most of the time (an absent one is
        /// a `None`), plus now and then one that is case-folded, unknown or
        /// repeated; the order is shuffled.
        fn object(members: Vec<Option<Member>>, extra: Vec<Member>) -> impl Strategy<Value = String> {
            let all: Vec<Member> = members.into_iter().flatten().chain(extra).collect();
            let spaces = prop::collection::vec(space(), all.len());
            (Just(all).prop_shuffle(), spaces).prop_map(|(all, spaces)| {
                let inner: Vec<String> = all
                    .iter()
                    .zip(spaces)
                    .map(|((k, v), s)| format!("{s}\"{k}\"{s}:{s}{v}{s}"))
                    .collect();
                format!("{{{}}}", inner.join(","))
            })
        }

        /// The member `v`, present `weight` times in ten.
        fn present(weight: u32, v: BoxedStrategy<Member>) -> impl Strategy<Value = Option<Member>> {
            prop::option::weighted(f64::from(weight) / 10.0, v)
        }

        /// Mostly nothing; now and then one or two members named from `keys`.
        fn extra(keys: Vec<&'static str>) -> impl Strategy<Value = Vec<Member>> {
            prop_oneof![
                8 => Just(Vec::new()),
                1 => prop::collection::vec(
                    prop::sample::select(keys).prop_flat_map(move |k| string(vec!["p", "/", "tok", "2.0", "process.stdin"]).prop_map(move |v| (k, v))),
                    1..3,
                ),
            ]
        }

        /// A stdin call's params: an object of `id`, `data`, `offset` (and
        /// extras), or something that is not such an object.
        fn params() -> impl Strategy<Value = String> {
            prop_oneof![
                8 => (
                    present(8, string(vec!["p", "q", ""]).prop_map(|v| ("id", v)).boxed()),
                    present(8, base64().prop_map(|v| ("data", v)).boxed()),
                    present(6, offset().prop_map(|v| ("offset", v)).boxed()),
                    extra(vec!["ID", "Data", "oFFSET", "cwd", "x", "id", "data", "offset"]),
                )
                    .prop_flat_map(move |(id, data, offset, extra)| object(vec![id, data, offset], extra)),
                1 => prop::sample::select(vec!["null", "[]", "\"x\"", "{\"id\":{}}", "{}"]).prop_map(str::to_string),
            ]
        }

        /// A `process.stdin` (sometimes `server.ping`) line assembled from
        /// parts that are mostly plain and sometimes not.
        pub(super) fn stdin_line() -> impl Strategy<Value = String> {
            (
                present(
                    9,
                    string(vec!["2.0", "2.0", "2.0", "1.0"])
                        .prop_map(|v| ("jsonrpc", v))
                        .boxed(),
                ),
                present(9, request_id().prop_map(|v| ("id", v)).boxed()),
                present(
                    9,
                    string(vec![
                        "process.stdin",
                        "process.stdin",
                        "process.stdin",
                        "server.ping",
                        "process.kill",
                    ])
                    .prop_map(|v| ("method", v))
                    .boxed(),
                ),
                present(9, params().prop_map(|v| ("params", v)).boxed()),
                present(
                    9,
                    string(vec!["tok", "tok", "tok", "bad"])
                        .prop_map(|v| ("auth", v))
                        .boxed(),
                ),
                extra(vec![
                    "JSONRPC", "Auth", "METHOD", "Params", "x", "id", "auth", "method", "params",
                ]),
                space(),
            )
                .prop_flat_map(move |(jsonrpc, id, method, params, auth, extra, end)| {
                    object(vec![jsonrpc, id, method, params, auth], extra).prop_map(move |o| format!("{o}{end}"))
                })
        }
    }
    use lines::stdin_line;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The quick path gives up, or binds what the full decoder binds.
        #[test]
        fn the_quick_path_binds_what_the_full_decoder_binds(line in stdin_line()) {
            agrees_with_the_full_path(line.as_bytes());
        }

        /// The same for a well-formed call with every part plain, in any
        /// member order: always taken.
        #[test]
        fn plain_calls_in_any_order_are_taken(
            order in proptest::sample::subsequence(vec![0usize, 1, 2, 3, 4], 5).prop_shuffle(),
            process in "[a-z0-9_.-]{0,12}",
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            offset in proptest::option::of(proptest::prelude::any::<u64>()),
            rid in proptest::prelude::any::<i32>(),
        ) {
            let data = base64::engine::general_purpose::STANDARD.encode(data);
            let offset = offset.map(|o| format!(r#","offset":{o}"#)).unwrap_or_default();
            let members = [
                r#""jsonrpc":"2.0""#.to_string(),
                format!(r#""id":{rid}"#),
                r#""method":"process.stdin""#.to_string(),
                format!(r#""params":{{"id":"{process}","data":"{data}"{offset}}}"#),
                r#""auth":"tok""#.to_string(),
            ];
            let line = format!("{{{}}}", order.iter().map(|&i| members[i].as_str()).collect::<Vec<_>>().join(","));
            proptest::prop_assert!(agrees_with_the_full_path(line.as_bytes()), "{}", line);
        }
    }
}
