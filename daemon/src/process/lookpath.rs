//! Go's Windows rule for finding the program of `exec.Command(name)` then
//! `Cmd.Start` (Go 1.22+, `os/exec/lp_windows.go` and `exec.go`), as pure
//! functions over a file check, so every OS's tests run it; the Unix rule
//! is [`super::command`]'s `look_path`. [`super::command::resolve`] picks
//! the rule by `sys::os::HOST`.
//!
//! What Go does on Windows, and so what [`resolve`] does:
//!
//! * **Extensions** ([`path_ext`]): `PATHEXT` lowercased, split on `;`,
//!   empty items dropped, a `.` put before an item without one; unset or
//!   empty means `.com;.exe;.bat;.cmd`.
//! * **A file check** (Go's `findExecutable`): the name itself only when it
//!   already has an extension (a `.` after its last `\`, `/` or `:`, any
//!   extension, not only a `PATHEXT` one: `hasExt`), then the name with
//!   each extension appended, in order; "there" means `os.Stat` succeeds
//!   on something that is not a directory (Windows has no execute bit).
//!   With no extensions at all (a `PATHEXT` of only `;`) the name alone is
//!   checked. Failing, the error is `file does not exist` for a name with
//!   an extension, else `executable file not found in %PATH%`.
//! * **A name holding `\`, `/` or `:`** is not looked up in `PATH`: an
//!   absolute one (`C:\x`, `\\server\share\x`) gets the file check as it
//!   is; a relative one (`sub\x`, `\x`, `/x`, `C:x`) too, except that a
//!   name relative to a non-empty `cwd` (not starting with a separator,
//!   no drive) is checked as `cwd\name` (`lookExtensions`), and that
//!   joined name is the one the error quotes. A name whose extension is
//!   already in `PATHEXT` is taken as it is, unchecked (the start then
//!   fails with `fork/exec`).
//! * **A bare name** first tries the current directory (`.\name`), unless
//!   `NoDefaultCurrentDirectoryInExePath` is set (to anything, even
//!   empty). A hit there is not used: with `GODEBUG=execerrdot=1`, the
//!   default since Go 1.19, it is `ErrDot` (`cannot run executable found
//!   relative to current directory`), unless a `PATH` entry later finds
//!   the very same file (same volume and file index), whose absolute name
//!   then wins (go.dev/issue/53536); a `PATH` hit of another file returns
//!   the `ErrDot`. Then each `PATH` entry in order (Go's Windows
//!   `filepath.SplitList`: split on `;` outside double quotes, the quotes
//!   then removed), empty entries skipped (unlike Unix, where one means
//!   `.`). A hit under a relative entry is `ErrDot` as well, remembered
//!   while the search goes on as for the current directory. Nothing found
//!   is `exec: "<name>": executable file not found in %PATH%`: Go's
//!   Windows `ErrNotFound` says `%PATH%` where the Unix one says `$PATH`.
//!
//! As on Unix, remora reads `PATH`, `PATHEXT` and
//! `NoDefaultCurrentDirectoryInExePath` in the child's environment (the
//! merged one), where Go reads the daemon's own: the same unless the
//! request overrides them, and then the child's is what the client means.
//! Names join as Go's `filepath.Join` does for the usual entries (one `\`
//! between, `/` turned into `\`); `.` and `..` components inside an entry
//! are left as they are (Windows resolves them the same; only the text of
//! a `fork/exec` error could differ).

/// Go's Windows `exec.ErrNotFound` text.
pub(crate) const NOT_FOUND: &str = "executable file not found in %PATH%";
/// Go's `exec.ErrDot` text.
const ERR_DOT: &str = "cannot run executable found relative to current directory";
/// Go's `fs.ErrNotExist` text.
const NOT_EXIST: &str = "file does not exist";
/// Go's `fs.ErrPermission` text.
const PERMISSION: &str = "permission denied";
/// Go's default extensions when `PATHEXT` is unset or empty.
const DEFAULT_EXTS: [&str; 4] = [".com", ".exe", ".bat", ".cmd"];

/// What the Windows rule asks of the file system.
pub(crate) trait Files {
    /// `os.Stat(path)`: `Ok(true)` for a file, `Ok(false)` for a
    /// directory, the OS's error text (`CreateFile <path>: …`) otherwise.
    fn stat(&self, path: &str) -> Result<bool, String>;
    /// Whether two names are the same file (`os.SameFile` of `Lstat`s).
    fn same_file(&self, a: &str, b: &str) -> bool;
}

/// The variables the Windows rule reads, from the child's environment.
#[derive(Default, Clone, Copy)]
pub(crate) struct LookEnv<'a> {
    pub path: &'a str,
    pub pathext: &'a str,
    /// Whether `NoDefaultCurrentDirectoryInExePath` is set at all.
    pub no_dot: bool,
}

/// Go's `pathExt`: the extensions `PATHEXT` lists (see the module doc).
pub(crate) fn path_ext(pathext: &str) -> Vec<String> {
    if pathext.is_empty() {
        return DEFAULT_EXTS.iter().map(|e| e.to_string()).collect();
    }
    pathext
        .to_lowercase()
        .split(';')
        .filter(|e| !e.is_empty())
        .map(|e| {
            if e.starts_with('.') {
                e.to_string()
            } else {
                format!(".{e}")
            }
        })
        .collect()
}

/// Go's Windows `filepath.SplitList`: `;` outside double quotes separates,
/// then the quotes go. An empty string is an empty list.
pub(crate) fn split_list(path: &str) -> Vec<String> {
    if path.is_empty() {
        return Vec::new();
    }
    let mut list = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in path.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => {
                list.push(path[start..i].replace('"', ""));
                start = i + 1;
            }
            _ => {}
        }
    }
    list.push(path[start..].replace('"', ""));
    list
}

fn is_sep(c: char) -> bool {
    c == '\\' || c == '/'
}

/// Go's `hasExt`: a `.` after the last `:`, `\` or `/`.
fn has_ext(file: &str) -> bool {
    match file.rfind('.') {
        Some(dot) => file.rfind([':', '\\', '/']).is_none_or(|s| s < dot),
        None => false,
    }
}

/// The drive or UNC volume at the start of `path` (Go's `VolumeName`,
/// for `X:` and `\\server\share`), by its length.
fn volume_len(path: &str) -> usize {
    let b = path.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return 2;
    }
    if b.len() >= 3 && is_sep(b[0] as char) && is_sep(b[1] as char) && !is_sep(b[2] as char) {
        // \\server\share: up to the separator after the share.
        let rest = &path[2..];
        if let Some(server_end) = rest.find(is_sep) {
            let share = &rest[server_end + 1..];
            let share_end = share.find(is_sep).unwrap_or(share.len());
            if share_end > 0 {
                return 2 + server_end + 1 + share_end;
            }
        }
    }
    0
}

/// Go's Windows `filepath.IsAbs`: a volume, then a separator (or a UNC
/// volume alone).
pub(crate) fn is_abs(path: &str) -> bool {
    let v = volume_len(path);
    if v == 0 {
        return false;
    }
    if v > 2 {
        return true;
    }
    path[v..].starts_with(is_sep)
}

/// `filepath.Join(dir, file)` for the entries a lookup meets (module doc).
fn join(dir: &str, file: &str) -> String {
    let file = file.replace('/', "\\");
    if dir.is_empty() || dir == "." {
        return file;
    }
    let dir = dir.replace('/', "\\");
    let trimmed = dir.trim_end_matches('\\');
    if trimmed.len() < dir.len() {
        // One separator, however many the entry ends with.
        format!("{trimmed}\\{file}")
    } else if volume_len(&dir) == dir.len() && dir.len() == 2 {
        // `C:` joins as `C:x`, relative to that drive's directory.
        format!("{dir}{file}")
    } else {
        format!("{dir}\\{file}")
    }
}

/// The names Go's `findExecutable` tries for `file`, in order.
pub(crate) fn candidates(file: &str, exts: &[String]) -> Vec<String> {
    if exts.is_empty() {
        return vec![file.to_string()];
    }
    let mut out = Vec::with_capacity(exts.len() + 1);
    if has_ext(file) {
        out.push(file.to_string());
    }
    out.extend(exts.iter().map(|e| format!("{file}{e}")));
    out
}

/// Go's `findExecutable`: the first candidate that is a file, or the
/// error text Go gives.
fn find_executable(file: &str, exts: &[String], fs: &dyn Files) -> Result<String, String> {
    if exts.is_empty() {
        return match fs.stat(file) {
            Ok(true) => Ok(file.to_string()),
            Ok(false) => Err(PERMISSION.to_string()),
            Err(e) => Err(e),
        };
    }
    for c in candidates(file, exts) {
        if fs.stat(&c) == Ok(true) {
            return Ok(c);
        }
    }
    Err(if has_ext(file) { NOT_EXIST } else { NOT_FOUND }.to_string())
}

/// Go's `exec.Error` text: `exec: "<name>": <why>`.
fn exec_error(name: &str, why: &str) -> String {
    format!("exec: {}: {why}", crate::base::goerr::go_quote(name.as_bytes()))
}

/// Go's Windows `lookPath` for `file` (module doc): the program found, or
/// the full `exec.Error` text.
fn look_path(file: &str, exts: &[String], env: &LookEnv<'_>, fs: &dyn Files) -> Result<String, String> {
    if file.contains([':', '\\', '/']) {
        return find_executable(file, exts, fs).map_err(|why| exec_error(file, &why));
    }
    let mut dot: Option<String> = None;
    if !env.no_dot {
        if let Ok(f) = find_executable(&join(".", file), exts, fs) {
            dot = Some(f);
        }
    }
    for dir in split_list(env.path) {
        if dir.is_empty() {
            continue;
        }
        let Ok(f) = find_executable(&join(&dir, file), exts, fs) else {
            continue;
        };
        if let Some(d) = &dot {
            if !fs.same_file(d, &f) {
                return Err(exec_error(file, ERR_DOT));
            }
        }
        if !is_abs(&f) {
            dot.get_or_insert(f);
            continue;
        }
        return Ok(f);
    }
    match dot {
        Some(_) => Err(exec_error(file, ERR_DOT)),
        None => Err(exec_error(file, NOT_FOUND)),
    }
}

/// The program `exec.Command(command)` with `Dir = cwd` starts on
/// Windows, or the wire message of why none (module doc). A relative
/// name found under `cwd` comes back joined to it: `CreateProcessW` would
/// resolve a relative program against the daemon's directory, where Go's
/// `syscall.StartProcess` joins it to `Dir` first.
pub(crate) fn resolve(command: &str, cwd: &str, env: &LookEnv<'_>, fs: &dyn Files) -> Result<String, String> {
    let exts = path_ext(env.pathext);
    if volume_len(command) == 0 && !command.contains(is_sep) {
        // `filepath.Base(name) == name`: exec.Command's LookPath.
        return look_path(command, &exts, env, fs);
    }
    // Cmd.Start's lookExtensions (exec.Command's, for an absolute name): a
    // name whose extension (`filepath.Ext`) is one of PATHEXT's is taken
    // as it is.
    let last = command.rfind(is_sep).map_or(command, |i| &command[i + 1..]);
    if let Some(dot) = last.rfind('.') {
        if exts.contains(&last[dot..].to_lowercase()) {
            return Ok(command.to_string());
        }
    }
    let relative_to_cwd = !cwd.is_empty() && volume_len(command) == 0 && !command.starts_with(is_sep);
    if !relative_to_cwd {
        return look_path(command, &exts, env, fs);
    }
    look_path(&join(cwd, command), &exts, env, fs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A file system of names: `true` a file, `false` a directory; a file
    /// listed under two names is one file when `same` pairs them.
    #[derive(Default)]
    struct Fake {
        names: HashMap<String, bool>,
        same: Vec<(String, String)>,
    }

    impl Fake {
        fn with(files: &[&str]) -> Fake {
            Fake {
                names: files.iter().map(|f| (f.to_string(), true)).collect(),
                ..Fake::default()
            }
        }
    }

    impl Files for Fake {
        fn stat(&self, path: &str) -> Result<bool, String> {
            // Windows names are case-insensitive.
            self.names
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(path))
                .map(|(_, f)| *f)
                .ok_or_else(|| format!("CreateFile {path}: The system cannot find the file specified."))
        }
        fn same_file(&self, a: &str, b: &str) -> bool {
            a.eq_ignore_ascii_case(b) || self.same.iter().any(|(x, y)| (x == a && y == b) || (x == b && y == a))
        }
    }

    fn env(path: &str) -> LookEnv<'_> {
        LookEnv {
            path,
            ..LookEnv::default()
        }
    }

    #[test]
    fn pathext_is_lowercased_split_and_dotted_with_go_s_default() {
        assert_eq!(path_ext(""), [".com", ".exe", ".bat", ".cmd"]);
        assert_eq!(path_ext(".COM;.EXE;;bat;.Ps1"), [".com", ".exe", ".bat", ".ps1"]);
        assert!(path_ext(";;").is_empty());
    }

    #[test]
    fn path_lists_split_on_semicolons_outside_quotes() {
        assert!(split_list("").is_empty());
        assert_eq!(split_list(r"C:\a;;D:\b"), [r"C:\a", "", r"D:\b"]);
        assert_eq!(split_list(r#""C:\x;y";C:\z"#), [r"C:\x;y", r"C:\z"]);
        assert_eq!(split_list(r#"a"b"c;"#), ["abc", ""]);
    }

    #[test]
    fn candidates_try_the_name_only_when_it_has_an_extension() {
        let exts = path_ext("");
        assert_eq!(
            candidates("sleep", &exts),
            ["sleep.com", "sleep.exe", "sleep.bat", "sleep.cmd"]
        );
        assert_eq!(
            candidates(r"C:\t\run.me", &exts[..2]),
            [r"C:\t\run.me", r"C:\t\run.me.com", r"C:\t\run.me.exe"]
        );
        // A dot before the last separator is no extension.
        assert_eq!(candidates(r"a.d\x", &exts[..1]), [r"a.d\x.com"]);
        assert_eq!(candidates("x", &[]), ["x"]);
    }

    #[test]
    fn absolute_paths_and_joins_follow_go() {
        for abs in [r"C:\x", "c:/x", r"\\srv\share", r"\\srv\share\x"] {
            assert!(is_abs(abs), "{abs}");
        }
        for rel in ["C:x", r"\x", "/x", "x", "C:", ""] {
            assert!(!is_abs(rel), "{rel}");
        }
        assert_eq!(join(".", "x"), "x");
        assert_eq!(join(r"C:\bin", "x"), r"C:\bin\x");
        assert_eq!(join(r"C:\bin\\", "x"), r"C:\bin\x");
        assert_eq!(join("C:/bin/", "x"), r"C:\bin\x");
        assert_eq!(join("C:", "x"), "C:x");
        assert_eq!(join(r"C:\", "x"), r"C:\x");
    }

    #[test]
    fn a_bare_name_is_found_in_path_with_an_extension() {
        let fs = Fake::with(&[r"C:\tools\sleep.exe", r"C:\tools\sleep.bat", r"D:\b\head.EXE"]);
        let path = r"C:\none;;C:\tools;D:\b";
        assert_eq!(resolve("sleep", "", &env(path), &fs).unwrap(), r"C:\tools\sleep.exe");
        assert_eq!(resolve("head", "", &env(path), &fs).unwrap(), r"D:\b\head.exe");
        // PATHEXT's order decides between two files.
        let bat_first = LookEnv {
            pathext: ".BAT;.EXE",
            ..env(path)
        };
        assert_eq!(resolve("sleep", "", &bat_first, &fs).unwrap(), r"C:\tools\sleep.bat");
        // An extension given is tried first, then the extensions after it.
        assert_eq!(
            resolve("sleep.exe", "", &env(path), &fs).unwrap(),
            r"C:\tools\sleep.exe"
        );
        assert_eq!(
            resolve("nope", "", &env(path), &fs).unwrap_err(),
            "exec: \"nope\": executable file not found in %PATH%"
        );
        assert_eq!(
            resolve("sleep", "", &env(""), &fs).unwrap_err(),
            "exec: \"sleep\": executable file not found in %PATH%"
        );
        // A directory is not a program.
        let dir = Fake {
            names: [(r"C:\tools\x.exe".to_string(), false)].into(),
            ..Fake::default()
        };
        assert!(resolve("x", "", &env(r"C:\tools"), &dir).is_err());
    }

    #[test]
    fn the_current_directory_is_err_dot_unless_path_finds_the_same_file() {
        let mut fs = Fake::with(&["tool.exe", r"C:\bin\tool.exe", r"C:\other\tool.exe"]);
        let dot = "exec: \"tool\": cannot run executable found relative to current directory";
        assert_eq!(resolve("tool", "", &env(r"C:\other"), &fs).unwrap_err(), dot);
        assert_eq!(resolve("tool", "", &env(""), &fs).unwrap_err(), dot);
        fs.same.push(("tool.exe".into(), r"C:\bin\tool.exe".into()));
        assert_eq!(resolve("tool", "", &env(r"C:\bin"), &fs).unwrap(), r"C:\bin\tool.exe");
        // NoDefaultCurrentDirectoryInExePath, set to anything, skips `.`.
        let no_dot = LookEnv {
            no_dot: true,
            ..env(r"C:\other")
        };
        assert_eq!(resolve("tool", "", &no_dot, &fs).unwrap(), r"C:\other\tool.exe");
        // A relative PATH entry is ErrDot too, even before an absolute hit.
        let rel = LookEnv {
            no_dot: true,
            ..env(r"sub;C:\other")
        };
        let fs = Fake::with(&[r"sub\tool.exe", r"C:\other\tool.exe"]);
        assert_eq!(resolve("tool", "", &rel, &fs).unwrap_err(), dot);
    }

    #[test]
    fn names_with_separators_are_checked_as_they_are() {
        let fs = Fake::with(&[r"C:\t\run.exe", r"C:\w\sub\x.cmd"]);
        let e = env(r"C:\t");
        assert_eq!(resolve(r"C:\t\run", "", &e, &fs).unwrap(), r"C:\t\run.exe");
        // An extension PATHEXT lists is taken unchecked.
        assert_eq!(resolve(r"C:\t\gone.exe", "", &e, &fs).unwrap(), r"C:\t\gone.exe");
        assert_eq!(
            resolve("/nonexistent", "", &e, &fs).unwrap_err(),
            "exec: \"/nonexistent\": executable file not found in %PATH%"
        );
        assert_eq!(
            resolve(r"C:\t\a.txt", "", &e, &fs).unwrap_err(),
            "exec: \"C:\\\\t\\\\a.txt\": file does not exist"
        );
        // Relative to the working directory, quoted joined.
        assert_eq!(resolve(r"sub\x", r"C:\w", &e, &fs).unwrap(), r"C:\w\sub\x.cmd");
        assert_eq!(
            resolve("sub/y", r"C:\w", &e, &fs).unwrap_err(),
            "exec: \"C:\\\\w\\\\sub\\\\y\": executable file not found in %PATH%"
        );
        // With no extensions at all, the name alone, with the OS's error.
        let none = LookEnv { pathext: ";", ..e };
        assert_eq!(
            resolve(r"C:\t\run", "", &none, &fs).unwrap_err(),
            "exec: \"C:\\\\t\\\\run\": CreateFile C:\\t\\run: The system cannot find the file specified."
        );
    }
}
