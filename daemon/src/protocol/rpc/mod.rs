//! The JSON-RPC envelope: decoding a request line, validating it in the
//! documented order (parse → auth → version → method), and encoding
//! replies. Params are checked later, per namespace, in [`crate::serve::dispatch`].
//!
//! Every error code and message string of the protocol lives here, except
//! the -32601 texts, which come from the method table ([`crate::protocol::method`]).

pub(crate) mod quick;

use crate::base::gojson::{self, Raw, Value};
use crate::protocol::build::Build;
use crate::protocol::method::Method;
use serde::Serialize;

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;
pub(crate) const UNAUTHORIZED: i64 = -32001;
pub(crate) const STDIN_BACKPRESSURE: i64 = -32002;
pub(crate) const STDIN_OFFSET_GAP: i64 = -32003;

pub(crate) const MSG_PARSE_ERROR: &str = "Parse error";
pub(crate) const MSG_UNAUTHORIZED: &str = "Unauthorized: invalid or missing auth token";
pub(crate) const MSG_INVALID_VERSION: &str = "Invalid JSON-RPC version";
pub(crate) const MSG_INVALID_PARAMS: &str = "Invalid params";
pub(crate) const MSG_STDIN_OFFSET_GAP: &str = "stdin offset gap: offset ahead of applied bytes";
pub(crate) const MSG_STDIN_BACKPRESSURE: &str = "stdin backpressure: queue full";

/// The method names, in the order `server.capabilities` lists them (from
/// the typed table in [`crate::protocol::method`]).
pub(crate) use crate::protocol::method::METHODS;

crate::go_struct! {
    /// The request envelope, bound like the reference's Go struct.
    pub(crate) struct Envelope {
        pub jsonrpc: String = "jsonrpc",
        pub id: Value = "id",
        pub method: String = "method",
        pub params: Raw = "params",
        pub auth: String = "auth",
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }
}

/// A request that passed parse, auth, version and method checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub id: Value,
    pub method: Method,
    /// `None` when the `params` member was absent (`null` is `Some(Null)`).
    pub params: Option<Value>,
}

/// Outcome of envelope validation.
#[derive(Debug, PartialEq)]
pub(crate) enum Checked {
    Valid(Request),
    /// Reply with this error; `unauthorized` marks the -32001 case so the
    /// caller can log it.
    Rejected {
        id: Value,
        error: RpcError,
        unauthorized: Option<String>,
    },
}

impl Checked {
    /// Whether the line carried the right token: it passed the auth check
    /// (valid, or rejected only by a later check).
    pub(crate) fn authenticated(&self) -> bool {
        match self {
            Checked::Valid(_) => true,
            Checked::Rejected {
                error, unauthorized, ..
            } => unauthorized.is_none() && error.code != PARSE_ERROR,
        }
    }
}

/// Validates one (non-blank) request line against `token`, resolving its
/// method among those `build` has.
pub(crate) fn check(line: &[u8], token: &[u8], build: &Build) -> Checked {
    let reject = |id: Value, error: RpcError| Checked::Rejected {
        id,
        error,
        unauthorized: None,
    };
    let envelope = match gojson::parse(line)
        .ok()
        .and_then(|value| Envelope::from_go_value(&value).ok())
    {
        Some(envelope) => envelope,
        None => return reject(Value::Null, RpcError::new(PARSE_ERROR, MSG_PARSE_ERROR)),
    };
    if !constant_time_eq(envelope.auth.as_bytes(), token) {
        return Checked::Rejected {
            error: RpcError::new(UNAUTHORIZED, MSG_UNAUTHORIZED),
            unauthorized: Some(envelope.method.clone()),
            id: envelope.id,
        };
    }
    if envelope.jsonrpc != "2.0" {
        return reject(envelope.id, RpcError::new(INVALID_REQUEST, MSG_INVALID_VERSION));
    }
    let method = match build.resolve(&envelope.method) {
        Ok(method) => method,
        Err(message) => return reject(envelope.id, RpcError::new(METHOD_NOT_FOUND, message)),
    };
    Checked::Valid(Request {
        id: envelope.id,
        method,
        params: envelope.params.0,
    })
}

/// Compares a presented token with the expected one in time that depends
/// only on the expected token's length.
pub(crate) fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = (presented.len() != expected.len()) as u8;
    for (i, e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(!*e);
        diff |= p ^ e;
    }
    std::hint::black_box(diff) == 0
}

/// Appends `{"jsonrpc":"2.0","id":…,"result":…}\n` with an id and a
/// result already encoded.
pub(crate) fn write_success_line(out: &mut Vec<u8>, id_json: &[u8], result_json: &[u8]) {
    write_success_line_with(out, id_json, |out| out.extend_from_slice(result_json));
}

/// Appends `{"jsonrpc":"2.0","id":…,"result":…}\n` with an id already
/// encoded, `write_result` encoding the result in place.
pub(crate) fn write_success_line_with(out: &mut Vec<u8>, id_json: &[u8], write_result: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id_json);
    out.extend_from_slice(br#","result":"#);
    write_result(out);
    out.extend_from_slice(b"}\n");
}

/// `{"jsonrpc":"2.0","id":…,"result":…}\n` around an already-encoded result.
pub(crate) fn success_line(id: &Value, result_json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + result_json.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    gojson::write_value(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result_json);
    out.extend_from_slice(b"}\n");
    out
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}\n`.
pub(crate) fn error_line(id: &Value, error: &RpcError) -> Vec<u8> {
    error_line_with(|out| gojson::write_value(out, id), error)
}

/// [`error_line`] with an id already encoded as Go writes it.
pub(crate) fn error_line_for_id_json(id_json: &[u8], error: &RpcError) -> Vec<u8> {
    error_line_with(|out| out.extend_from_slice(id_json), error)
}

fn error_line_with(write_id: impl FnOnce(&mut Vec<u8>), error: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    write_error_line_with(&mut out, write_id, error.code, &error.message);
    out
}

/// Appends `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}\n`
/// with an id already encoded (the writer's form of [`error_line`]).
pub(crate) fn write_error_line(out: &mut Vec<u8>, id_json: &[u8], code: i64, message: &str) {
    write_error_line_with(out, |out| out.extend_from_slice(id_json), code, message);
}

fn write_error_line_with(out: &mut Vec<u8>, write_id: impl FnOnce(&mut Vec<u8>), code: i64, message: &str) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_id(out);
    out.extend_from_slice(br#","error":{"code":"#);
    // Formatted straight into `out` (`io::Write` for `Vec`): no allocation.
    let _ = std::io::Write::write_fmt(out, format_args!("{code}"));
    out.extend_from_slice(br#","message":"#);
    gojson::write_go_string(out, message);
    out.extend_from_slice(b"}}\n");
}

/// How an id appears in the log: Go's `%v` of the decoded `interface{}`
/// (not the JSON form: an id of 1000000 logs as `1e+06`), with control
/// characters escaped and the length capped, as for every client string.
pub(crate) fn id_for_log(id: &Value) -> String {
    let text = gojson::format_go_v(id, 4 * crate::base::logging::UNTRUSTED_MAX_CHARS);
    crate::base::logging::Untrusted(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &[u8] = b"tok";

    #[test]
    fn the_writers_error_line_is_the_error_object_go_encodes() {
        // Written field by field, it must match the object as encoding/json
        // writes the struct: escapes, HTML-safe characters, U+2028, codes.
        for (code, message) in [
            (INVALID_PARAMS, "Process not found"),
            (-32003, "stdin backpressure: queue full"),
            (INTERNAL_ERROR, "write |1: broken pipe <&> \"q\" \\ \u{2028}\u{0}\n\té"),
            (i64::MIN, ""),
            (0, "\u{7f}\u{1b}"),
        ] {
            let error = RpcError::new(code, message);
            let mut want = br#"{"jsonrpc":"2.0","id":"x","error":"#.to_vec();
            want.extend_from_slice(&gojson::to_go_json(&error));
            want.extend_from_slice(b"}\n");
            let mut got = Vec::new();
            write_error_line(&mut got, br#""x""#, code, message);
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
            assert_eq!(error_line_for_id_json(br#""x""#, &error), want);
        }
    }

    fn reply(line: &str) -> String {
        match check(line.as_bytes(), TOKEN, crate::protocol::build::NEWEST) {
            Checked::Valid(r) => format!("valid {} {:?}", r.method, r.params),
            Checked::Rejected { id, error, .. } => String::from_utf8(error_line(&id, &error)).unwrap(),
        }
    }

    #[test]
    fn precedence_is_parse_auth_version_method() {
        assert_eq!(
            reply("{"),
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n"
        );
        // No auth and bad version: auth wins.
        assert_eq!(
            reply(r#"{"id":1,"method":"server.ping"}"#),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"Unauthorized: invalid or missing auth token\"}}\n"
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"1.0","id":2,"method":"nope","auth":"tok"}"#),
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32600,\"message\":\"Invalid JSON-RPC version\"}}\n"
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":3,"method":"nope","auth":"tok"}"#),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":\"Invalid method format: nope\"}}\n"
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":4,"method":"foo.bar","auth":"tok"}"#),
            "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32601,\"message\":\"Unknown namespace: foo\"}}\n"
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":5,"method":"files.nope","auth":"tok"}"#),
            "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32601,\"message\":\"Unknown method: files.nope\"}}\n"
        );
    }

    #[test]
    fn reference_notes_envelope_cases() {
        let parse_error = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n";
        for bad in [
            r#"{"jsonrpc":"2.0","id":1e400,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":2,"id":1,"method":"server.ping","auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":123,"auth":"tok"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":123}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok"} x"#,
            r#"[1,2]"#,
            r#""str""#,
            r#"{"jsonrpc":"2.0","id":1,"method":"files.stat","params":{"x":[}, "auth":"tok"}"#,
        ] {
            assert_eq!(reply(bad), parse_error, "{bad}");
        }
        assert_eq!(
            reply(r#"{"JSONRPC":"2.0","ID":5,"METHOD":"server.ping","AUTH":"tok"}"#),
            "valid server.ping None"
        );
        assert!(
            reply(r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"tok","Auth":"bad"}"#).contains("-32001")
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","id":1,"method":"server.ping","Auth":"bad","auth":"tok"}"#),
            "valid server.ping None"
        );
        assert_eq!(
            reply(r#"{"jsonrpc":"2.0","method":"files.stat","params":null,"auth":"tok"}"#),
            "valid files.stat Some(Null)"
        );
        // `null` is a valid empty envelope in Go, so it fails auth.
        assert!(reply("null").contains("\"id\":null,\"error\":{\"code\":-32001"));
    }

    #[test]
    fn ids_come_back_as_go_reencodes_them() {
        for (id, want) in [
            ("1.0", "1"),
            ("1e3", "1000"),
            ("12345678901234567890", "12345678901234567000"),
            ("1e21", "1e+21"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-0", "-0"),
            (r#""a<b""#, r#""a\u003cb""#),
            (r#"{"b":1,"a":[1, 2]}"#, r#"{"a":[1,2],"b":1}"#),
            ("[1,2]", "[1,2]"),
            ("true", "true"),
            ("null", "null"),
            (r#""\ud800x""#, "\"\u{fffd}x\""),
        ] {
            let line = format!(r#"{{"jsonrpc":"1","id":{id},"auth":"tok"}}"#);
            let got = reply(&line);
            assert!(
                got.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{want},\"error\"")),
                "{id} -> {got}"
            );
        }
        let got = reply("{\"jsonrpc\":\"1\",\"id\":\"\u{fffd}\",\"auth\":\"tok\"}");
        assert!(got.contains("\"id\":\"\u{fffd}\""));
        let raw = b"{\"jsonrpc\":\"1\",\"id\":\"a\xffb\",\"auth\":\"tok\"}";
        let Checked::Rejected { id, .. } = check(raw, TOKEN, crate::protocol::build::NEWEST) else {
            panic!()
        };
        assert_eq!(id, Value::String("a\u{fffd}b".into()));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abd", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abcd", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
        assert!(constant_time_eq(b"", b""));
    }
}
