//! The text of Go's `*json.UnmarshalTypeError`, for the methods whose
//! `-32602` reply carries the decoder's detail (`plugins.prune`).
//!
//! Go names the JSON value it met (`string`, `bool`, `array`, `object`,
//! `number`; `number <literal>` when a number does not fit an integer
//! target) and the Go type it wanted, either as a field path inside the
//! top-level struct (`Go struct field T.field of type int`) or, for the
//! top-level value itself, as the qualified type (`Go value of type
//! pkg.T`). Only the first mismatch is reported: Go keeps decoding and
//! saves the first error.

// Windows: its user (`plugins.prune`'s params) is not ported yet (issue 43).
#![cfg_attr(windows, allow(dead_code))]

use super::value::Value;
use std::fmt;

/// One `json: cannot unmarshal …` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeError {
    /// What Go calls the value: `string`, `number 1.5`, …
    pub value: String,
    /// Where it was going.
    pub target: Target,
}

/// Where the mismatched value was being stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// The top-level value, of the qualified Go type (`handlers.PruneParams`).
    Value { go_type: &'static str },
    /// A field of the top-level struct: `Struct.field` (the field by its
    /// JSON name) and the field's (or element's) Go type.
    Field {
        struct_name: &'static str,
        field: &'static str,
        go_type: &'static str,
    },
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Value { go_type } => {
                write!(
                    f,
                    "json: cannot unmarshal {} into Go value of type {go_type}",
                    self.value
                )
            }
            Target::Field {
                struct_name,
                field,
                go_type,
            } => write!(
                f,
                "json: cannot unmarshal {} into Go struct field {struct_name}.{field} of type {go_type}",
                self.value
            ),
        }
    }
}

/// How Go names `value` when it cannot be stored in a non-integer target.
pub(crate) fn value_kind(value: &Value) -> String {
    value.kind().to_string()
}

/// How Go names `value` when it cannot be stored in an integer target: a
/// number that is not a plain in-range integer literal carries its
/// literal (`number 1.5`, `number 1e3`).
pub(crate) fn value_kind_for_int(value: &Value) -> String {
    match value {
        Value::Number(literal) => format!("number {literal}"),
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_go() {
        let field = TypeError {
            value: value_kind_for_int(&Value::String("x".into())),
            target: Target::Field {
                struct_name: "PruneParams",
                field: "minAgeDays",
                go_type: "int",
            },
        };
        assert_eq!(
            field.to_string(),
            "json: cannot unmarshal string into Go struct field PruneParams.minAgeDays of type int"
        );
        let top = TypeError {
            value: value_kind(&Value::Array(vec![])),
            target: Target::Value {
                go_type: "handlers.PruneParams",
            },
        };
        assert_eq!(
            top.to_string(),
            "json: cannot unmarshal array into Go value of type handlers.PruneParams"
        );
        assert_eq!(value_kind_for_int(&Value::Number("1.5".into())), "number 1.5");
        assert_eq!(value_kind(&Value::Number("1.5".into())), "number");
        assert_eq!(value_kind(&Value::Bool(true)), "bool");
        assert_eq!(value_kind(&Value::Object(vec![])), "object");
    }
}
