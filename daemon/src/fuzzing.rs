//! The checks behind the cargo-fuzz targets in `fuzz/`, compiled with the
//! `fuzzing` feature. Each entry point takes the raw fuzzer input, so the
//! fuzzers and the stable-Rust corpus replay test (`tests/fuzz_corpora.rs`)
//! run exactly the same code. Every check panics on a violated property.

use crate::frame::{Framed, LineBuffer, MAX_LINE};
use crate::gojson::{self, bind::GoEncode, Value};
use crate::params::{GitParams, PathParams, ProcessParams};
use crate::rpc::{self, Checked, Envelope};
use arbitrary::{Arbitrary, Unstructured};

/// Structure-aware input for the framing target: byte segments (long runs
/// are cheap to describe, so the 1 MiB cap is reachable) and the sizes of
/// the reads that deliver them.
#[derive(Debug, Arbitrary)]
pub struct FramingInput {
    pub segments: Vec<Segment>,
    pub read_sizes: Vec<u16>,
}

#[derive(Debug, Arbitrary)]
pub enum Segment {
    Bytes(Vec<u8>),
    Run { byte: u8, len: u32 },
}

/// Longest stream the framing target builds (just past one cap).
const MAX_STREAM: usize = MAX_LINE + 8192;

/// What the simple model says a stream frames into.
#[derive(Debug, PartialEq, Eq)]
pub struct Framing {
    pub lines: Vec<Vec<u8>>,
    pub too_long: bool,
}

/// The model: split on `\n`, drop one trailing `\r`, stop at the first line
/// of `MAX_LINE` or more bytes; an unterminated tail is a line at EOF.
pub fn model_framing(stream: &[u8]) -> Framing {
    let mut lines = Vec::new();
    let mut pieces = stream.split(|&b| b == b'\n').peekable();
    while let Some(piece) = pieces.next() {
        let last = pieces.peek().is_none();
        if piece.len() >= MAX_LINE {
            return Framing { lines, too_long: true };
        }
        if last && piece.is_empty() {
            break;
        }
        lines.push(piece.strip_suffix(b"\r").unwrap_or(piece).to_vec());
    }
    Framing { lines, too_long: false }
}

/// Runs `LineBuffer` over `stream` delivered in reads of the given sizes.
pub fn run_framing(stream: &[u8], read_sizes: &[u16]) -> Framing {
    let mut buffer = LineBuffer::new();
    let mut lines = Vec::new();
    let mut offset = 0;
    let mut reads = read_sizes.iter().cycle();
    loop {
        loop {
            match buffer.next_line() {
                Some(Framed::Line(line)) => lines.push(line.to_vec()),
                Some(Framed::TooLong) => return Framing { lines, too_long: true },
                None => break,
            }
        }
        assert!(buffer.capacity() <= MAX_LINE, "buffer grew past the cap");
        if offset == stream.len() {
            if let Some(line) = buffer.take_final() {
                lines.push(line.to_vec());
            }
            return Framing { lines, too_long: false };
        }
        // Reads are at least 1/2048 of the stream so a multi-MiB stream in
        // one-byte reads stays fast enough to fuzz.
        let floor = stream.len() / 2048 + 1;
        let want = reads.next().map_or(usize::MAX, |&n| usize::from(n).max(floor));
        let end = stream.len().min(offset.saturating_add(want));
        let taken = buffer.feed(&stream[offset..end]);
        assert!(taken > 0, "reader made no progress with {} pending", buffer.pending());
        offset += taken;
    }
}

/// Target `ndjson_framing`.
pub fn ndjson_framing(data: &[u8]) {
    let Ok(input) = FramingInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut stream = Vec::new();
    for segment in &input.segments {
        match segment {
            Segment::Bytes(bytes) => stream.extend_from_slice(bytes),
            Segment::Run { byte, len } => {
                let len = (*len as usize).min(MAX_STREAM.saturating_sub(stream.len()));
                stream.resize(stream.len() + len, *byte);
            }
        }
        if stream.len() >= MAX_STREAM {
            stream.truncate(MAX_STREAM);
            break;
        }
    }
    assert_eq!(run_framing(&stream, &input.read_sizes), model_framing(&stream));
}

const TOKEN: &[u8] = b"fuzz-token";

/// Target `request_envelope`: one line through parse → auth → version →
/// method. The reply must be one line of valid JSON with the envelope keys
/// in order, and a parse failure must carry `"id":null`.
pub fn request_envelope(data: &[u8]) {
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if gojson::trim_go_space(line).is_empty() {
        return;
    }
    let reply = match rpc::check(line, TOKEN) {
        Checked::Valid(request) => {
            assert!(rpc::METHODS.contains(&request.method));
            rpc::success_line(&request.id, b"{}")
        }
        Checked::Rejected { id, error, .. } => {
            if error.code == rpc::PARSE_ERROR {
                assert_eq!(id, Value::Null);
            }
            rpc::error_line(&id, &error)
        }
    };
    assert_eq!(reply.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(reply.last(), Some(&b'\n'));
    let parsed: serde_json::Value = serde_json::from_slice(&reply).expect("reply is valid JSON");
    let object = parsed.as_object().expect("reply is an object");
    assert_eq!(object.get("jsonrpc").and_then(|v| v.as_str()), Some("2.0"));
    assert!(object.contains_key("id"));
    assert!(reply.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":"));
    // serde_json is stricter than Go (no invalid UTF-8, no lone surrogates,
    // 128 levels): whatever it accepts, the Go-compatible parser accepts.
    if serde_json::from_slice::<serde_json::Value>(line).is_ok() {
        assert!(
            gojson::parse(line).is_ok(),
            "serde_json accepted a line the Go parser rejected"
        );
    }
}

/// Target `params_decode`: any JSON value into every params struct. A
/// successful decode must survive an encode/decode round trip: typed params
/// come back equal, and the encoded form is a fixed point (the envelope's
/// untyped id may change form once, as Go re-encodes numbers via float64).
pub fn params_decode(data: &[u8]) {
    let Ok(value) = gojson::parse(data) else {
        return;
    };
    for same in [
        round_trip(&value, PathParams::from_go_value),
        round_trip(&value, GitParams::from_go_value),
        round_trip(&value, ProcessParams::from_go_value),
    ] {
        assert_ne!(same, Some(false), "typed params changed across a round trip");
    }
    round_trip(&value, Envelope::from_go_value);
}

/// Decodes, encodes, decodes again. Returns whether the two decodes are
/// equal (`None` if the first decode failed); asserts the fixed point.
fn round_trip<P: GoEncode + PartialEq>(
    value: &Value,
    decode: impl Fn(&Value) -> Result<P, gojson::DecodeError>,
) -> Option<bool> {
    let decoded = decode(value).ok()?;
    let encode = |p: &P| gojson::to_go_json(&p.to_go_value().unwrap_or(Value::Null));
    let text = encode(&decoded);
    let reparsed = gojson::parse(&text).expect("encoded params parse");
    let again = decode(&reparsed).expect("encoded params decode");
    assert_eq!(text, encode(&again), "encoding is not a fixed point");
    Some(decoded == again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_model_agrees_on_the_cap() {
        let mut stream = vec![b'a'; MAX_LINE - 1];
        stream.extend_from_slice(b"\nb\r\n");
        stream.extend(std::iter::repeat_n(b'c', MAX_LINE));
        let model = model_framing(&stream);
        assert!(model.too_long);
        assert_eq!(model.lines.len(), 2);
        assert_eq!(run_framing(&stream, &[1000, 7, 65535]), model);
    }

    #[test]
    fn entry_points_accept_anything() {
        for data in [&b""[..], b"\xff\xfe", b"{\"jsonrpc\":\"2.0\"}", b"[[[[", b"null"] {
            ndjson_framing(data);
            request_envelope(data);
            params_decode(data);
        }
    }
}
