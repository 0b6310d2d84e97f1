//! The generator's vocabulary: methods, fixtures, paths inside `$ROOT`,
//! awkward strings, mistyped values, integers and ids of every JSON type.

use super::Rng;

/// Every method, in the order server.capabilities lists them: the
/// daemon's own table, so a method added there reaches the fuzzer (and
/// [`super::gen`]'s exhaustive match on [`remora::protocol::method::Method`] must
/// learn its params before the harness builds again).
pub use remora::protocol::method::METHODS;

/// Methods with no side effects (may be in flight together); each is in
/// [`METHODS`] (a test checks).
pub(super) const READ_ONLY: [&str; 8] = [
    "server.ping",
    "server.capabilities",
    "files.list",
    "files.validate",
    "files.stat",
    "files.read",
    "git.info",
    "git.status",
];

/// Method names the table does not have: a removed one (`server.version`,
/// gone since reference `7d193f89`, which every pinned build answers
/// -32601) and malformed ones, sent in place of a request's method.
pub(super) const NOT_METHODS: [&str; 14] = [
    "\"server.version\"",
    "\"nodot\"",
    "\"server.\"",
    "\".ping\"",
    "\"Server.Ping\"",
    "\"server.PING\"",
    "\"bogus.ping\"",
    "\"files.nope\"",
    "\"plugins.bogus\"",
    "\"server.ping.x\"",
    "\"\"",
    "\"server.ping\\u0000\"",
    "\"git.info \"",
    "\"plugins.Prune\"",
];

/// The base fixture: small files with awkward bytes, a directory, links and
/// a tar archive.
pub(super) const FIXTURES: [&str; 9] = [
    "file a.txt \"hello\\n\"",
    "file u.txt \"<a>&b\\xe2\\x80\\xa8x\\xff\\xfey\\x01\\x08\\x0c\\\"\\\\\\n\"",
    "dir d",
    "file d/b.txt 0600 \"bee\"",
    "file d/.hidden \"h\"",
    "symlink l a.txt",
    "symlink dangling nowhere",
    "tar t.tgz\n  dir top/\n  file top/x.txt 0755 \"x\\n\"\n  file top/y.txt \"why\"\nend",
    "tar bad.tgz garbage\nend",
];

pub(super) const GIT_FIXTURE: [&str; 5] = [
    "git init -q repo",
    "file repo/r.txt \"r\\n\"",
    "git -C repo add r.txt",
    "git -C repo commit -q -m init",
    "git -C repo branch side",
];

/// Read-only paths (any of them may also be mangled).
pub(super) const PATHS: [&str; 16] = [
    "\"$ROOT/a.txt\"",
    "\"$ROOT/u.txt\"",
    "\"$ROOT/d\"",
    "\"$ROOT/d/b.txt\"",
    "\"$ROOT/l\"",
    "\"$ROOT/dangling\"",
    "\"$ROOT/missing\"",
    "\"$ROOT\"",
    "\"$ROOT/repo\"",
    "\"$ROOT/repo/r.txt\"",
    "\"a.txt\"",
    "\"d\"",
    "\"\"",
    "\"/\"",
    "\"/nonexistent/x\"",
    "\"$ROOT/d/\"",
];

/// Strings with awkward content, in JSON (template) syntax without quotes.
pub(super) const JUNK: [&str; 22] = [
    "",
    "x",
    "\\u2028",
    "\\u2029",
    "<>&",
    "\\u003c\\u003e",
    "\\u0000",
    "\\ud800",
    "\\udc00x",
    "\\ud83d\\ude00",
    "$bytes(\\xff)",
    "$bytes(\\xe2\\x80)",
    "$bytes(\\xc0\\xaf)",
    "é",
    "e\\u0301",
    "\\n\\t\\r",
    "\\\"",
    "\\\\",
    "\\/",
    " ",
    "$repeat(300,a)",
    "$$HOME",
];

/// Values of the wrong type for a field.
pub(super) const CONFUSED: [&str; 18] = [
    "123",
    "1.5",
    "1e3",
    "\"4\"",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "[\"a\"]",
    "{\"a\":1}",
    "\"\"",
    "-1",
    "0",
    "[null]",
    "\"x\"",
    "1e400",
    "{\"path\":\"$ROOT/a.txt\"}",
];

/// Numbers for integer fields.
pub(super) const INTS: [&str; 18] = [
    "0",
    "1",
    "-1",
    "3",
    "4",
    "100",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1.0",
    "1.5",
    "1e3",
    "1E2",
    "-0",
    "2147483648",
    "\"4\"",
];

/// Request ids of every JSON type.
pub(super) const IDS: [&str; 30] = [
    "1",
    "2",
    "0",
    "-1",
    "7",
    "1.0",
    "1.5",
    "1e3",
    "-0",
    "1e21",
    "1e-7",
    "0.000001",
    "12345678901234567890",
    "123456789012345678901234567890",
    "1e400",
    "\"a\"",
    "\"a<b\"",
    "\"\"",
    "\"\\u2028\"",
    "\"\\ud800x\"",
    "\"$bytes(\\xff\\xfe)\"",
    "\"\\ud83d\\ude00\"",
    "true",
    "false",
    "null",
    "[]",
    "[1,\"a\"]",
    "{}",
    "{\"b\":1,\"a\":[1, 2]}",
    "9007199254740993",
];

/// Key spellings that Go's decoder matches to a field case-insensitively.
pub(super) fn fold_key(rng: &mut Rng, key: &str) -> String {
    match rng.below(4) {
        0 => key.to_ascii_uppercase(),
        1 => {
            let mut c = key.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        }
        2 if key.contains('s') => key.replacen('s', "\u{17F}", 1),
        _ if key.contains('k') => key.replacen('k', "\u{212A}", 1),
        _ => key.to_ascii_uppercase(),
    }
}

/// Appends the contents of JSON string `j` to JSON string `s` (a `/`
/// keeps a trailing `$ROOT` from running into the junk).
pub(super) fn join_junk(s: &str, j: &str) -> String {
    let base = &s[..s.len() - 1];
    let sep = if base.ends_with("$ROOT") { "/" } else { "" };
    format!("{base}{sep}{}", &j[1..])
}

pub(super) fn junk_string(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..1 + rng.below(3) {
        s.push_str(rng.pick_str(&JUNK));
    }
    format!("\"{s}\"")
}

pub(super) fn path(rng: &mut Rng) -> String {
    let p = rng.pick(&PATHS).to_string();
    if rng.pct(15) {
        // Append junk inside the string (read-only methods only).
        let j = junk_string(rng);
        join_junk(&p, &j)
    } else {
        p
    }
}

/// A value for a field that should hold `good`, sometimes confused.
pub(super) fn field(rng: &mut Rng, good: String) -> String {
    if rng.pct(18) {
        rng.pick(&CONFUSED).to_string()
    } else {
        good
    }
}

pub(super) fn b64(s: &str) -> String {
    format!("\"$b64({s})\"")
}
