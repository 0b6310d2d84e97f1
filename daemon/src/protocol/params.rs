//! The params structs, one per namespace, bound with Go's rules.
//!
//! Like the reference re-implementation, remora binds a request's params
//! into one struct per namespace. A field that belongs to the namespace but
//! is unused by the method still takes part in decoding, so a mistyped value
//! there is `-32602 Invalid params` (e.g. `files.stat {"maxBytes":"{"}`).
//! Keys in none of the namespace's fields are ignored.

use crate::base::gojson::StringMap;
use crate::base::gopath::{expand_home, home_dir};
use crate::go_struct;

/// Every params struct holding client paths: [`HomeExpansion::expand_home`]
/// applies the reference's leading-`~` rule ([`expand_home`], build
/// 5db5e4a) to exactly those fields, once, where the request is bound.
pub(crate) trait HomeExpansion: Sized {
    /// The params with each path field's leading `~` expanded to `home`.
    fn expand_home_with(self, home: Option<&str>) -> Self;

    /// [`Self::expand_home_with`] the daemon's `$HOME`.
    fn expand_home(self) -> Self {
        self.expand_home_with(home_dir().as_deref())
    }
}

go_struct! {
    /// Params of every `files.*` method.
    pub(crate) struct PathParams {
        pub path: String = "path",
        pub max_bytes: i64 = "maxBytes",
        pub archive_path: String = "archivePath",
        pub dest_dir: String = "destDir",
    }
}

go_struct! {
    /// Params of every `git.*` method.
    pub(crate) struct GitParams {
        pub path: String = "path",
        pub base_repo: String = "baseRepo",
        pub branch_name: String = "branchName",
        pub worktree_path: String = "worktreePath",
        pub source_branch: String = "sourceBranch",
        /// `git.worktree_create` deadline; 0 or less: none.
        pub timeout_ms: i64 = "timeoutMs",
        /// `git.worktree_create` attaches to this local branch.
        pub existing_branch: String = "existingBranch",
        /// `git.worktree_create`/`_remove`: the worktree lies outside the
        /// repository, at `<worktreeRoot>/<directory>/<name>`.
        pub worktree_root: String = "worktreeRoot",
    }
}

go_struct! {
    /// Params of every `process.*` method.
    pub(crate) struct ProcessParams {
        pub id: String = "id",
        pub command: String = "command",
        pub args: Vec<String> = "args",
        pub cwd: String = "cwd",
        pub env: StringMap = "env",
        pub want_pid: bool = "wantPid",
        /// `process.spawn` skips the SSH agent hand-off.
        pub disable_shell_agent_socket: bool = "disableShellAgentSocket",
        pub data: String = "data",
        /// `*uint64` in Go: absent and `null` both mean
        /// "append"; a negative offset is a type error.
        pub offset: Option<u64> = "offset",
        pub signal: String = "signal",
        pub timeout_ms: i64 = "timeoutMs",
        /// `*bool` in Go: absent means the default, `true`.
        pub escalate: Option<bool> = "escalate",
        /// `uint64` in Go: a negative value is a type error.
        pub from_seq: u64 = "fromSeq",
    }
}

/// The params `process.stdin` reads, borrowed: from a bound
/// [`ProcessParams`] ([`ProcessParams::stdin`]) on the full path, or
/// straight from the request line on the quick one
/// ([`crate::protocol::rpc::quick`]). Either way the same handler gives the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct StdinParams<'a> {
    pub id: &'a str,
    /// The base64 text, not yet decoded.
    pub data: &'a str,
    pub offset: Option<u64>,
}

impl ProcessParams {
    /// The fields `process.stdin` reads.
    pub(crate) fn stdin(&self) -> StdinParams<'_> {
        StdinParams {
            id: &self.id,
            data: &self.data,
            offset: self.offset,
        }
    }
}

impl HomeExpansion for PathParams {
    fn expand_home_with(mut self, home: Option<&str>) -> Self {
        for path in [&mut self.path, &mut self.archive_path, &mut self.dest_dir] {
            *path = expand_home(path, home);
        }
        self
    }
}

impl HomeExpansion for GitParams {
    fn expand_home_with(mut self, home: Option<&str>) -> Self {
        for path in [&mut self.path, &mut self.base_repo, &mut self.worktree_path] {
            *path = expand_home(path, home);
        }
        self
    }
}

impl HomeExpansion for ProcessParams {
    fn expand_home_with(mut self, home: Option<&str>) -> Self {
        self.cwd = expand_home(&self.cwd, home);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::parse;

    #[test]
    fn home_expansion_touches_path_fields_only() {
        let home = Some("/h");
        let files = PathParams {
            path: "~/a".into(),
            archive_path: "~".into(),
            dest_dir: "~/d/../e".into(),
            max_bytes: 3,
        }
        .expand_home_with(home);
        assert_eq!(
            (
                files.path.as_str(),
                files.archive_path.as_str(),
                files.dest_dir.as_str()
            ),
            ("/h/a", "/h", "/h/e")
        );
        let git = GitParams {
            path: "~/r".into(),
            base_repo: "~//b".into(),
            worktree_path: "~/w".into(),
            branch_name: "~/n".into(),
            source_branch: "~".into(),
            existing_branch: "~/e".into(),
            timeout_ms: 0,
            worktree_root: String::new(),
        }
        .expand_home_with(home);
        assert_eq!(
            (git.path.as_str(), git.base_repo.as_str(), git.worktree_path.as_str()),
            ("/h/r", "/h/b", "/h/w")
        );
        assert_eq!(
            (git.branch_name.as_str(), git.source_branch.as_str()),
            ("~/n", "~"),
            "branch names are not paths"
        );
        let process = ProcessParams {
            cwd: "~/c".into(),
            command: "~/bin/x".into(),
            args: vec!["~/arg".into()],
            ..ProcessParams::default()
        }
        .expand_home_with(home);
        assert_eq!(process.cwd, "/h/c");
        assert_eq!(
            (process.command.as_str(), process.args[0].as_str()),
            ("~/bin/x", "~/arg"),
            "only cwd is a path"
        );
    }

    #[test]
    fn namespace_binding_rejects_mistyped_sibling_fields() {
        let v = parse(br#"{"path":"/x","maxBytes":"{"}"#).unwrap();
        assert!(PathParams::from_go_value(&v).is_err());
        let v = parse(br#"{"path":"/x","baseRepo":[1,2]}"#).unwrap();
        assert!(GitParams::from_go_value(&v).is_err());
        let v = parse(br#"{"path":"/x","fromSeq":"1","bogus":{}}"#).unwrap();
        assert!(PathParams::from_go_value(&v).is_ok(), "fromSeq is not a files field");
        let v = parse(br#"{"id":"a","escalate":false,"offset":null,"env":{"K":"V"}}"#).unwrap();
        let p = ProcessParams::from_go_value(&v).unwrap();
        assert_eq!((p.id.as_str(), p.escalate, p.offset), ("a", Some(false), None));
        assert_eq!(p.env.0, vec![("K".to_string(), "V".to_string())]);
    }
}
