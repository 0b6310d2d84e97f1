//! Go's `path/filepath` `Clean` and `Join` (Unix), on bytes, and the
//! reference's expansion of a leading `~` in client paths.
//!
//! Entry paths in `files.list` and extraction targets in `files.extract_tar`
//! are built with `filepath.Join` by the Go daemon, which also cleans them:
//! `//`, `.` and `..` are resolved lexically. The zip-slip check compares
//! the cleaned target against the cleaned destination, so these must match
//! Go byte for byte. Paths are bytes because names from the disk or from an
//! archive need not be UTF-8.

/// Go's `filepath.Clean`.
pub(crate) fn clean(path: &[u8]) -> Vec<u8> {
    if path.is_empty() {
        return b".".to_vec();
    }
    let rooted = path[0] == b'/';
    let n = path.len();
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let (mut r, mut dotdot) = (0, 0);
    if rooted {
        out.push(b'/');
        r = 1;
        dotdot = 1;
    }
    while r < n {
        if path[r] == b'/' || (path[r] == b'.' && (r + 1 == n || path[r + 1] == b'/')) {
            // An empty element or `.`: skip it.
            r += 1;
        } else if path[r] == b'.' && path.get(r + 1) == Some(&b'.') && (r + 2 == n || path[r + 2] == b'/') {
            r += 2;
            if out.len() > dotdot {
                // Back up to the previous separator, never below `dotdot`.
                let mut w = out.len() - 1;
                while w > dotdot && out[w] != b'/' {
                    w -= 1;
                }
                out.truncate(w);
            } else if !rooted {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(b"..");
                dotdot = out.len();
            }
        } else {
            if (rooted && out.len() != 1) || (!rooted && !out.is_empty()) {
                out.push(b'/');
            }
            while r < n && path[r] != b'/' {
                out.push(path[r]);
                r += 1;
            }
        }
    }
    if out.is_empty() {
        return b".".to_vec();
    }
    out
}

/// Go's `filepath.Join`: the non-empty elements joined by `/`, cleaned;
/// `""` when every element is empty.
pub(crate) fn join(elems: &[&[u8]]) -> Vec<u8> {
    let mut joined: Vec<u8> = Vec::new();
    let mut any = false;
    for e in elems.iter().filter(|e| !e.is_empty()) {
        if any {
            joined.push(b'/');
        }
        joined.extend_from_slice(e);
        any = true;
    }
    if !any {
        return Vec::new();
    }
    clean(&joined)
}

/// The home directory a leading `~` stands for: `$HOME`, as Go's
/// `os.UserHomeDir` reads it on Unix (unset or empty: none, and `~` stays).
pub(crate) fn home_dir() -> Option<String> {
    std::env::var("HOME").ok().filter(|home| !home.is_empty())
}

/// The reference's `~` rule for paths in `files.*`, `git.*` and the spawn
/// `cwd`: a path that is exactly `~` or starts with `~/`
/// becomes `home` joined with the rest, cleaned lexically (`~/` → home,
/// `~//x` → home`/x`, `~/a/../b` → home`/b`). `~user/…`, a `~` anywhere
/// but first, and any path when there is no home are returned unchanged.
pub(crate) fn expand_home(path: &str, home: Option<&str>) -> String {
    let rest = match path.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => return path.to_string(),
    };
    let Some(home) = home else {
        return path.to_string();
    };
    let joined = join(&[home.as_bytes(), rest.as_bytes()]);
    // Both parts are UTF-8 and cleaning only drops whole ASCII elements.
    String::from_utf8(joined).unwrap_or_else(|_| path.to_string())
}

/// Go's `filepath.IsAbs` (Unix).
// Windows: its users (tarx, run lock) are not ported yet (issue 43).
#[cfg_attr(windows, allow(dead_code))]
pub(crate) fn is_abs(path: &[u8]) -> bool {
    path.first() == Some(&b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> String {
        String::from_utf8(clean(p.as_bytes())).unwrap()
    }

    #[test]
    fn clean_matches_go() {
        // Cases from Go's path/filepath tests.
        for (input, want) in [
            ("", "."),
            ("abc", "abc"),
            ("abc/def", "abc/def"),
            ("a/b/c", "a/b/c"),
            (".", "."),
            ("..", ".."),
            ("../..", "../.."),
            ("../../abc", "../../abc"),
            ("/abc", "/abc"),
            ("/", "/"),
            ("abc/", "abc"),
            ("abc/def/", "abc/def"),
            ("a/b/c/", "a/b/c"),
            ("./", "."),
            ("../", ".."),
            ("../../", "../.."),
            ("/abc/", "/abc"),
            ("abc//def//ghi", "abc/def/ghi"),
            ("//abc", "/abc"),
            ("///abc", "/abc"),
            ("//abc//", "/abc"),
            ("abc//", "abc"),
            ("abc/./def", "abc/def"),
            ("/./abc/def", "/abc/def"),
            ("abc/.", "abc"),
            ("abc/def/ghi/../jkl", "abc/def/jkl"),
            ("abc/def/../ghi/../jkl", "abc/jkl"),
            ("abc/def/..", "abc"),
            ("abc/def/../..", "."),
            ("/abc/def/../..", "/"),
            ("abc/def/../../..", ".."),
            ("/abc/def/../../..", "/"),
            ("abc/def/../../../ghi/jkl/../../../mno", "../../mno"),
            ("/../abc", "/abc"),
            ("abc/./../def", "def"),
            ("abc//./../def", "def"),
            ("abc/../../././../def", "../../def"),
        ] {
            assert_eq!(c(input), want, "clean({input:?})");
        }
    }

    #[test]
    fn a_leading_tilde_expands_to_home_cleaned() {
        let home = Some("/home/u");
        for (input, want) in [
            ("~", "/home/u"),
            ("~/", "/home/u"),
            ("~/f.txt", "/home/u/f.txt"),
            ("~//x", "/home/u/x"),
            ("~/a/../b", "/home/u/b"),
            ("~/..", "/home"),
            ("~/./x/", "/home/u/x"),
        ] {
            assert_eq!(expand_home(input, home), want, "{input:?}");
        }
        assert_eq!(
            expand_home("~", Some("/home/u/")),
            "/home/u",
            "home itself is cleaned too"
        );
    }

    #[test]
    fn other_tildes_and_no_home_leave_the_path_alone() {
        let home = Some("/home/u");
        for input in ["~user/f", "~user", "/a/~/b", "a~", "", "x/~", "$HOME/f", "~~/x"] {
            assert_eq!(expand_home(input, home), input, "{input:?}");
        }
        assert_eq!(expand_home("~/f", None), "~/f");
        assert_eq!(expand_home("~", None), "~");
    }

    #[test]
    fn join_matches_go() {
        let j = |a: &str, b: &str| String::from_utf8(join(&[a.as_bytes(), b.as_bytes()])).unwrap();
        assert_eq!(j("/dest", "/etc/passwd"), "/dest/etc/passwd");
        assert_eq!(j("/dest", "../x"), "/x");
        assert_eq!(j("/tmp/dest", "../dest/x"), "/tmp/dest/x");
        assert_eq!(j("", ""), "");
        assert_eq!(j("", "a"), "a");
        assert_eq!(j("a/", "b"), "a/b");
        assert_eq!(j("/a//b/", "c"), "/a/b/c");
    }
}
