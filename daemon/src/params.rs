//! The params structs, one per namespace, bound with Go's rules.
//!
//! Like the reference re-implementation, remora binds a request's params
//! into one struct per namespace. A field that belongs to the namespace but
//! is unused by the method still takes part in decoding, so a mistyped value
//! there is `-32602 Invalid params` (e.g. `files.stat {"maxBytes":"{"}`).
//! Keys in none of the namespace's fields are ignored.

use crate::go_struct;
use crate::gojson::StringMap;

go_struct! {
    /// Params of every `files.*` method.
    pub struct PathParams {
        pub path: String = "path",
        pub max_bytes: i64 = "maxBytes",
        pub archive_path: String = "archivePath",
        pub dest_dir: String = "destDir",
    }
}

go_struct! {
    /// Params of every `git.*` method.
    pub struct GitParams {
        pub path: String = "path",
        pub base_repo: String = "baseRepo",
        pub branch_name: String = "branchName",
        pub worktree_path: String = "worktreePath",
        pub source_branch: String = "sourceBranch",
        /// `git.worktree_create` deadline (build 4534d86); 0 or less: none.
        pub timeout_ms: i64 = "timeoutMs",
        /// `git.worktree_create` attaches to this local branch (build 19f30c46).
        pub existing_branch: String = "existingBranch",
    }
}

go_struct! {
    /// Params of every `process.*` method.
    pub struct ProcessParams {
        pub id: String = "id",
        pub command: String = "command",
        pub args: Vec<String> = "args",
        pub cwd: String = "cwd",
        pub env: StringMap = "env",
        pub want_pid: bool = "wantPid",
        pub data: String = "data",
        /// `*int64` in Go: absent and `null` both mean "append".
        pub offset: Option<i64> = "offset",
        pub signal: String = "signal",
        pub timeout_ms: i64 = "timeoutMs",
        /// `*bool` in Go: absent means the default, `true`.
        pub escalate: Option<bool> = "escalate",
        pub from_seq: i64 = "fromSeq",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gojson::parse;

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
