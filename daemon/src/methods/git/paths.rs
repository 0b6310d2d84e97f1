//! Lexical path rules the `git.*` methods judge request paths by, with
//! Go's `path/filepath` meaning (the reference's texts and verdicts follow
//! it): `Clean`, "has a `..` component", "strictly below".

/// Go's `filepath.Clean`: one separator between names, no `.` names, a
/// `..` removes the name before it (at the root it is dropped), no
/// trailing separator; an empty result is `.`.
pub(super) fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut names: Vec<&str> = Vec::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => {
                if names.last().is_some_and(|last| *last != "..") {
                    names.pop();
                } else if !rooted {
                    names.push("..");
                }
            }
            name => names.push(name),
        }
    }
    let joined = names.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Whether any `/`-separated name of the path as sent is exactly `..`.
pub(super) fn has_dotdot(path: &str) -> bool {
    path.split('/').any(|name| name == "..")
}

/// The names of `path` below `root` when `path`, cleaned, lies strictly
/// below `root`, cleaned (both absolute); `None` otherwise (equal paths
/// included: the root itself is not inside).
pub(super) fn names_below(path: &str, root: &str) -> Option<Vec<String>> {
    if !path.starts_with('/') || !root.starts_with('/') {
        return None;
    }
    let (path, root) = (clean(path), clean(root));
    let rest = if root == "/" {
        path.strip_prefix('/')?
    } else {
        path.strip_prefix(&root)?.strip_prefix('/')?
    };
    if rest.is_empty() {
        return None;
    }
    Some(rest.split('/').map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_matches_go() {
        for (raw, want) in [
            ("", "."),
            ("/", "/"),
            ("//a//b/", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("/a/b/../c", "/a/c"),
            ("/../a", "/a"),
            ("a/../..", ".."),
            ("a/b/../../..", ".."),
            ("./a", "a"),
        ] {
            assert_eq!(clean(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn strictly_below() {
        assert_eq!(
            names_below("/r/.claude/worktrees/w", "/r"),
            Some(vec![".claude".into(), "worktrees".into(), "w".into()])
        );
        assert_eq!(names_below("/r//w/", "/r/"), Some(vec!["w".into()]));
        assert_eq!(names_below("/r", "/r"), None);
        assert_eq!(names_below("/r/", "/r"), None);
        assert_eq!(names_below("/rx/w", "/r"), None);
        assert_eq!(names_below("/r/w", "r"), None);
        assert_eq!(names_below("/r/w", ""), None);
        assert_eq!(names_below("/w", "/"), Some(vec!["w".into()]));
        assert!(has_dotdot("/r/a/../b") && !has_dotdot("/r/a..b/.../c"));
    }
}
