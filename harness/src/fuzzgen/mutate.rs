//! Mutations of a request's envelope and params: each one is a small
//! function, and [`mutate`] rolls which of them a request gets. The order
//! of the rolls is part of what a seed means (case `n` of seed `s` must
//! stay the same case), so a mutation takes its random numbers exactly as
//! it did when it was one arm of a match.

use super::vocab::*;
use super::{atoms, render_members, Member, Req, Rng, Val};

/// Applies envelope and params mutations to a request (none, 55% of the
/// time; else one or two).
pub(super) fn mutate(r: &mut Rng, req: &mut Req) {
    if !r.pct(45) {
        return;
    }
    for _ in 0..1 + r.below(2) {
        let ms = &mut req.members;
        match r.below(16) {
            0 => drop_member(r, ms),
            1 => wrong_jsonrpc(r, ms),
            2 => wrong_auth(r, ms),
            3 => fold_one_key(r, ms),
            4 => duplicate_member(r, ms),
            5 => wrong_method(r, ms),
            6 | 7 => wrong_id(r, ms),
            8 => extra_member(r, ms),
            9 => shuffle(r, ms),
            10 => wrong_params(r, ms),
            11 => params_key(r, ms),
            12 => prefix_or_suffix(r, req),
            13 => nested_member(r, ms),
            14 => truncate(r, req),
            _ => junk_in_params(r, ms),
        }
    }
}

fn drop_member(r: &mut Rng, ms: &mut Vec<Member>) {
    if !ms.is_empty() {
        ms.remove(r.below(ms.len()));
    }
}

fn wrong_jsonrpc(r: &mut Rng, ms: &mut [Member]) {
    let v = ["\"1.0\"", "\"2.0 \"", "\"\"", "2", "2.0", "null", "\"2\""];
    set(ms, "jsonrpc", r.pick_str(&v));
}

fn wrong_auth(r: &mut Rng, ms: &mut [Member]) {
    let v = [
        "\"wrong\"",
        "\"\"",
        "123",
        "null",
        "\"PROBE-TOKEN\"",
        "\"$TOKEN \"",
        "\"$TOKEN\\u0000\"",
    ];
    set(ms, "auth", r.pick_str(&v));
}

/// A case-folded key.
fn fold_one_key(r: &mut Rng, ms: &mut [Member]) {
    let i = r.below(ms.len().max(1));
    if let Some(m) = ms.get_mut(i) {
        let k = m.key.trim_matches('"').to_string();
        m.key = format!("\"{}\"", fold_key(r, &k));
    }
}

/// A duplicate key (case-folded or not), good or bad first.
fn duplicate_member(r: &mut Rng, ms: &mut Vec<Member>) {
    if ms.is_empty() {
        return;
    }
    let i = r.below(ms.len());
    let mut d = ms[i].clone();
    if r.pct(50) {
        let k = d.key.trim_matches('"').to_string();
        d.key = format!("\"{}\"", fold_key(r, &k));
    }
    d.val = Val::Text(match d.key.to_ascii_lowercase().as_str() {
        "\"auth\"" => "\"bad\"".into(),
        "\"method\"" => "\"server.ping\"".into(),
        _ => id_safe_confused(r),
    });
    d.sensitive = false;
    let at = if r.pct(50) { i } else { ms.len() };
    ms.insert(at, d);
}

/// A name the table does not have, or a mistyped method.
fn wrong_method(r: &mut Rng, ms: &mut [Member]) {
    if r.pct(85) {
        set(ms, "method", r.pick_str(&NOT_METHODS));
    } else {
        set(ms, "method", r.pick_str(&["123", "null"]));
    }
}

fn wrong_id(r: &mut Rng, ms: &mut Vec<Member>) {
    let v = r.pick(&IDS).to_string();
    if r.pct(10) {
        ms.retain(|m| m.key != "\"id\"");
    } else {
        set(ms, "id", &v);
    }
}

/// An extra unknown member.
fn extra_member(r: &mut Rng, ms: &mut Vec<Member>) {
    let k = ["\"extra\"", "\"x\"", "\"\"", "\"id \"", "\"résumé\"", "\"\\u0069d\""];
    let k = r.pick(&k).to_string();
    let v = if r.pct(50) { id_safe_confused(r) } else { junk_string(r) };
    let at = r.below(ms.len() + 1);
    ms.insert(
        at,
        Member {
            key: k,
            val: Val::Text(v),
            sensitive: false,
        },
    );
}

/// The members in another order.
fn shuffle(r: &mut Rng, ms: &mut [Member]) {
    for i in (1..ms.len()).rev() {
        let j = r.below(i + 1);
        ms.swap(i, j);
    }
}

/// Params not an object, null or absent.
fn wrong_params(r: &mut Rng, ms: &mut Vec<Member>) {
    let v = ["\"x\"", "[]", "null", "1", "true", "[{}]", "\"\""];
    if r.pct(25) {
        ms.retain(|m| m.key != "\"params\"");
    } else {
        set(ms, "params", r.pick_str(&v));
    }
}

/// A params key case-folded or duplicated, or an unknown one added.
fn params_key(r: &mut Rng, ms: &mut [Member]) {
    let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") else {
        return;
    };
    if !p.is_empty() && r.pct(60) {
        let i = r.below(p.len());
        let mut d = p[i].clone();
        let k = d.key.trim_matches('"').to_string();
        d.key = format!("\"{}\"", fold_key(r, &k));
        if r.pct(50) {
            p[i] = d;
        } else {
            // Duplicate with a non-destructive junk value first.
            d.val = Val::Text(if d.sensitive {
                "\"\"".into()
            } else {
                r.pick(&CONFUSED).to_string()
            });
            d.sensitive = false;
            p.insert(i, d);
        }
    } else {
        let v = r.pick(&CONFUSED).to_string();
        p.push(Member::new("zzz", v));
    }
}

/// Bytes before or after the object on its line.
fn prefix_or_suffix(r: &mut Rng, req: &mut Req) {
    let pre = ["", "$bytes(\\x20)", "$bytes(\\t)", "$bytes(\\xef\\xbb\\xbf)"];
    let suf = [
        "$bytes(\\r)",
        "$bytes(\\x20)",
        " x",
        "}",
        "{}",
        ",",
        "$bytes(\\x00)",
        "\\n",
    ];
    if r.pct(40) {
        req.prefix = r.pick(&pre).to_string();
    } else {
        req.suffix = r.pick(&suf).to_string();
    }
}

/// Whitespace between tokens, or deep nesting, in an unknown member.
fn nested_member(r: &mut Rng, ms: &mut Vec<Member>) {
    let deep = if r.pct(50) {
        format!("{}1{}", "[".repeat(60), "]".repeat(60))
    } else {
        "{ \"a\" : [ 1 , 2 ] }".into()
    };
    ms.push(Member::new("nest", deep));
}

/// The object cut short (malformed JSON). A truncated request with
/// destructive parameters is not shrunk character by character.
fn truncate(r: &mut Rng, req: &mut Req) {
    let ms = &req.members;
    if ms
        .iter()
        .any(|m| m.sensitive || matches!(&m.val, Val::Obj(p) if p.iter().any(|m| m.sensitive)))
    {
        req.shrinkable = false;
    }
    req.raw = Some({
        let t = req_text_members(&req.members);
        let cut = r.below(atoms(&t).len().max(1));
        safe_cut(&t, cut)
    });
}

/// Junk inside string values of non-sensitive params.
fn junk_in_params(r: &mut Rng, ms: &mut [Member]) {
    let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") else {
        return;
    };
    for m in p.iter_mut().filter(|m| !m.sensitive) {
        if let Val::Text(t) = &mut m.val {
            if t.starts_with('"') && t.ends_with('"') && t.len() >= 2 && r.pct(50) {
                let j = junk_string(r);
                *t = join_junk(t, &j);
            }
        }
    }
}

/// A mistyped value that may end up as the request id: none that expands
/// a path, since an `await` id is literal and the path differs per run.
fn id_safe_confused(r: &mut Rng) -> String {
    loop {
        let c = r.pick(&CONFUSED);
        if !c.contains('$') {
            return c.to_string();
        }
    }
}

/// Cuts template text after `at` atoms (never inside an escape or a
/// `$…` template).
pub(super) fn safe_cut(t: &str, at: usize) -> String {
    atoms(t).into_iter().take(at).collect()
}

fn req_text_members(ms: &[Member]) -> String {
    let mut s = String::new();
    render_members(&mut s, ms);
    s
}

/// Sets every member named `key` (quotes not included) to `val`.
pub(super) fn set(ms: &mut [Member], key: &str, val: &str) {
    let k = format!("\"{key}\"");
    for m in ms.iter_mut().filter(|m| m.key == k) {
        m.val = Val::Text(val.to_string());
        m.sensitive = false;
    }
}
