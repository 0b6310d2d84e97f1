//! Target `homeguard_paths`: the home guard's path logic that reads
//! nothing (issue 44, item 9), so nothing is resolved, opened or deleted:
//! Go's `filepath.Clean` ([`gopath::clean`]), the leading-`~` expansion
//! ([`gopath::expand_home`]) and the guard's lexical half
//! ([`Homes::lexically`]: made absolute, cleaned, a home or above one, or
//! too long for the kernel to be asked). What the kernel answers
//! (links, `..` after a link, identities, mounts) is the property test's
//! (`base/homeguard/props.rs`).
//!
//! The input is a recipe: a home, a working directory, a target (free,
//! below the home, or a `~` spelling) made of names, `.`, `..`, extra
//! slashes and raw bytes, and padding put into the target at one of its
//! boundaries (`/.` runs, `//` runs, `name/..` detours), often enough to
//! carry it past `PATH_MAX`.
//!
//! Properties:
//! - `clean` equals a component-stack model, and cleaning twice changes
//!   nothing;
//! - the lexical verdict equals a model built on that one (a home or a
//!   directory above one is `Home`; otherwise `PATH_MAX` bytes or more
//!   made absolute is `TooLong`; a relative target with no working
//!   directory is `Unresolvable`; otherwise the kernel is asked);
//! - padding never changes the cleaned path, and never makes a target
//!   pass: a target judged `Home` stays `Home` padded, and a padded
//!   target of `PATH_MAX` bytes or more is never left to the kernel
//!   (audit F1: `/proc/self/root` and 2 025 `/.` before the home passed);
//! - `~` expands to the home joined with the rest, cleaned; one whose rest
//!   cleans to nothing is judged `Home`.

use crate::base::gopath;
use crate::base::homeguard::{too_long_for_the_kernel, Homes, Lexical, Verdict, PATH_MAX};
use arbitrary::{Arbitrary, Unstructured};

/// Names the recipes pick from, so that target and home share some.
const NAMES: &[&[u8]] = &[b"home", b"u", b"a", b"b", b".claude", b"...", b"x y", b"\xff"];

/// The most padding runs one input puts in: past `PATH_MAX` (4096 bytes
/// of `/.` is 2 048 runs) with room to spare, and no further.
const MAX_RUNS: u16 = 2_300;

#[derive(Debug, Arbitrary)]
enum Piece {
    Name(u8),
    Dot,
    DotDot,
    /// An extra `/` (an empty name).
    Slash,
    Raw(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Target {
    Free {
        absolute: bool,
        pieces: Vec<Piece>,
    },
    /// The home's own spelling, then the pieces.
    BelowHome(Vec<Piece>),
    /// `~` then the pieces (names, `.`, `..` and slashes only: the
    /// expansion takes UTF-8).
    Tilde(Vec<Piece>),
}

#[derive(Debug, Arbitrary)]
enum PadKind {
    /// `/.`
    DotRuns,
    /// `//`
    Slashes,
    /// `/<name>/..`
    Detours(u8),
}

#[derive(Debug, Arbitrary)]
struct Padding {
    /// Which boundary of the target (after which piece).
    at: u8,
    runs: u16,
    kind: PadKind,
}

#[derive(Debug, Arbitrary)]
struct GuardPathsInput {
    home_absolute: bool,
    home: Vec<Piece>,
    /// Always absolute, as `current_dir` is.
    cwd: Option<Vec<Piece>>,
    target: Target,
    padding: Option<Padding>,
}

/// `pieces` joined by `/` (after a leading `/` when `absolute`), and the
/// offset after each piece (the boundaries padding goes at).
fn render(absolute: bool, pieces: &[Piece], text_only: bool) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    if absolute {
        out.push(b'/');
    }
    let mut boundaries = vec![out.len()];
    for piece in pieces {
        if !out.is_empty() && out.last() != Some(&b'/') {
            out.push(b'/');
        }
        match piece {
            Piece::Name(n) => {
                let name = NAMES[usize::from(*n) % NAMES.len()];
                if text_only && std::str::from_utf8(name).is_err() {
                    out.extend_from_slice(b"n");
                } else {
                    out.extend_from_slice(name);
                }
            }
            Piece::Dot => out.push(b'.'),
            Piece::DotDot => out.extend_from_slice(b".."),
            Piece::Slash => out.push(b'/'),
            Piece::Raw(raw) if !text_only => out.extend_from_slice(raw),
            Piece::Raw(_) => out.push(b'r'),
        }
        boundaries.push(out.len());
    }
    (out, boundaries)
}

/// The model of Go's `Clean`: names kept on a stack, `.` and empty names
/// dropped, `..` popping one (at the root of an absolute path nothing;
/// kept at the front of a relative one).
fn model_clean(path: &[u8]) -> Vec<u8> {
    let absolute = path.first() == Some(&b'/');
    let mut stack: Vec<&[u8]> = Vec::new();
    for name in path.split(|&c| c == b'/') {
        match name {
            b"" | b"." => {}
            b".." => match stack.last() {
                Some(&last) if last != b".." => {
                    stack.pop();
                }
                _ if absolute => {}
                _ => stack.push(name),
            },
            _ => stack.push(name),
        }
    }
    let joined = stack.join(&b'/');
    match (absolute, joined.is_empty()) {
        (true, _) => [&b"/"[..], &joined].concat(),
        (false, true) => b".".to_vec(),
        (false, false) => joined,
    }
}

/// The names of the cleaned absolute `path`.
fn names(clean: &[u8]) -> Vec<&[u8]> {
    clean.split(|&c| c == b'/').filter(|n| !n.is_empty()).collect()
}

/// The model of the lexical verdict for `target` against the home
/// `home` (both as given), from `cwd` (absolute) when there is one.
fn model_verdict(home: &[u8], target: &[u8], cwd: Option<&[u8]>) -> Lexical {
    let absolute = |p: &[u8]| match (p.first() == Some(&b'/'), cwd) {
        (true, _) => Some(p.to_vec()),
        (false, Some(cwd)) => Some([cwd, b"/", p].concat()),
        (false, None) => None,
    };
    let Some(home) = absolute(home) else {
        // A relative home without a working directory guards nothing.
        return Lexical::Decided(Verdict::Clear);
    };
    if target.is_empty() {
        return Lexical::Decided(Verdict::Clear);
    }
    let Some(abs) = absolute(target) else {
        return Lexical::Decided(Verdict::Unresolvable);
    };
    let (home_names, target_names) = (model_clean(&home), model_clean(&abs));
    let (home_names, target_names) = (names(&home_names), names(&target_names));
    if home_names.starts_with(&target_names) {
        return Lexical::Decided(Verdict::Home);
    }
    if abs.len() >= PATH_MAX {
        return Lexical::Decided(Verdict::TooLong);
    }
    Lexical::AskTheKernel(abs)
}

/// `target` with `padding` put in at one of its `boundaries`; padding
/// never changes what the target cleans to.
fn pad(target: &[u8], boundaries: &[usize], padding: &Padding) -> Vec<u8> {
    let at = boundaries[usize::from(padding.at) % boundaries.len()].min(target.len());
    let runs = usize::from(padding.runs % MAX_RUNS);
    let relative_start = at == 0 && target.first() != Some(&b'/');
    let run: Vec<u8> = match (&padding.kind, relative_start) {
        // At the start of a relative target, a run that keeps it relative.
        (PadKind::DotRuns, true) => b"./".to_vec(),
        (PadKind::DotRuns, false) => b"/.".to_vec(),
        (PadKind::Slashes, true) => b"./".to_vec(),
        (PadKind::Slashes, false) => b"//".to_vec(),
        (PadKind::Detours(n), true) => [NAMES[usize::from(*n) % NAMES.len()], b"/../"].concat(),
        (PadKind::Detours(n), false) => [b"/", NAMES[usize::from(*n) % NAMES.len()], b"/.."].concat(),
    };
    let mut out = Vec::with_capacity(target.len() + run.len() * runs + 1);
    out.extend_from_slice(&target[..at]);
    for _ in 0..runs {
        out.extend_from_slice(&run);
    }
    // A boundary after a `/` has the next name right after it: the run
    // must not run into it (`/.` then `...` would be `/....`).
    if runs > 0 && out.last() != Some(&b'/') && target.get(at).is_some_and(|&c| c != b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(&target[at..]);
    out
}

/// `path` for a message: its length and its first 160 bytes.
fn shown(path: &[u8]) -> String {
    format!(
        "{} bytes {:?}",
        path.len(),
        String::from_utf8_lossy(&path[..path.len().min(160)])
    )
}

/// Target `homeguard_paths` (see the module comment).
pub fn homeguard_paths(data: &[u8]) {
    let Ok(input) = GuardPathsInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let (home, _) = render(input.home_absolute, &input.home, false);
    let cwd = input.cwd.as_ref().map(|pieces| render(true, pieces, false).0);
    let cwd = cwd.as_deref();
    let homes = Homes::of_spellings(&[&home], cwd);
    let (target, boundaries) = match &input.target {
        Target::Free { absolute, pieces } => render(*absolute, pieces, false),
        Target::BelowHome(pieces) => {
            let (below, boundaries) = render(false, pieces, false);
            let at = home.len() + 1;
            (
                [&home[..], b"/", &below].concat(),
                boundaries.iter().map(|b| b + at).collect(),
            )
        }
        Target::Tilde(pieces) => {
            let (rest, boundaries) = render(true, pieces, true);
            ([&b"~"[..], &rest].concat(), boundaries.iter().map(|b| b + 1).collect())
        }
    };

    for path in [&home, &target] {
        let clean = gopath::clean(path);
        assert_eq!(clean, model_clean(path), "clean({})", shown(path));
        assert_eq!(gopath::clean(&clean), clean, "clean twice ({})", shown(path));
    }

    let target = match (&input.target, std::str::from_utf8(&home)) {
        (Target::Tilde(_), Ok(home_text)) => {
            let spelled = std::str::from_utf8(&target).unwrap_or_default();
            let expanded = gopath::expand_home(spelled, Some(home_text)).into_bytes();
            let rest = &target[1..];
            let expected = if rest.is_empty() {
                home.clone()
            } else {
                model_clean(&[&home[..], b"/", rest].concat())
            };
            assert_eq!(expanded, expected, "expand_home({})", shown(&target));
            // `~`, `~/`, `~/a/..`: the home itself, wherever it is.
            if model_clean(&[b"/", rest].concat()) == b"/" && (home.first() == Some(&b'/') || cwd.is_some()) {
                assert_eq!(
                    homes.lexically(&expanded, cwd),
                    Lexical::Decided(Verdict::Home),
                    "{} with HOME {}",
                    shown(&target),
                    shown(&home)
                );
            }
            expanded
        }
        (Target::Tilde(_), Err(_)) => return,
        _ => target,
    };

    let verdict = homes.lexically(&target, cwd);
    assert_eq!(
        verdict,
        model_verdict(&home, &target, cwd),
        "{} against {}",
        shown(&target),
        shown(&home)
    );

    let Some(padding) = &input.padding else {
        return;
    };
    // Boundaries of a `~` target moved in the expansion: pad the start.
    let boundaries = if matches!(input.target, Target::Tilde(_)) {
        vec![0]
    } else {
        boundaries
    };
    let padded = pad(&target, &boundaries, padding);
    assert_eq!(
        gopath::clean(&padded),
        gopath::clean(&target),
        "padding changed what {} cleans to",
        shown(&target)
    );
    let padded_verdict = homes.lexically(&padded, cwd);
    assert_eq!(
        padded_verdict,
        model_verdict(&home, &padded, cwd),
        "{} against {}",
        shown(&padded),
        shown(&home)
    );
    // A relative home with no working directory guards nothing.
    let guarded = home.first() == Some(&b'/') || cwd.is_some();
    if verdict == Lexical::Decided(Verdict::Home) {
        assert_eq!(padded_verdict, verdict, "{} padded", shown(&target));
    }
    let padded_abs_len = match (padded.first(), cwd) {
        (Some(b'/'), _) => padded.len(),
        (_, Some(cwd)) => cwd.len() + 1 + padded.len(),
        (_, None) => 0,
    };
    if guarded && padded_abs_len >= PATH_MAX {
        assert!(
            matches!(
                padded_verdict,
                Lexical::Decided(Verdict::Home) | Lexical::Decided(Verdict::TooLong)
            ),
            "{} bytes judged {padded_verdict:?}",
            padded_abs_len
        );
    }
    if let Lexical::AskTheKernel(abs) = &padded_verdict {
        assert!(!too_long_for_the_kernel(abs), "{} bytes left to the kernel", abs.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arbitrary_inputs_pass_the_checks() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..20_000u64 {
            let data: Vec<u8> = (0..i % 97)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            homeguard_paths(&data);
        }
    }

    #[test]
    fn the_models_say_what_go_and_the_audit_say() {
        for (path, clean) in [
            (&b"/a//b/./c/.."[..], &b"/a/b"[..]),
            (b"/../..", b"/"),
            (b"a/../../b", b"../b"),
            (b"", b"."),
            (b"./", b"."),
        ] {
            assert_eq!(model_clean(path), clean);
            assert_eq!(gopath::clean(path), clean);
        }
        // Audit F1's shape: `/.` runs before the home, past PATH_MAX.
        let home = b"/home/u";
        let f1 = [&b"/proc/self/root"[..], &b"/.".repeat(2045), home].concat();
        assert!(f1.len() >= PATH_MAX);
        assert_eq!(model_verdict(home, &f1, None), Lexical::Decided(Verdict::TooLong));
        assert_eq!(
            model_verdict(home, b"/home/x/../u/", None),
            Lexical::Decided(Verdict::Home)
        );
        assert_eq!(
            model_verdict(home, b"/home/uu", None),
            Lexical::AskTheKernel(b"/home/uu".to_vec())
        );
        // Padding after a `/` does not run into the next name.
        let padding = Padding {
            at: 1,
            runs: 2,
            kind: PadKind::DotRuns,
        };
        assert_eq!(pad(b"//...", &[0, 2], &padding), b"///././...");
    }
}
