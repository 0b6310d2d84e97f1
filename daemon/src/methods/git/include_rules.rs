//! Which ignored directories a `.worktreeinclude` manifest opens (the
//! directory scan of build f6010b97, as `docs/record/git-worktree-create.md`
//! states it). The manifest itself goes to git unchanged; these rules only
//! decide which ignored directories of `git ls-files --directory` are
//! searched at all, so an any-depth pattern does not reach into a closed
//! directory (`*.txt` does not copy `build/a.txt` when git ignores
//! `build/`).
//!
//! Per line: blank (only tabs and spaces, or nothing once one leading and
//! one trailing `/` are gone) and `#` comments do not count; every other
//! line counts, and only the first 256 counted can open a directory; a
//! negation opens nothing; a pattern over 1024 bytes or 32 segments opens
//! nothing. Names compare without regard to ASCII letter case.
//! - one segment, no leading `/`: a literal opens every listed directory
//!   with that name as any segment; a glob (`*`, `?`, `[`, `\`) opens
//!   every listed directory whose path starts with its literal prefix (an
//!   empty prefix opens nothing);
//! - one segment after a leading `/`: every listed directory whose first
//!   segment matches it as a glob;
//! - `**/` then one literal: as the literal alone; `**/` then a glob, or
//!   a lone-`\` segment: nothing; `**/` then more segments: matched from
//!   any segment of a listed directory;
//! - two or more segments: every listed directory that matches the first
//!   segments of the pattern one by one (so the target and its listed
//!   parents). A segment ending in an odd run of `\` matches any name; an
//!   empty segment (from `//`) matches none.
//!
//! An any-depth pattern (one segment without a leading `/`, or one that
//! starts with `**/`) also opens the listed dot directories, at most 128
//! in listing order; fourteen tool-cache names never open this way and
//! take no place, a dot directory a pattern opened takes no place, and
//! `.claude/worktrees` never opens.

/// Counted patterns that can open a directory.
const PATTERN_LIMIT: usize = 256;
/// Bytes and segments past which a pattern opens nothing.
const PATTERN_BYTES: usize = 1024;
const PATTERN_SEGMENTS: usize = 32;
/// Dot directories the any-depth rule opens.
const DOT_LIMIT: usize = 128;
/// Dot directories the any-depth rule never opens.
const DOT_SKIPPED: [&str; 14] = [
    ".angular",
    ".cache",
    ".dart_tool",
    ".gradle",
    ".next",
    ".nuxt",
    ".parcel-cache",
    ".pnpm-store",
    ".svelte-kit",
    ".terraform",
    ".tox",
    ".turbo",
    ".venv",
    ".yarn",
];

fn is_glob_char(c: u8) -> bool {
    matches!(c, b'*' | b'?' | b'[' | b'\\')
}

/// Whether `name` matches the glob `pattern` (`*`, `?`, `[...]` with `!`
/// or `^` negation and ranges, `\` escaping), ASCII case folded.
/// Iterative, with one backtrack point for the last `*`.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => class(pattern, p, name[n]),
            Some(b'\\') => match pattern.get(p + 1) {
                Some(c) if c.eq_ignore_ascii_case(&name[n]) => Some(p + 2),
                _ => None,
            },
            Some(c) if c.eq_ignore_ascii_case(&name[n]) => Some(p + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some((sp, sn))) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The position after the class at `start` if it matches `c`.
fn class(pattern: &[u8], start: usize, c: u8) -> Option<usize> {
    let mut i = start + 1;
    let negated = matches!(pattern.get(i), Some(b'!') | Some(b'^'));
    if negated {
        i += 1;
    }
    let c = c.to_ascii_lowercase();
    let mut hit = false;
    let mut first = true;
    loop {
        let lo = *pattern.get(i)?;
        if lo == b']' && !first {
            break;
        }
        first = false;
        let (lo, width) = if lo == b'\\' {
            (*pattern.get(i + 1)?, 2)
        } else {
            (lo, 1)
        };
        i += width;
        if pattern.get(i) == Some(&b'-') && pattern.get(i + 1).is_some_and(|&h| h != b']') {
            let hi = pattern[i + 1];
            i += 2;
            hit |= (lo.to_ascii_lowercase()..=hi.to_ascii_lowercase()).contains(&c);
        } else {
            hit |= lo.to_ascii_lowercase() == c;
        }
    }
    (hit != negated).then_some(i + 1)
}

/// Whether one pattern segment matches one directory name (see the
/// module comment for the `\` and empty-segment rules).
fn segment_matches(segment: &[u8], name: &[u8]) -> bool {
    if segment.is_empty() {
        return false;
    }
    let run = segment.iter().rev().take_while(|&&c| c == b'\\').count();
    if run % 2 == 1 {
        return true;
    }
    glob(segment, name)
}

/// One counted manifest pattern, as the opening rules read it.
struct Pattern<'a> {
    anchored: bool,
    segments: Vec<&'a [u8]>,
    /// Within the size limits.
    usable: bool,
}

impl Pattern<'_> {
    fn any_depth(&self) -> bool {
        self.usable && ((!self.anchored && self.segments.len() == 1) || self.starts_with_any_depth())
    }

    fn starts_with_any_depth(&self) -> bool {
        !self.anchored && self.segments.len() > 1 && self.segments[0] == b"**"
    }

    /// Whether this pattern opens the listed directory `dir`.
    fn opens(&self, dir: &[&[u8]], path: &[u8]) -> bool {
        if !self.usable {
            return false;
        }
        let segs = &self.segments;
        if self.starts_with_any_depth() {
            let rest = &segs[1..];
            let first = rest[0];
            if first.iter().copied().any(is_glob_char) {
                return false;
            }
            if rest.len() == 1 {
                return dir.iter().any(|d| d.eq_ignore_ascii_case(first));
            }
            // The rest, matched from any segment of `dir` (and the listed
            // parents of such a match).
            return (0..dir.len()).any(|from| prefix_matches(rest, &dir[from..]));
        }
        if segs.len() == 1 {
            let seg = segs[0];
            if self.anchored {
                return dir.first().is_some_and(|d| glob(seg, d));
            }
            return match seg.iter().position(|&c| is_glob_char(c)) {
                None => dir.iter().any(|d| d.eq_ignore_ascii_case(seg)),
                Some(0) => false,
                Some(cut) => path.len() >= cut && path[..cut].eq_ignore_ascii_case(&seg[..cut]),
            };
        }
        prefix_matches(segs, dir)
    }
}

/// Whether `dir`'s segments match the first segments of `pattern`.
fn prefix_matches(pattern: &[&[u8]], dir: &[&[u8]]) -> bool {
    !dir.is_empty() && dir.len() <= pattern.len() && dir.iter().zip(pattern).all(|(d, s)| segment_matches(s, d))
}

/// The counted patterns of a manifest (the first 256 can open; every one
/// can make the any-depth rule apply).
fn patterns(manifest: &[u8]) -> Vec<Pattern<'_>> {
    let mut out = Vec::new();
    for line in manifest.split(|&c| c == b'\n') {
        if line.iter().all(|&c| c == b' ' || c == b'\t') || line.starts_with(b"#") {
            continue;
        }
        if line.starts_with(b"!") {
            out.push(Pattern {
                anchored: false,
                segments: Vec::new(),
                usable: false,
            });
            continue;
        }
        let anchored = line.starts_with(b"/");
        let body = if anchored { &line[1..] } else { line };
        let body = body.strip_suffix(b"/").unwrap_or(body);
        if body.is_empty() {
            continue;
        }
        let segments: Vec<&[u8]> = body.split(|&c| c == b'/').collect();
        let usable = body.len() <= PATTERN_BYTES && segments.len() <= PATTERN_SEGMENTS;
        out.push(Pattern {
            anchored,
            segments,
            usable,
        });
    }
    out
}

/// For each listed ignored directory (paths without the trailing `/`, in
/// listing order), whether the manifest opens it.
pub(super) fn opened(manifest: &[u8], dirs: &[String]) -> Vec<bool> {
    let patterns = patterns(manifest);
    let explicit: Vec<bool> = dirs
        .iter()
        .map(|dir| {
            let segs: Vec<&[u8]> = dir.as_bytes().split(|&c| c == b'/').collect();
            patterns
                .iter()
                .take(PATTERN_LIMIT)
                .any(|p| p.opens(&segs, dir.as_bytes()))
        })
        .collect();
    let any_depth = patterns.iter().any(Pattern::any_depth);
    let mut places = 0;
    let mut out = Vec::with_capacity(dirs.len());
    for (dir, &open) in dirs.iter().zip(&explicit) {
        let never = dir.eq_ignore_ascii_case(".claude/worktrees");
        let name = dir.rsplit('/').next().unwrap_or(dir);
        let dot = any_depth
            && !open
            && name.starts_with('.')
            && !DOT_SKIPPED.iter().any(|s| s.eq_ignore_ascii_case(name))
            && places < DOT_LIMIT;
        if dot {
            places += 1;
        }
        out.push(!never && (open || dot));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opens(manifest: &str, dirs: &[&str]) -> Vec<String> {
        let dirs: Vec<String> = dirs.iter().map(|d| d.to_string()).collect();
        opened(manifest.as_bytes(), &dirs)
            .into_iter()
            .zip(&dirs)
            .filter(|(o, _)| *o)
            .map(|(_, d)| d.clone())
            .collect()
    }

    #[test]
    fn the_records_examples() {
        let dirs = [
            "build",
            "sub/build",
            "build/x",
            "sub",
            "subbuild",
            "ab",
            "a b",
            "a",
            "a/c",
            "aXb",
            "a_b",
        ];
        assert_eq!(opens("build", &dirs), ["build", "sub/build", "build/x"]);
        assert_eq!(opens("**/build", &dirs), ["build", "sub/build", "build/x"]);
        assert_eq!(opens("BUILD\n", &dirs), ["build", "sub/build", "build/x"]);
        assert_eq!(opens("/build/", &dirs), ["build", "build/x"]);
        assert_eq!(opens("/a?b/", &dirs), ["a b", "aXb", "a_b"]);
        assert_eq!(opens("/ab\\q/", &dirs), Vec::<String>::new());
        assert_eq!(opens("b*", &dirs), ["build", "build/x"]);
        assert_eq!(opens("su*", &dirs), ["sub/build", "sub", "subbuild"]);
        assert_eq!(opens("a?b/", &dirs), ["ab", "a b", "a", "a/c", "aXb", "a_b"]);
        assert_eq!(opens("sub\\build/", &dirs), ["sub/build", "sub", "subbuild"]);
        assert_eq!(opens("AB\\q/", &["ab"]), ["ab"]);
        assert_eq!(opens("**/sub/build/", &dirs), ["sub/build", "sub"]);
        assert_eq!(opens("*.txt", &dirs), Vec::<String>::new());
        assert_eq!(opens("**/b*", &dirs), Vec::<String>::new());
        assert_eq!(opens("!build\n# build\n", &dirs), Vec::<String>::new());
        assert_eq!(opens("sub/b\\q/", &dirs), ["sub"]);
    }

    #[test]
    fn backslash_runs_and_empty_segments() {
        let dirs = [
            "zz",
            "zz\\",
            "zz\\/x",
            "q/x",
            "build",
            "sub/build",
            "a/x/build",
            "a",
            "a/b",
        ];
        assert_eq!(opens("sub\\/x/", &dirs), ["zz", "zz\\", "zz\\/x", "q/x", "build", "a"]);
        assert_eq!(opens("zz\\\\/x/", &dirs), ["zz\\", "zz\\/x"]);
        assert_eq!(opens("build//", &dirs), ["build"]);
        assert_eq!(opens("build//a.txt", &dirs), ["build"]);
        assert_eq!(opens("BUILD//", &dirs), ["build"]);
        assert_eq!(opens("//x", &dirs), Vec::<String>::new());
        assert_eq!(opens("a//b", &dirs), ["a"]);
    }

    #[test]
    fn dot_directories_and_limits() {
        let dirs = [".venv", ".env", ".claude", ".claude/worktrees", "sub/.hidden", "build"];
        // Any-depth: the dot directories open, but the skipped names.
        assert_eq!(opens("*.txt", &dirs), [".env", ".claude", "sub/.hidden"]);
        // Not any-depth: none.
        assert_eq!(opens("/x/", &dirs), Vec::<String>::new());
        assert_eq!(opens("build//", &dirs), ["build"]);
        // An explicit pattern opens a skipped one; worktrees never.
        assert_eq!(
            opens(".venv\n.claude/worktrees/", &dirs),
            [".venv", ".env", ".claude", "sub/.hidden"]
        );
        // 128 places.
        let many: Vec<String> = (0..130).map(|i| format!(".d{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(opens("*.txt", &refs).len(), 128);
        // Only the first 256 counted patterns open.
        let mut manifest = "!x\n".repeat(256);
        manifest.push_str("build\n");
        assert_eq!(opens(&manifest, &["build"]), Vec::<String>::new());
        let manifest = format!("{}\nbuild\n", "\n# c\n  \t\n//\n".repeat(300));
        assert_eq!(opens(&manifest, &["build"]), ["build"]);
        assert_eq!(
            opens(&format!("{}/", "a".repeat(1025)), &["build"]),
            Vec::<String>::new()
        );
    }
}
