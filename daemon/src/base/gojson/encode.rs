//! Writing JSON the way Go's `encoding/json` encoder writes it.
//!
//! Results are typed structs serialised with serde; field order is the
//! declaration order, which is the documented wire order. The
//! [`GoFormatter`] adjusts serde_json's output to Go's bytes:
//!
//! * `<`, `>`, `&`, U+2028 and U+2029 are escaped as `\u003c`, `\u003e`,
//!   `\u0026`, `\u2028`, `\u2029` (Go's HTML-safe default);
//! * control characters use `\n \r \t \b \f` or lower-case `\u00XX`
//!   (serde_json already agrees);
//! * floats use Go's shortest round-trip form, switching to exponent form
//!   below 1e-6 and from 1e21 (`1e+21`, `1e-7`).
//!
//! Strings are always valid UTF-8 by the time they reach here: invalid
//! bytes were replaced on the way in (see [`super::text`]).

use super::value::Value;
use super::walk::{walk, Members, Step};
use serde::ser::Serialize;
use std::io::{self, Write};
use std::ops::ControlFlow;

/// serde_json formatter producing Go's encoder output.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut last = 0;
        for (i, c) in fragment.char_indices() {
            let escape: &[u8] = match c {
                '<' => b"\\u003c",
                '>' => b"\\u003e",
                '&' => b"\\u0026",
                '\u{2028}' => b"\\u2028",
                '\u{2029}' => b"\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[last..i])?;
            writer.write_all(escape)?;
            last = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[last..])
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(format_go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(format_go_float(value as f64).as_bytes())
    }
}

/// Serialises `value` with Go's encoder rules, appending to `out`.
pub(crate) fn write_go_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, GoFormatter);
    // Serialising our own types into a Vec cannot fail: they hold no maps
    // with non-string keys and writing to memory does not error.
    if let Err(e) = value.serialize(&mut ser) {
        unreachable_serialisation(e);
    }
}

#[cold]
fn unreachable_serialisation(e: serde_json::Error) {
    crate::log_error!("[Server] internal: result serialisation failed: {e}");
}

/// Serialises `value` with Go's encoder rules into a new buffer.
pub(crate) fn to_go_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_go_json(&mut out, value);
    out
}

/// Writes one string as a Go JSON string literal.
pub(crate) fn write_go_string(out: &mut Vec<u8>, s: &str) {
    write_go_json(out, s);
}

/// Go's `float64` encoding (`strconv.AppendFloat(f, 'f' or 'e', -1, 64)`
/// plus the encoder's `e-07` → `e-7` clean-up).
pub(crate) fn format_go_float(value: f64) -> String {
    if !value.is_finite() {
        // Go refuses to encode these; they never reach the wire here.
        return "null".to_string();
    }
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` gives the shortest digits: "1e21", "1.5e-7".
        let sci = format!("{value:e}");
        match sci.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => sci,
        }
    } else {
        // Rust's Display is the shortest round-trip form, never exponential.
        format!("{value}")
    }
}

/// Go's `fmt` `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`):
/// shortest digits, exponent form when the decimal exponent is below -4 or
/// at least 6 (the `%g` rule with "shortest" precision), and a two-digit
/// minimum exponent: `1e+06`, `1.2345678901234567e+19`, `1e-05`. This is
/// not the JSON form ([`format_go_float`]), which switches only at 1e21.
pub(crate) fn format_go_float_v(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` is the shortest round-trip mantissa: "1.5e-7", "1e6".
    let sci = format!("{value:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return format!("{value}");
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return format!("{value}");
    };
    if (-4..6).contains(&exp) {
        // Display is shortest and never exponential.
        return format!("{value}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

/// Go's `fmt` `%v` of a decoded `interface{}` value, as the reference's
/// log lines print a request id: `<nil>`, strings raw, numbers as
/// [`format_go_float_v`], slices `[a b]`, maps `map[k:v]` with sorted keys
/// (the last duplicate winning, as in the decoded map). Iterative: ids
/// nest as deep as the parser allows. The walk stops once the text passes
/// `max_bytes`, so a log line never pays for a megabyte id.
pub(crate) fn format_go_v(value: &Value, max_bytes: usize) -> String {
    let mut out = String::new();
    let _: ControlFlow<()> = walk(value, Members::GoMap, |step| {
        if out.len() > max_bytes {
            return ControlFlow::Break(());
        }
        match step {
            Step::Scalar(Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
            Step::Scalar(Value::Number(lit)) => out.push_str(&format_go_float_v(lit.parse::<f64>().unwrap_or(0.0))),
            Step::Scalar(Value::String(s)) => out.push_str(s),
            Step::Scalar(_) => out.push_str("<nil>"),
            Step::Open { array: true, .. } => out.push('['),
            Step::Open { array: false, .. } => out.push_str("map["),
            Step::Item { index, key } => {
                if index > 0 {
                    out.push(' ');
                }
                if let Some(key) = key {
                    out.push_str(key);
                    out.push(':');
                }
            }
            Step::Close { .. } => out.push(']'),
        }
        ControlFlow::Continue(())
    });
    out
}

/// Appends an untyped value (a request id) the way Go encodes an
/// `interface{}`: numbers as `float64`, objects as maps with sorted keys
/// (the last duplicate winning), everything compact. Iterative, like every
/// traversal of a [`Value`].
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    let _: ControlFlow<()> = walk(value, Members::GoMap, |step| {
        match step {
            Step::Scalar(Value::Bool(b)) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Step::Scalar(Value::Number(lit)) => {
                out.extend_from_slice(format_go_float(lit.parse::<f64>().unwrap_or(0.0)).as_bytes())
            }
            Step::Scalar(Value::String(s)) => write_go_string(out, s),
            Step::Scalar(_) => out.extend_from_slice(b"null"),
            Step::Open { array: true, .. } => out.push(b'['),
            Step::Open { array: false, .. } => out.push(b'{'),
            Step::Item { index, key } => {
                if index > 0 {
                    out.push(b',');
                }
                if let Some(key) = key {
                    write_go_string(out, key);
                    out.push(b':');
                }
            }
            Step::Close { array: true } => out.push(b']'),
            Step::Close { array: false } => out.push(b'}'),
        }
        ControlFlow::Continue(())
    });
}

/// [`write_value`] into a new buffer.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn value_to_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    write_value(&mut out, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::value::parse;

    fn reencode(input: &str) -> String {
        String::from_utf8(value_to_json(&parse(input.as_bytes()).unwrap())).unwrap()
    }

    #[test]
    fn percent_v_follows_go_fmt() {
        let cases = [
            (1.0, "1"),
            (19.0, "19"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5, "1.5"),
            (-0.0, "-0"),
            (-2.5e-300, "-2.5e-300"),
            (1e100, "1e+100"),
        ];
        for (f, want) in cases {
            assert_eq!(format_go_float_v(f), want, "formatting {f:e}");
        }
        let v = |s: &str| format_go_v(&crate::base::gojson::parse(s.as_bytes()).unwrap(), usize::MAX);
        assert_eq!(v("null"), "<nil>");
        assert_eq!(v(r#""a b""#), "a b");
        assert_eq!(v(r#"[1,"a",null,true]"#), "[1 a <nil> true]");
        assert_eq!(v(r#"{"b":1,"a":[1,2],"b":3}"#), "map[a:[1 2] b:3]");
        let deep =
            crate::base::gojson::parse(format!("{}{}", "[".repeat(9_000), "]".repeat(9_000)).as_bytes()).unwrap();
        assert_eq!(format_go_v(&deep, usize::MAX).len(), 18_000);
        assert_eq!(format_go_v(&deep, 10), "[".repeat(11));
    }

    #[test]
    fn floats_follow_go_formatting() {
        let cases = [
            (1.0, "1"),
            (1000.0, "1000"),
            (-0.0, "-0"),
            (0.0, "0"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-10, "1.5e-10"),
            (12345678901234567890.0, "12345678901234567000"),
            (1795343369.1085572, "1795343369.1085572"),
            (1e100, "1e+100"),
            (-2.5e-300, "-2.5e-300"),
        ];
        for (f, want) in cases {
            assert_eq!(format_go_float(f), want, "formatting {f:e}");
        }
    }

    #[test]
    fn ids_reencode_like_go_interface_values() {
        assert_eq!(reencode("1.0"), "1");
        assert_eq!(reencode("1e3"), "1000");
        assert_eq!(reencode("12345678901234567890"), "12345678901234567000");
        assert_eq!(reencode("1e21"), "1e+21");
        assert_eq!(reencode("0.000001"), "0.000001");
        assert_eq!(reencode("1e-7"), "1e-7");
        assert_eq!(reencode("-0"), "-0");
        assert_eq!(reencode(r#""a<b""#), r#""a\u003cb""#);
        assert_eq!(reencode(r#"{"b":1,"a":[1, 2]}"#), r#"{"a":[1,2],"b":1}"#);
        assert_eq!(reencode(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
        assert_eq!(reencode("[1,2]"), "[1,2]");
        assert_eq!(reencode("true"), "true");
        assert_eq!(reencode("null"), "null");
        assert_eq!(reencode(r#""\ud800x""#), "\"\u{fffd}x\"");
    }

    #[test]
    fn strings_escape_like_go() {
        let mut out = Vec::new();
        write_go_string(
            &mut out,
            "<a>&b\u{2028}\u{2029}x\u{fffd}\u{fffd}y\u{1}\u{8}\u{c}\"\\\n\r\t/\u{7f}é\u{1f}",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"\\u003ca\\u003e\\u0026b\\u2028\\u2029x\u{fffd}\u{fffd}y\\u0001\\b\\f\\\"\\\\\\n\\r\\t/\u{7f}é\\u001f\""
        );
    }

    #[test]
    fn reference_notes_content_example() {
        // files.read of the bytes `<a>&b` U+2028 `x\xff\xfey\x01\x08\x0c"\` and a newline.
        let mut bytes = b"<a>&b".to_vec();
        bytes.extend_from_slice("\u{2028}".as_bytes());
        bytes.extend_from_slice(b"x\xff\xfey\x01\x08\x0c\"\\\n");
        let mut out = Vec::new();
        write_go_string(&mut out, &crate::base::gojson::text::go_lossy(&bytes));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"\\u003ca\\u003e\\u0026b\\u2028x\u{fffd}\u{fffd}y\\u0001\\b\\f\\\"\\\\\\n\""
        );
    }
}
