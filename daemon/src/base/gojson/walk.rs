//! Depth-independent traversal of a [`Value`] tree.
//!
//! A request line may nest arrays and objects 10 000 levels deep (Go's
//! limit), and the parser accepts that without recursion. Everything that
//! later looks at the tree — re-encoding an id, `%v` for the log, binding
//! checks, cloning, comparing, dropping — must not recurse either: a task's
//! stack is a few MiB and one frame per level of hostile input would
//! overflow it before authentication is even checked. So every traversal
//! of a [`Value`] goes through [`walk`], which keeps its own heap stack, or
//! (for `Drop` and `PartialEq`) an explicit work list of its own.

use super::value::Value;
use std::collections::BTreeMap;
use std::ops::ControlFlow;

/// One event of a depth-first walk, in document order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step<'a> {
    /// `null`, a bool, a number or a string.
    Scalar(&'a Value),
    /// An array or object begins; `len` children follow.
    Open { array: bool, len: usize },
    /// The next child of the innermost open container begins: its position
    /// and, inside an object, its key.
    Item { index: usize, key: Option<&'a str> },
    /// The innermost open container ends.
    Close { array: bool },
}

/// The order in which an object's members are visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Members {
    /// As written, duplicates included (what the parser kept).
    Source,
    /// As Go sees a decoded `map[string]interface{}`: sorted by key bytes,
    /// the last of duplicate keys winning. Both `encoding/json` and `fmt`
    /// print maps in this order.
    GoMap,
}

enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>, usize),
    Object(std::vec::IntoIter<(&'a str, &'a Value)>, usize),
}

fn members_in(order: Members, members: &[(String, Value)]) -> Vec<(&str, &Value)> {
    match order {
        Members::Source => members.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        Members::GoMap => {
            let mut map: BTreeMap<&str, &Value> = BTreeMap::new();
            for (k, v) in members {
                map.insert(k, v);
            }
            map.into_iter().collect()
        }
    }
}

/// Visits `root` depth-first without recursion. `visit` may stop the walk
/// early by returning `Break`; memory is one frame per open container, on
/// the heap.
pub(crate) fn walk<'a, B>(
    root: &'a Value,
    order: Members,
    mut visit: impl FnMut(Step<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let mut stack: Vec<Frame<'a>> = Vec::new();
    let mut next = Some(root);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Array(items) => {
                    visit(Step::Open {
                        array: true,
                        len: items.len(),
                    })?;
                    stack.push(Frame::Array(items.iter(), 0));
                }
                Value::Object(members) => {
                    let members = members_in(order, members);
                    visit(Step::Open {
                        array: false,
                        len: members.len(),
                    })?;
                    stack.push(Frame::Object(members.into_iter(), 0));
                }
                scalar => visit(Step::Scalar(scalar))?,
            }
        }
        let Some(top) = stack.last_mut() else {
            return ControlFlow::Continue(());
        };
        let (child, array) = match top {
            Frame::Array(items, index) => {
                let child = items.next().map(|v| (*index, None, v));
                (child, true)
            }
            Frame::Object(members, index) => {
                let child = members.next().map(|(k, v)| (*index, Some(k), v));
                (child, false)
            }
        };
        match child {
            Some((index, key, value)) => {
                match top {
                    Frame::Array(_, i) | Frame::Object(_, i) => *i += 1,
                }
                visit(Step::Item { index, key })?;
                next = Some(value);
            }
            None => {
                stack.pop();
                visit(Step::Close { array })?;
            }
        }
    }
}

impl Clone for Value {
    fn clone(&self) -> Value {
        clone_value(self)
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        equal(self, other)
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        drop_children(self);
    }
}

/// Source-order, derive-like text (`Object({"a": Array([Number("1")])})`), built
/// without recursion.
impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flow = walk(self, Members::Source, |step| {
            let written = match step {
                Step::Scalar(Value::Bool(b)) => write!(f, "Bool({b})"),
                Step::Scalar(Value::Number(n)) => write!(f, "Number({n:?})"),
                Step::Scalar(Value::String(s)) => write!(f, "String({s:?})"),
                Step::Scalar(_) => f.write_str("Null"),
                Step::Open { array: true, .. } => f.write_str("Array(["),
                Step::Open { array: false, .. } => f.write_str("Object({"),
                Step::Item { index, key } => {
                    let sep = if index > 0 { ", " } else { "" };
                    match key {
                        Some(key) => write!(f, "{sep}{key:?}: "),
                        None => f.write_str(sep),
                    }
                }
                Step::Close { array: true } => f.write_str("])"),
                Step::Close { array: false } => f.write_str("})"),
            };
            match written {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        });
        match flow {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(e) => Err(e),
        }
    }
}

/// Builds a copy of `root` bottom-up with a heap stack ([`Value::clone`]).
fn clone_value(root: &Value) -> Value {
    enum Building {
        Array(Vec<Value>),
        Object(Vec<(String, Value)>, String),
    }
    let mut stack: Vec<Building> = Vec::new();
    let mut finished: Option<Value> = None;
    let attach = |stack: &mut Vec<Building>, finished: &mut Option<Value>, value: Value| match stack.last_mut() {
        Some(Building::Array(items)) => items.push(value),
        Some(Building::Object(members, key)) => members.push((std::mem::take(key), value)),
        None => *finished = Some(value),
    };
    let flow: ControlFlow<()> = walk(root, Members::Source, |step| {
        match step {
            Step::Scalar(v) => {
                let copy = match v {
                    Value::Bool(b) => Value::Bool(*b),
                    Value::Number(n) => Value::Number(n.clone()),
                    Value::String(s) => Value::String(s.clone()),
                    _ => Value::Null,
                };
                attach(&mut stack, &mut finished, copy);
            }
            Step::Open { array: true, len } => stack.push(Building::Array(Vec::with_capacity(len))),
            Step::Open { array: false, len } => stack.push(Building::Object(Vec::with_capacity(len), String::new())),
            Step::Item { key, .. } => {
                if let (Some(Building::Object(_, slot)), Some(key)) = (stack.last_mut(), key) {
                    *slot = key.to_string();
                }
            }
            Step::Close { .. } => {
                let done = match stack.pop() {
                    Some(Building::Array(items)) => Value::Array(items),
                    Some(Building::Object(members, _)) => Value::Object(members),
                    None => Value::Null,
                };
                attach(&mut stack, &mut finished, done);
            }
        }
        ControlFlow::Continue(())
    });
    let _ = flow;
    finished.unwrap_or_default()
}

/// Structural equality with a work list instead of recursion.
fn equal(a: &Value, b: &Value) -> bool {
    let mut pending: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some((x, y)) = pending.pop() {
        match (x, y) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(p), Value::Bool(q)) if p == q => {}
            (Value::Number(p), Value::Number(q)) if p == q => {}
            (Value::String(p), Value::String(q)) if p == q => {}
            (Value::Array(p), Value::Array(q)) if p.len() == q.len() => pending.extend(p.iter().zip(q)),
            (Value::Object(p), Value::Object(q)) if p.len() == q.len() => {
                for ((kp, vp), (kq, vq)) in p.iter().zip(q) {
                    if kp != kq {
                        return false;
                    }
                    pending.push((vp, vq));
                }
            }
            _ => return false,
        }
    }
    true
}

/// Empties `value`'s children into a work list and drops them one by one,
/// so no drop glue ever runs more than one level deep.
fn drop_children(value: &mut Value) {
    let mut pending: Vec<Value> = Vec::new();
    let take = |value: &mut Value, pending: &mut Vec<Value>| match value {
        Value::Array(items) => pending.append(items),
        Value::Object(members) => pending.extend(members.drain(..).map(|(_, v)| v)),
        _ => {}
    };
    take(value, &mut pending);
    while let Some(mut child) = pending.pop() {
        take(&mut child, &mut pending);
        // `child` now has no children; dropping it is flat.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::parse;

    fn deep(depth: usize, open: &str, leaf: &str, close: &str) -> String {
        format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth))
    }

    #[test]
    fn walks_in_document_order_with_go_map_members() {
        let value = parse(br#"{"b":[1,{}],"a":null,"b":true}"#).unwrap();
        let mut seen = Vec::new();
        let _: ControlFlow<()> = walk(&value, Members::GoMap, |step| {
            seen.push(match step {
                Step::Scalar(v) => v.kind().to_string(),
                Step::Open { array, len } => format!("open {array} {len}"),
                Step::Item { index, key } => format!("item {index} {key:?}"),
                Step::Close { array } => format!("close {array}"),
            });
            ControlFlow::Continue(())
        });
        assert_eq!(
            seen,
            [
                "open false 2",
                "item 0 Some(\"a\")",
                "null",
                "item 1 Some(\"b\")",
                "bool",
                "close false"
            ]
        );
    }

    #[test]
    fn deep_trees_clone_compare_and_drop_on_a_small_stack() {
        // 64 KiB of stack: a recursive clone, comparison or drop of 10 000
        // levels needs far more than that.
        let worker = std::thread::Builder::new().stack_size(64 * 1024).spawn(|| {
            let text = deep(9_999, "[", "1", "]");
            let value = parse(text.as_bytes()).unwrap();
            let copy = value.clone();
            assert!(copy == value);
            let other = parse(deep(9_999, "[", "2", "]").as_bytes()).unwrap();
            assert!(other != value);
            let objects = parse(deep(9_999, "{\"k\":", "0", "}").as_bytes()).unwrap();
            let copy = objects.clone();
            assert!(copy == objects);
            drop((value, copy, other, objects));
        });
        assert!(worker.unwrap().join().is_ok());
    }
}
