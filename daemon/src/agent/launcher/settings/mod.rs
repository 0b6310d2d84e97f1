//! The managed settings behind `launcher.resolve`, `-install` and
//! `-probe-cli` (build 89cb6289): which files are read, how the launcher
//! value is taken from them, how the value becomes an argv, and the checks
//! an argv must pass. `process.spawn`'s `launcher` param goes through the
//! same argv checks ([`check_argv`]).
//!
//! Facts (docs/PROTOCOL.md "launcher.* (added 89cb6289)" in
//! `schubydoo/claustrum`): the folder is [`SYSTEM_DIR`] (`/etc/claude-code`
//! on Linux, `/Library/Application Support/ClaudeCode` on macOS); the base file
//! [`BASE_FILE`] is read first, then the `*.json` drop-ins of [`DROP_IN_DIR`]
//! in name order; in one file `env.CLAUDE_CODE_PROCESS_WRAPPER` wins over
//! `processWrapper`, and a later file with a value wins. Every reason text
//! below is the recorded one.
//!
//! remora's own choices (not measured): a settings file is opened without
//! following a link (a link is `not a regular file`) and non-blocking (a
//! FIFO is never waited on), and the first unreadable file ends the read.

use crate::base::gojson::{self, Value};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The system folder of the managed settings.
pub(crate) use crate::sys::os::MANAGED_SETTINGS_DIR as SYSTEM_DIR;
/// The base settings file, in the folder.
pub(crate) const BASE_FILE: &str = "managed-settings.json";
/// The drop-in folder, in the folder.
pub(crate) const DROP_IN_DIR: &str = "managed-settings.d";
/// Moves the folder for tests, when the system folder holds no policy.
pub(crate) const SETTINGS_DIR_ENV: &str = "CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR";
/// The launcher gate of `-install` / `-probe-cli`.
pub(crate) const LAUNCHER_GATE_ENV: &str = "CLAUDE_SSH_MANAGED_LAUNCHER";
/// What no spawned child inherits, from the daemon's env or the request's.
pub(crate) const STRIPPED_ENV: [&str; 2] = [LAUNCHER_GATE_ENV, SETTINGS_DIR_ENV];
/// The settings key inside `env`, and what a child with a launcher loses.
pub(crate) const WRAPPER_ENV: &str = "CLAUDE_CODE_PROCESS_WRAPPER";
/// The top-level settings key.
const WRAPPER_KEY: &str = "processWrapper";
/// A settings file larger than this is unreadable.
const MAX_FILE: u64 = 2 << 20;

pub(crate) const NO_LAUNCHER: &str = "the value is set but contains no launcher \u{2014} unset it to run without one, or set it to the absolute path of your launcher";
const EMPTY_ELEMENT: &str =
    "the JSON array contains an empty element \u{2014} remove it, or fill in the value it was a placeholder for";
const NOT_STRINGS: &str = "JSON form must be an array of strings";
const NOT_JSON_ARRAY: &str = "value starts with `[` but is not valid JSON";
const METACHAR: &str = "the value contains an unquoted shell metacharacter (one of ; | & $ ( ) ` < >) \u{2014} it is an argv list, not a shell command";
const UNTERMINATED: &str = "unterminated double quote";
const EMPTY_TOKEN: &str =
    "the value contains an empty `\"\"` token \u{2014} remove it, or fill in the value it was a placeholder for";
const NOT_ABSOLUTE: &str = "the launcher must be an absolute path, not a bare name resolved via PATH";
/// The extensions of a script the SDK would run in place of Claude Code.
const SCRIPT_EXTENSIONS: [&str; 5] = ["js", "mjs", "ts", "tsx", "jsx"];

const PERMISSION_DENIED: &str = "permission denied";
const IS_DIRECTORY: &str = "is a directory";
const NOT_REGULAR: &str = "not a regular file";
const TOO_LARGE: &str = "larger than 2 MiB";
const INVALID_JSON: &str = "not valid JSON";
const NOT_OBJECT: &str = "not a JSON object";
const NOT_LISTED: &str = "the drop-in directory could not be listed: ";

/// What `launcher.resolve` answers, serialized in the recorded member order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub(crate) enum Resolution {
    /// No settings file sets a launcher.
    None,
    Usable {
        argv: Vec<String>,
        source: String,
    },
    Unusable {
        source: String,
        reason: String,
    },
    Unreadable {
        reason: String,
        path: String,
    },
}

/// The folder whose settings are read, and the line to log (once per
/// daemon) when [`SETTINGS_DIR_ENV`] is set but the system folder holds
/// this host's policy.
pub(crate) fn settings_dir() -> (PathBuf, Option<String>) {
    choose_dir(Path::new(SYSTEM_DIR), std::env::var_os(SETTINGS_DIR_ENV))
}

/// [`settings_dir`] with the system folder and the variable's value given.
fn choose_dir(system: &Path, asked: Option<OsString>) -> (PathBuf, Option<String>) {
    let Some(asked) = asked.filter(|v| !v.is_empty()) else {
        return (system.to_path_buf(), None);
    };
    if holds_policy(system) {
        let note = format!(
            "[launcher] {SETTINGS_DIR_ENV} ignored: {} holds this host's policy",
            display(system)
        );
        return (system.to_path_buf(), Some(note));
    }
    (PathBuf::from(asked), None)
}

/// Whether `dir` has the base file or a drop-in (a drop-in folder that
/// cannot be listed counts: its files would be read, and refused).
fn holds_policy(dir: &Path) -> bool {
    if std::fs::symlink_metadata(dir.join(BASE_FILE)).is_ok() {
        return true;
    }
    match drop_ins(&dir.join(DROP_IN_DIR)) {
        Ok(names) => !names.is_empty(),
        Err(_) => true,
    }
}

/// Reads the settings of `dir` and resolves the launcher they name
/// against the CLI at `cli_path`. The launcher is never run.
pub(crate) fn resolve_in(dir: &Path, cli_path: &str) -> Resolution {
    let mut found: Option<(String, String)> = None;
    let base = dir.join(BASE_FILE);
    match read_value(&base) {
        Ok(Some(value)) => found = Some((value, display(&base))),
        Ok(None) => {}
        Err(reason) => return unreadable(reason, &base),
    }
    let drop_in_dir = dir.join(DROP_IN_DIR);
    let names = match drop_ins(&drop_in_dir) {
        Ok(names) => names,
        Err(e) => return unreadable(format!("{NOT_LISTED}{}", crate::base::goerr::io_text(&e)), &drop_in_dir),
    };
    for name in names {
        let file = drop_in_dir.join(name);
        match read_value(&file) {
            Ok(Some(value)) => found = Some((value, display(&file))),
            Ok(None) => {}
            Err(reason) => return unreadable(reason, &file),
        }
    }
    let Some((value, source)) = found else {
        return Resolution::None;
    };
    match parse_value(&value).and_then(|argv| check_argv(&argv, cli_path).map(|()| argv)) {
        Ok(argv) => Resolution::Usable { argv, source },
        Err(reason) => Resolution::Unusable { source, reason },
    }
}

fn unreadable(reason: impl Into<String>, path: &Path) -> Resolution {
    Resolution::Unreadable {
        reason: reason.into(),
        path: display(path),
    }
}

fn display(path: &Path) -> String {
    gojson::go_lossy(path.as_os_str().as_bytes())
}

/// The drop-in names of `dir` in name order: lower-case `.json` at the
/// end, no leading dot. A missing folder has none.
fn drop_ins(dir: &Path) -> std::io::Result<Vec<OsString>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let mut names: Vec<Vec<u8>> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_vec())
        .filter(|n| n.ends_with(b".json") && !n.starts_with(b"."))
        .collect();
    names.sort();
    Ok(names.into_iter().map(OsString::from_vec).collect())
}

/// The launcher value one settings file sets: `Ok(None)` for a missing
/// file or one without a value, `Err` with the unreadable reason.
fn read_value(path: &Path) -> Result<Option<String>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) => {
            return match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ok(None),
                Some(libc::EACCES) | Some(libc::EPERM) => Err(PERMISSION_DENIED.into()),
                Some(libc::ELOOP) | Some(libc::ENXIO) => Err(NOT_REGULAR.into()),
                Some(libc::EISDIR) => Err(IS_DIRECTORY.into()),
                _ => Err(crate::base::goerr::io_text(&e)),
            }
        }
    };
    let meta = file.metadata().map_err(|e| crate::base::goerr::io_text(&e))?;
    if meta.is_dir() {
        return Err(IS_DIRECTORY.into());
    }
    if !meta.is_file() {
        return Err(NOT_REGULAR.into());
    }
    if meta.len() > MAX_FILE {
        return Err(TOO_LARGE.into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::base::goerr::io_text(&e))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(TOO_LARGE.into());
    }
    let Ok(settings) = gojson::parse(&bytes) else {
        return Err(INVALID_JSON.into());
    };
    let Value::Object(members) = &settings else {
        return Err(NOT_OBJECT.into());
    };
    Ok(wrapper_value(members))
}

/// The value of one settings object: a non-empty
/// `env.CLAUDE_CODE_PROCESS_WRAPPER`, else `processWrapper` (strings only;
/// a repeated key counts once, the last, as Go decodes it).
fn wrapper_value(members: &[(String, Value)]) -> Option<String> {
    fn get<'a>(members: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
        members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    if let Some(Value::Object(env)) = get(members, "env") {
        if let Some(Value::String(v)) = get(env, WRAPPER_ENV) {
            if !v.is_empty() {
                return Some(v.clone());
            }
        }
    }
    match get(members, WRAPPER_KEY) {
        Some(Value::String(v)) => Some(v.clone()),
        _ => None,
    }
}

/// A settings value as an argv: a JSON string array when it starts with
/// `[`, else an argv list (words split on space, U+00A0 and U+FEFF, double
/// quotes grouping, no unquoted shell metacharacter).
pub(crate) fn parse_value(value: &str) -> Result<Vec<String>, String> {
    if value.starts_with('[') {
        return parse_json_form(value);
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut in_word, mut quoted) = (false, false);
    for c in value.chars() {
        if quoted {
            if c == '"' {
                quoted = false;
            } else {
                word.push(c);
            }
            continue;
        }
        match c {
            '"' => (quoted, in_word) = (true, true),
            ' ' | '\u{a0}' | '\u{feff}' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            ';' | '|' | '&' | '$' | '(' | ')' | '`' | '<' | '>' => return Err(METACHAR.into()),
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err(UNTERMINATED.into());
    }
    if in_word {
        words.push(word);
    }
    if words.iter().any(String::is_empty) {
        return Err(EMPTY_TOKEN.into());
    }
    if words.is_empty() {
        return Err(NO_LAUNCHER.into());
    }
    Ok(words)
}

fn parse_json_form(value: &str) -> Result<Vec<String>, String> {
    let Ok(parsed) = gojson::parse(value.as_bytes()) else {
        return Err(NOT_JSON_ARRAY.into());
    };
    let Value::Array(items) = &parsed else {
        return Err(NOT_STRINGS.into());
    };
    let mut argv = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::String(s) => argv.push(s.clone()),
            _ => return Err(NOT_STRINGS.into()),
        }
    }
    check_elements(&argv)?;
    Ok(argv)
}

/// An argv with no element, or with an empty one, names no launcher.
fn check_elements(argv: &[String]) -> Result<(), String> {
    if argv.is_empty() {
        return Err(NO_LAUNCHER.into());
    }
    if argv.iter().any(String::is_empty) {
        return Err(EMPTY_ELEMENT.into());
    }
    Ok(())
}

/// The checks a launcher argv passes before it is offered or used:
/// elements, an absolute `argv[0]` that is not the CLI itself nor a
/// script, and an executable regular file there (links followed).
pub(crate) fn check_argv(argv: &[String], cli_path: &str) -> Result<(), String> {
    check_elements(argv)?;
    let launcher = &argv[0];
    if !launcher.starts_with('/') {
        return Err(NOT_ABSOLUTE.into());
    }
    if is_same_path(launcher, cli_path) {
        return Err(format!("launcher `{launcher}` is Claude Code's own path"));
    }
    let extension = Path::new(launcher)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if extension.is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e.as_str())) {
        return Err(format!(
            "launcher `{launcher}` is a script the SDK would run in place of Claude Code"
        ));
    }
    if !is_executable_file(launcher) {
        return Err(format!(
            "launcher `{launcher}` does not exist or is not an executable regular file"
        ));
    }
    Ok(())
}

/// The same path as given, or the same file once links are resolved.
fn is_same_path(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn is_executable_file(path: &str) -> bool {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(c_path) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: plain syscall on a NUL-terminated path.
    unsafe { libc::faccessat(libc::AT_FDCWD, c_path.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

#[cfg(test)]
mod tests;
