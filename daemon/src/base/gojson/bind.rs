//! Binding a parsed [`Value`] into typed Rust structs with the rules Go's
//! `encoding/json` applies when it unmarshals into a struct:
//!
//! * object keys match field names exactly first, then case-insensitively
//!   (Go's fold, see [`fold_key`]); unknown keys are ignored;
//! * keys are applied in input order, so with duplicates the last one wins;
//! * `null` leaves a field untouched (a pointer-like `Option` becomes `None`,
//!   a list or map becomes empty);
//! * a number binds to an integer field only if it is a plain integer literal
//!   in range (`1.5`, `1e3` and `"4"` are type errors); an unsigned field
//!   (`u64`, Go's `uint64`) refuses any sign, so `-1` and `-0` are type
//!   errors there and `18446744073709551615` binds;
//! * any type mismatch fails the whole decode.
//!
//! Structs are declared with [`go_struct!`], which keeps the JSON names next
//! to the Rust fields.

use super::text::fold_key;
use super::value::Value;

/// A Go-style unmarshal type error: the decode as a whole failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    pub expected: &'static str,
    pub found: &'static str,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot unmarshal {} into a {} field", self.found, self.expected)
    }
}

impl std::error::Error for DecodeError {}

fn mismatch(expected: &'static str, found: &Value) -> DecodeError {
    DecodeError {
        expected,
        found: found.kind(),
    }
}

/// Decoding into an existing value, as Go does (`json.Unmarshal` into a
/// field keeps whatever `null` does not overwrite).
pub(crate) trait GoDecode {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError>;
}

impl GoDecode for String {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => Ok(()),
            Value::String(s) => {
                self.clone_from(s);
                Ok(())
            }
            other => Err(mismatch("string", other)),
        }
    }
}

impl GoDecode for bool {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => Ok(()),
            Value::Bool(b) => {
                *self = *b;
                Ok(())
            }
            other => Err(mismatch("bool", other)),
        }
    }
}

/// `strconv.ParseInt(literal, 10, 64)`: no fraction, no exponent, in range.
pub(crate) fn parse_go_int(literal: &str) -> Option<i64> {
    literal.parse::<i64>().ok()
}

impl GoDecode for i64 {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => Ok(()),
            Value::Number(lit) => match parse_go_int(lit) {
                Some(n) => {
                    *self = n;
                    Ok(())
                }
                None => Err(mismatch("int64", value)),
            },
            other => Err(mismatch("int64", other)),
        }
    }
}

/// `strconv.ParseUint(literal, 10, 64)`: digits only (no sign, fraction or
/// exponent), at most `u64::MAX`.
pub(crate) fn parse_go_uint(literal: &str) -> Option<u64> {
    if literal.is_empty() || !literal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    literal.parse::<u64>().ok()
}

impl GoDecode for u64 {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => Ok(()),
            Value::Number(lit) => match parse_go_uint(lit) {
                Some(n) => {
                    *self = n;
                    Ok(())
                }
                None => Err(mismatch("uint64", value)),
            },
            other => Err(mismatch("uint64", other)),
        }
    }
}

/// A Go pointer field (`*T`): `null` resets it to nil, anything else
/// allocates and decodes.
impl<T: GoDecode + Default> GoDecode for Option<T> {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        if let Value::Null = value {
            *self = None;
            return Ok(());
        }
        self.get_or_insert_with(T::default).decode_into(value)
    }
}

/// A Go slice: `null` makes it nil; an array overwrites element by element
/// and truncates to the array's length.
impl<T: GoDecode + Default> GoDecode for Vec<T> {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => {
                self.clear();
                Ok(())
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i == self.len() {
                        self.push(T::default());
                    }
                    self[i].decode_into(item)?;
                }
                self.truncate(items.len());
                Ok(())
            }
            other => Err(mismatch("array", other)),
        }
    }
}

/// A Go `map[string]string`, kept in first-insertion order. `null` makes it
/// nil; an object merges into the existing map with each element decoded
/// from its zero value, so `{"A":null}` stores an empty string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StringMap(pub Vec<(String, String)>);

impl GoDecode for StringMap {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        match value {
            Value::Null => {
                self.0.clear();
                Ok(())
            }
            Value::Object(members) => {
                for (k, v) in members {
                    let mut element = String::new();
                    element.decode_into(v).map_err(|_| mismatch("map[string]string", v))?;
                    match self.0.iter_mut().find(|(existing, _)| existing == k) {
                        Some(slot) => slot.1 = element,
                        None => self.0.push((k.clone(), element)),
                    }
                }
                Ok(())
            }
            other => Err(mismatch("map[string]string", other)),
        }
    }
}

/// `interface{}`: any value is accepted, but numbers must fit a float64
/// (Go's decoder converts them eagerly and fails on overflow, e.g. `1e400`).
impl GoDecode for Value {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        check_float_range(value)?;
        *self = value.clone();
        Ok(())
    }
}

fn check_float_range(value: &Value) -> Result<(), DecodeError> {
    use super::walk::{walk, Members, Step};
    use std::ops::ControlFlow;
    let flow = walk(value, Members::Source, |step| match step {
        Step::Scalar(number @ Value::Number(lit)) => match lit.parse::<f64>() {
            Ok(f) if f.is_finite() => ControlFlow::Continue(()),
            _ => ControlFlow::Break(mismatch("float64", number)),
        },
        _ => ControlFlow::Continue(()),
    });
    match flow {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(error) => Err(error),
    }
}

/// `json.RawMessage`: present (even as `null`) or absent, never a type error.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Raw(pub Option<Value>);

impl GoDecode for Raw {
    fn decode_into(&mut self, value: &Value) -> Result<(), DecodeError> {
        self.0 = Some(value.clone());
        Ok(())
    }
}

/// The inverse of [`GoDecode`] for params structs: the JSON value that
/// decodes back to `self` (`None` = leave the member out). Used to check
/// decode/encode round trips when fuzzing.
#[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
pub(crate) trait GoEncode {
    fn to_go_value(&self) -> Option<Value>;
}

impl GoEncode for String {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
}

impl GoEncode for bool {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

impl GoEncode for i64 {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::Number(self.to_string()))
    }
}

impl GoEncode for u64 {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::Number(self.to_string()))
    }
}

impl<T: GoEncode> GoEncode for Option<T> {
    fn to_go_value(&self) -> Option<Value> {
        self.as_ref().and_then(GoEncode::to_go_value)
    }
}

impl<T: GoEncode> GoEncode for Vec<T> {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::Array(
            self.iter().map(|v| v.to_go_value().unwrap_or(Value::Null)).collect(),
        ))
    }
}

impl GoEncode for StringMap {
    fn to_go_value(&self) -> Option<Value> {
        Some(Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ))
    }
}

impl GoEncode for Value {
    fn to_go_value(&self) -> Option<Value> {
        Some(self.clone())
    }
}

impl GoEncode for Raw {
    fn to_go_value(&self) -> Option<Value> {
        self.0.clone()
    }
}

/// Finds the field a key binds to: exact name first, then Go's fold.
pub(crate) fn match_field(names: &[&str], key: &str) -> Option<usize> {
    if let Some(i) = names.iter().position(|n| *n == key) {
        return Some(i);
    }
    let folded = fold_key(key);
    names.iter().position(|n| fold_key(n) == folded)
}

/// Runs the struct-level part of a Go unmarshal: `null` is a no-op, an object
/// feeds each member to `set(field_index, value)`, anything else fails.
pub(crate) fn decode_struct(
    value: &Value,
    names: &[&str],
    mut set: impl FnMut(usize, &Value) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    match value {
        Value::Null => Ok(()),
        Value::Object(members) => {
            for (key, member) in members {
                if let Some(i) = match_field(names, key) {
                    set(i, member)?;
                }
            }
            Ok(())
        }
        other => Err(mismatch("object", other)),
    }
}

/// Declares a struct that binds from JSON like a Go struct with `json` tags.
///
/// ```ignore
/// go_struct! {
///     pub struct PathParams {
///         pub path: String = "path",
///         pub max_bytes: i64 = "maxBytes",
///     }
/// }
/// ```
#[macro_export]
macro_rules! go_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty = $json:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty ),*
        }

        impl $name {
            /// The JSON names, in declaration order.
            $vis const JSON_NAMES: &'static [&'static str] = &[$($json),*];

            /// Decodes `value` as Go's `json.Unmarshal` into a zero struct would.
            $vis fn from_go_value(value: &$crate::base::gojson::Value) -> Result<Self, $crate::base::gojson::DecodeError> {
                let mut out = Self::default();
                $crate::base::gojson::GoDecode::decode_into(&mut out, value)?;
                Ok(out)
            }
        }

        impl $crate::base::gojson::bind::GoEncode for $name {
            fn to_go_value(&self) -> Option<$crate::base::gojson::Value> {
                let mut members = Vec::new();
                $(
                    if let Some(v) = $crate::base::gojson::bind::GoEncode::to_go_value(&self.$field) {
                        members.push(($json.to_string(), v));
                    }
                )*
                Some($crate::base::gojson::Value::Object(members))
            }
        }

        impl $crate::base::gojson::GoDecode for $name {
            fn decode_into(&mut self, value: &$crate::base::gojson::Value) -> Result<(), $crate::base::gojson::DecodeError> {
                $crate::base::gojson::bind::decode_struct(value, Self::JSON_NAMES, |index, member| {
                    let mut fields = 0usize..;
                    $(
                        if Some(index) == fields.next() {
                            return $crate::base::gojson::GoDecode::decode_into(&mut self.$field, member);
                        }
                    )*
                    Ok(())
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::value::parse;

    go_struct! {
        struct Sample {
            path: String = "path",
            max_bytes: i64 = "maxBytes",
            offset: Option<i64> = "offset",
            seq: u64 = "seq",
            flag: bool = "flag",
            args: Vec<String> = "args",
            env: StringMap = "env",
        }
    }

    fn bind(json: &str) -> Result<Sample, DecodeError> {
        Sample::from_go_value(&parse(json.as_bytes()).unwrap())
    }

    #[test]
    fn keys_match_exactly_then_case_insensitively() {
        assert_eq!(bind(r#"{"PATH":"/f"}"#).unwrap().path, "/f");
        assert_eq!(bind(r#"{"MaxBytes":7}"#).unwrap().max_bytes, 7);
        assert_eq!(bind(r#"{"maxbyteſ":7}"#).unwrap().max_bytes, 7);
        assert_eq!(bind(r#"{"unknown":[1,{}]}"#).unwrap(), Sample::default());
    }

    #[test]
    fn last_duplicate_wins() {
        assert_eq!(bind(r#"{"path":"/nope","path":"/f"}"#).unwrap().path, "/f");
        assert_eq!(bind(r#"{"Path":"/nope","path":"/f"}"#).unwrap().path, "/f");
        assert_eq!(bind(r#"{"path":"/f","PATH":"/g"}"#).unwrap().path, "/g");
    }

    #[test]
    fn null_leaves_zero_values() {
        assert_eq!(bind("null").unwrap(), Sample::default());
        assert_eq!(bind(r#"{"path":null,"maxBytes":null}"#).unwrap(), Sample::default());
        assert_eq!(bind(r#"{"path":"/a","path":null}"#).unwrap().path, "/a");
        assert_eq!(bind(r#"{"offset":3,"offset":null}"#).unwrap().offset, None);
        assert_eq!(
            bind(r#"{"env":{"A":null}}"#).unwrap().env.0,
            vec![("A".to_string(), String::new())]
        );
    }

    #[test]
    fn integers_bind_like_parse_int() {
        assert_eq!(bind(r#"{"maxBytes":-1}"#).unwrap().max_bytes, -1);
        assert_eq!(bind(r#"{"maxBytes":-0}"#).unwrap().max_bytes, 0);
        assert_eq!(
            bind(r#"{"offset":9223372036854775807}"#).unwrap().offset,
            Some(i64::MAX)
        );
        for bad in ["1.5", "1e3", "\"4\"", "9223372036854775808", "1.0", "true", "[]"] {
            assert!(bind(&format!(r#"{{"maxBytes":{bad}}}"#)).is_err(), "maxBytes {bad}");
        }
    }

    #[test]
    fn unsigned_integers_bind_like_parse_uint() {
        assert_eq!(bind(r#"{"seq":0}"#).unwrap().seq, 0);
        assert_eq!(bind(r#"{"seq":18446744073709551615}"#).unwrap().seq, u64::MAX);
        assert_eq!(bind(r#"{"seq":7,"seq":null}"#).unwrap().seq, 7, "null keeps the value");
        for bad in ["-1", "-0", "18446744073709551616", "1.5", "1e3", "\"4\"", "true"] {
            assert!(bind(&format!(r#"{{"seq":{bad}}}"#)).is_err(), "seq {bad}");
        }
    }

    #[test]
    fn type_mismatches_fail_the_decode() {
        for bad in [
            r#"{"path":123}"#,
            r#"{"flag":"true"}"#,
            r#"{"args":"x"}"#,
            r#"{"args":[1]}"#,
            r#"{"env":{"A":1}}"#,
            r#"{"env":[]}"#,
            r#""x""#,
            "[]",
            "1",
        ] {
            assert!(bind(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slices_and_maps_follow_go_reuse_rules() {
        let s = bind(r#"{"args":["a",null,"c"]}"#).unwrap();
        assert_eq!(s.args, vec!["a", "", "c"]);
        assert_eq!(bind(r#"{"args":["a","b"],"args":["x"]}"#).unwrap().args, vec!["x"]);
        let env = bind(r#"{"env":{"A":"1","B":"2"},"env":{"A":"3"}}"#).unwrap().env;
        assert_eq!(env.0, vec![("A".into(), "3".into()), ("B".into(), "2".into())]);
    }

    #[test]
    fn interface_values_reject_out_of_range_numbers() {
        let mut v = Value::Null;
        assert!(v.decode_into(&parse(b"1e400").unwrap()).is_err());
        assert!(v.decode_into(&parse(b"[1,{\"a\":-1e999}]").unwrap()).is_err());
        assert!(v.decode_into(&parse(b"1e308").unwrap()).is_ok());
    }
}
