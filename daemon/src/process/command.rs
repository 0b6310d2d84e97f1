//! Building a child's command the way Go's `os/exec` does: the merged
//! environment, `exec.LookPath` for bare names, and Go's error texts for
//! everything that can fail before the child runs.
//!
//! The reference builds `exec.Command(command, args...)` with `Dir = cwd`,
//! `Env = daemon env + params env` and `SysProcAttr{Setpgid: true}`. So:
//!
//! * on Windows the lookup is Go's Windows one (`PATHEXT`, the current
//!   directory, `%PATH%` in the error): [`super::lookpath`]; what follows
//!   is the Unix rule;
//! * a name without `/` is looked up in `PATH`; failure is
//!   `exec: "<name>": executable file not found in $PATH` (the name quoted
//!   with Go's `strconv.Quote`), and a hit in a relative `PATH` entry is
//!   Go's `ErrDot` (`... cannot run executable found relative to current
//!   directory`). remora looks up in the *child's* PATH (the merged env),
//!   which is also what the client means when it overrides `env.PATH`;
//! * a non-empty `cwd` is checked with `stat` (following links) before the
//!   command is looked up (since reference build `5db5e4a`; earlier builds
//!   let the child fail `chdir` and answered `fork/exec <cmd>: …`): a stat failure
//!   is `chdir <dir>: stat <dir>: <errno text>`, and anything but a
//!   directory is `chdir <dir>: not a directory` ([`check_cwd`]);
//! * anything that fails in fork/exec is `fork/exec <path>: <errno text>`,
//!   `<path>` being the resolved path (or the command as given when it
//!   contains a `/`). A `cwd` that stops being a directory between the
//!   check and the fork still ends up here.
//! * an environment entry holding a NUL is refused before the fork with
//!   `exec: environment variable contains NUL` (Go 1.20+ `dedupEnv`);
//! * a request's `env` key holding `=` is taken as Go takes it
//!   ([`go_entry`]): the entry is `key=value`, and Go's `dedupEnv` reads
//!   the variable's name up to its first `=`, so `{"A=B":"1"}` sets `A` to
//!   `B=1`, replacing any `A` before it. remora merges by that same name,
//!   so its own view of the child's environment (the `PATH` it looks the
//!   command up in, whether an agent socket is set) is the child's.

use std::ffi::OsString;
use std::path::Path;

/// Go's `exec.ErrNotFound` text.
const NOT_FOUND: &str = "executable file not found in $PATH";
/// Go's `exec.ErrDot` text.
const ERR_DOT: &str = "cannot run executable found relative to current directory";
/// Go's `os/exec` error for an environment entry holding a NUL byte.
pub(crate) const ENV_NUL: &str = "exec: environment variable contains NUL";

/// The child's environment: the daemon's own, then PATH from the login
/// shell when it is known, then the request's `env` (later entries win,
/// so an explicit `env.PATH` beats the login PATH).
pub(crate) fn merged_env(login_path: Option<&str>, overrides: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    // Go's `dedupEnv`: a later entry of the same name (case-insensitive
    // on Windows) replaces the earlier one in its place, name and value.
    let mut set =
        |key: OsString, value: OsString| match env.iter_mut().find(|(k, _)| crate::sys::os::env_names_equal(k, &key)) {
            Some(entry) => *entry = (key, value),
            None => env.push((key, value)),
        };
    if let Some(path) = login_path {
        set("PATH".into(), path.into());
    }
    for (k, v) in overrides {
        set(k.into(), v.into());
    }
    env
}

/// A request's `env` entry as the child gets it: the name Go's
/// `dedupEnv` reads in `key=value` (up to the first `=`; a leading `=` is
/// part of the name), and the rest as the value. A key without `=` is
/// unchanged. (Audit D15: remora passed `{"A=B":"1"}` on as a variable of
/// its own next to the daemon's `A`, so the child saw two.)
pub(crate) fn go_entry(key: &str, value: &str) -> (String, String) {
    let Some(eq) = key.find('=') else {
        return (key.to_string(), value.to_string());
    };
    let entry = format!("{key}={value}");
    // Go: `i := strings.Index(kv, "=")`; at 0, the next `=` after it.
    let at = if eq == 0 {
        entry[1..].find('=').map_or(0, |i| i + 1)
    } else {
        eq
    };
    let value = entry.get(at + 1..).unwrap_or_default().to_string();
    let mut name = entry;
    name.truncate(at);
    (name, value)
}

/// The value of `name` in `env` (names compared as the OS does), or
/// `None` if unset.
fn env_value<'e>(env: &'e [(OsString, OsString)], name: &str) -> Option<&'e OsString> {
    env.iter()
        .rev()
        .find(|(k, _)| crate::sys::os::env_names_equal(k, name.as_ref()))
        .map(|(_, v)| v)
}

/// The value of `PATH` in `env`, empty if unset.
pub(crate) fn path_of(env: &[(OsString, OsString)]) -> OsString {
    env_value(env, "PATH").cloned().unwrap_or_default()
}

/// Resolves `command` like `exec.Command` with `Dir = cwd`, in the
/// child's environment `env`, by the host's rule: on Unix names
/// containing `/` are used as given and bare names go through
/// [`look_path`]; on Windows, [`super::lookpath`]. The error is the full
/// wire message.
pub(crate) fn resolve(command: &str, env: &[(OsString, OsString)], cwd: &str) -> Result<String, String> {
    match crate::sys::os::HOST {
        crate::sys::Host::Unix => resolve_unix(command, &path_of(env)),
        crate::sys::Host::Windows => {
            let text = |name| env_value(env, name).map(|v| v.to_string_lossy());
            let (path, pathext) = (text("PATH").unwrap_or_default(), text("PATHEXT").unwrap_or_default());
            let look = super::lookpath::LookEnv {
                path: &path,
                pathext: &pathext,
                no_dot: env_value(env, "NoDefaultCurrentDirectoryInExePath").is_some(),
            };
            super::lookpath::resolve(command, cwd, &look, &HostFiles)
        }
    }
}

/// The host's files, as the Windows rule asks about them.
struct HostFiles;

impl super::lookpath::Files for HostFiles {
    fn stat(&self, path: &str) -> Result<bool, String> {
        std::fs::metadata(path)
            .map(|m| !m.is_dir())
            .map_err(|e| crate::base::goerr::path_error("CreateFile", path, &e))
    }

    fn same_file(&self, a: &str, b: &str) -> bool {
        let id = |p: &str| crate::sys::os::path_identity(Path::new(p));
        id(a).is_some_and(|a| Some(a) == id(b))
    }
}

/// The Unix half of [`resolve`].
fn resolve_unix(command: &str, path_var: &OsString) -> Result<String, String> {
    if command.contains(crate::sys::os::PATH_SEPARATORS) {
        return Ok(command.to_string());
    }
    look_path(command, path_var)
        .map_err(|why| format!("exec: {}: {}", crate::base::goerr::go_quote(command.as_bytes()), why))
}

/// Go's `exec.LookPath` for a name without `/`: each `PATH` entry in order
/// (an empty entry means `.`), the first executable regular file wins.
fn look_path(file: &str, path_var: &OsString) -> Result<String, &'static str> {
    if path_var.is_empty() {
        // filepath.SplitList("") is an empty list.
        return Err(NOT_FOUND);
    }
    for dir in path_var
        .as_encoded_bytes()
        .split(|&b| b == crate::sys::os::PATH_LIST_SEPARATOR)
    {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let mut candidate = dir.to_vec();
        if !candidate.ends_with(b"/") {
            candidate.push(b'/');
        }
        candidate.extend_from_slice(file.as_bytes());
        let candidate = String::from_utf8_lossy(&candidate).into_owned();
        if is_executable(Path::new(&candidate)) {
            if !Path::new(&candidate).is_absolute() {
                return Err(ERR_DOT);
            }
            return Ok(candidate);
        }
    }
    Err(NOT_FOUND)
}

/// Go's `findExecutable`: exists, is not a directory, and passes
/// `eaccess(X_OK)`.
fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.is_dir() {
        return false;
    }
    crate::sys::os::may_execute(path).is_ok()
}

/// Whether exec could run `path`, as `execve` would judge it: the error it
/// would give for a missing path, a directory or other non-regular file
/// (`EACCES`), or a file without execute permission. For a command run
/// through a managed launcher, which the daemon does not exec itself.
pub(crate) fn exec_check(path: &str) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::from_raw_os_error(libc::EACCES));
    }
    crate::sys::os::may_execute(Path::new(path))
}

/// The reference's check of a spawn's working directory (see the module
/// doc). An empty `cwd` means the daemon's own and is not checked.
pub(crate) fn check_cwd(cwd: &str) -> Result<(), String> {
    if cwd.is_empty() {
        return Ok(());
    }
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("chdir {cwd}: not a directory")),
        Err(e) => Err(format!(
            "chdir {cwd}: {}",
            crate::base::goerr::path_error("stat", cwd, &e)
        )),
    }
}

/// The wire message for a failed fork/exec of `path`.
pub(crate) fn fork_exec_error(path: &str, err: &std::io::Error) -> String {
    format!("fork/exec {path}: {}", crate::base::goerr::io_text(err))
}

/// Words the wire message of a failed exec of `program`.
pub(crate) type ExecError = fn(&str, &std::io::Error) -> String;

/// What `process.spawn` asks for.
#[derive(Clone, Copy)]
pub(crate) struct SpawnSpec<'a> {
    pub id: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: &'a str,
    pub env: &'a [(String, String)],
    /// Skip the SSH agent hand-off ([`crate::agent::agentsock`]).
    pub no_agent_socket: bool,
    /// Run the command through this managed launcher (build 89cb6289's
    /// `launcher` param, already checked by the handler): the child is
    /// `<launcher...> <command> <args...>`.
    pub launcher: Option<Launcher<'a>>,
    /// Variables the child never gets, whoever set them (the daemon's
    /// environment or the request's `env`): the handler names them.
    pub strip_env: &'a [&'a str],
}

/// A managed launcher to run the command through, as the handler checked
/// it: its program, its own arguments, and how a failed start is worded.
#[derive(Clone, Copy)]
pub(crate) struct Launcher<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    /// The -32005 message for a launcher that did not start.
    pub not_started: ExecError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        assert_eq!(crate::base::goerr::go_quote(b"nonexistent-cmd"), "\"nonexistent-cmd\"");
        assert_eq!(
            crate::base::goerr::go_quote("a\"b\\c\n\u{1}é\u{a0}".as_bytes()),
            "\"a\\\"b\\\\c\\n\\x01é\\u00a0\""
        );
    }

    #[cfg(unix)]
    #[test]
    fn lookup_follows_go() {
        let path: OsString = "/nonexistent-dir:/bin:/usr/bin".into();
        let sh = resolve_unix("sh", &path).unwrap();
        assert!(sh == "/bin/sh" || sh == "/usr/bin/sh", "{sh}");
        assert_eq!(
            resolve_unix("nonexistent-cmd", &path).unwrap_err(),
            "exec: \"nonexistent-cmd\": executable file not found in $PATH"
        );
        assert_eq!(
            resolve_unix("sh", &OsString::new()).unwrap_err(),
            "exec: \"sh\": executable file not found in $PATH"
        );
        // A directory is not an executable.
        assert!(resolve_unix("bin", &"/".into()).is_err());
        // A slash means no lookup at all.
        assert_eq!(resolve_unix("./x/y", &path).unwrap(), "./x/y");
    }

    #[cfg(unix)] // sets an execute bit
    #[test]
    fn relative_path_entries_are_err_dot() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let mut perms = std::fs::metadata(&tool).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&tool, perms).unwrap();
        let abs: OsString = dir.path().as_os_str().to_owned();
        assert_eq!(resolve_unix("tool", &abs).unwrap(), tool.to_string_lossy());
        // Relative to the test's cwd: make a relative entry that exists.
        let cwd = std::env::current_dir().unwrap();
        if let Ok(rel) = dir.path().strip_prefix(&cwd) {
            let rel: OsString = rel.as_os_str().to_owned();
            assert_eq!(
                resolve_unix("tool", &rel).unwrap_err(),
                "exec: \"tool\": cannot run executable found relative to current directory"
            );
        }
    }

    /// Go's Windows lookup on real files (under Wine in CI): `PATHEXT`
    /// finds `tool.exe` for `tool`, `Path` is `PATH`, the error says
    /// `%PATH%`.
    #[cfg(windows)]
    #[test]
    fn windows_lookup_finds_pathext_files_in_the_child_s_path() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool.exe");
        std::fs::write(&tool, b"MZ").unwrap();
        std::fs::create_dir(dir.path().join("sub.exe")).unwrap();
        let env = |path: &std::path::Path, ext: &str| -> Vec<(OsString, OsString)> {
            vec![
                ("Path".into(), path.as_os_str().to_owned()),
                ("PATHEXT".into(), ext.into()),
                ("NoDefaultCurrentDirectoryInExePath".into(), "".into()),
            ]
        };
        let found = resolve("tool", &env(dir.path(), ".COM;.EXE"), "").unwrap();
        assert!(found.eq_ignore_ascii_case(&tool.to_string_lossy()), "{found}");
        assert_eq!(
            resolve("tool", &env(dir.path(), ".BAT"), "").unwrap_err(),
            "exec: \"tool\": executable file not found in %PATH%"
        );
        // A directory named like a program is not one.
        assert!(resolve("sub", &env(dir.path(), ".EXE"), "").is_err());
        // A relative name is found under the working directory.
        let found = resolve(
            r"..\tool",
            &env(dir.path(), ".EXE"),
            &dir.path().join("sub.exe").to_string_lossy(),
        );
        assert!(found.unwrap().to_ascii_lowercase().ends_with(r"sub.exe\..\tool.exe"));
    }

    #[test]
    fn windows_env_names_merge_without_case_on_windows_only() {
        let env = merged_env(
            None,
            &[
                ("REMORA_T_CASE".into(), "1".into()),
                ("remora_t_case".into(), "2".into()),
            ],
        );
        let n = env
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("REMORA_T_CASE"))
            .count();
        assert_eq!(n, if cfg!(windows) { 1 } else { 2 });
    }

    #[test]
    fn keys_holding_an_equals_sign_are_split_as_go_reads_them() {
        let pair = |k: &str, v: &str| go_entry(k, v);
        assert_eq!(pair("A", "1"), ("A".into(), "1".into()));
        assert_eq!(pair("A=B", "1"), ("A".into(), "B=1".into()));
        assert_eq!(pair("A==", ""), ("A".into(), "==".into()));
        assert_eq!(pair("=X=Y", "1"), ("=X".into(), "Y=1".into()));
        assert_eq!(pair("=X", "1"), ("=X".into(), "1".into()));
        assert_eq!(pair("", "v"), ("".into(), "v".into()));
        let env = merged_env(None, &[go_entry("PATH=/mine", "x")]);
        assert_eq!(path_of(&env), OsString::from("/mine=x"));
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
    }

    #[test]
    fn env_merge_order_and_precedence() {
        let env = merged_env(Some("/login/bin"), &[("REMORA_T_X".into(), "1".into())]);
        assert_eq!(path_of(&env), OsString::from("/login/bin"));
        let env = merged_env(
            Some("/login/bin"),
            &[("PATH".into(), "/mine".into()), ("REMORA_T_X".into(), "2".into())],
        );
        assert_eq!(path_of(&env), OsString::from("/mine"));
        assert_eq!(env.iter().filter(|(k, _)| k == "REMORA_T_X").count(), 1);
    }
}
