//! Operator settings: `remora.conf` beside the executable, merged under
//! the command-line flags, and the report of where each value came from.
//!
//! Claude Desktop owns the daemon's argv (it runs its cached
//! `~/.claude/remote/srv/<sha>/server` with flags of its own choosing), so
//! a flag-only knob cannot reach a Desktop-driven daemon. A file in the
//! executable's own directory can: it is what an operator, or
//! `ci/install-remote --desktop`, leaves beside the binary.
//!
//! The format is the field's (claustrum's `claustrum.conf`): one
//! `key = value` per line, `#` starts a comment line, blank lines are
//! skipped. Every key is the name of a flag and takes the same text as
//! that flag ([`Flags::set`] parses both), so there is one grammar per
//! setting; which flags are keys is the flag table's word
//! ([`crate::base::flagtable::Flag::conf`]). Precedence: a flag on the
//! command line, then the file, then the default ([`apply`]);
//! `REMORA_LOG_LEVEL` sits between the flag and the file for `log-level`.
//!
//! The file is fail-safe. It is read only when it is a regular file, not
//! a link, owned by the daemon's user or root, not writable by group or
//! others, and at most [`MAX_FILE_BYTES`]; otherwise it is ignored as a
//! whole with one warning. A line with an unknown key or a bad value is
//! ignored with one warning naming `file:line`. Nothing here can stop the
//! daemon from starting, and no value can turn on something the flags
//! could not.

use crate::base::flagtable::{Flag, Flags, FLAGS};
use crate::base::goerr::go_quote;
use crate::base::logging::Level;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The file's name, in the executable's directory.
pub(crate) const FILE_NAME: &str = "remora.conf";
/// A longer file is refused whole: settings are a handful of lines.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Warnings beyond this many are counted, not listed, so a garbage file
/// costs a bounded number of log lines.
const MAX_WARNINGS: usize = 8;

/// The keys the file may set, in the order they are reported: the flags
/// the table marks as settings ([`crate::base::flagtable::Flag::conf`]).
pub(crate) fn keys() -> Vec<&'static str> {
    keys_of(FLAGS)
}

/// The settings of `table`, by their rank.
fn keys_of(table: &[Flag]) -> Vec<&'static str> {
    let mut ranked: Vec<(u8, &'static str)> = table.iter().filter_map(|f| Some((f.conf?, f.name))).collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, name)| name).collect()
}

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    Default,
    /// The command line.
    Flag,
    /// An environment variable (`REMORA_LOG_LEVEL`).
    Env(&'static str),
    /// `remora.conf`, at this line.
    File(usize),
}

/// One `key = value` line that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: &'static str,
    value: String,
    line: usize,
}

/// What reading the file gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    /// The path consulted (`None` when the executable's directory is
    /// unknown).
    pub path: Option<PathBuf>,
    /// Whether the file was read, was absent, or was refused (and why).
    pub state: FileState,
    entries: Vec<Entry>,
    /// One line each, `file:line: ...` or `file: ...`; bounded.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum FileState {
    #[default]
    Absent,
    Read,
    Refused(String),
}

/// The effective settings' origins, key by key, in [`keys`] order.
#[derive(Debug, Clone)]
pub(crate) struct Provenance {
    pub file: Option<PathBuf>,
    pub sources: Vec<(&'static str, Source)>,
}

/// Reads `remora.conf` from the directory of the running executable.
pub(crate) fn load_beside_executable() -> Loaded {
    match executable_dir() {
        Some(dir) => load(&dir.join(FILE_NAME)),
        None => Loaded::default(),
    }
}

/// The real directory of the running executable (`/proc/self/exe`
/// resolved; an executable replaced since it started still names its old
/// place).
pub(crate) fn executable_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bytes = exe.as_os_str().as_encoded_bytes();
    let bytes = bytes.strip_suffix(b" (deleted)").unwrap_or(bytes);
    // SAFETY: encoded bytes cut before an ASCII suffix stay valid ones.
    Path::new(unsafe { OsStr::from_encoded_bytes_unchecked(bytes) })
        .parent()
        .map(Path::to_path_buf)
}

/// Reads and checks the settings file at `path`.
pub(crate) fn load(path: &Path) -> Loaded {
    let mut loaded = Loaded {
        path: Some(path.to_path_buf()),
        ..Loaded::default()
    };
    let shown = path.display().to_string();
    match read_trusted(path) {
        Ok(None) => {}
        Ok(Some(text)) => {
            loaded.state = FileState::Read;
            let mut warnings = Warnings::default();
            loaded.entries = parse(&text, &shown, &mut warnings);
            loaded.warnings = warnings.finish(&shown);
        }
        Err(why) => {
            loaded.warnings.push(format!("{shown}: {why}; the file is ignored"));
            loaded.state = FileState::Refused(why);
        }
    }
    loaded
}

/// The file's bytes if it may be trusted, `None` if there is none.
/// Windows: the Unix checks read from the owner SID and DACL
/// (`base::safedir`'s Windows half): opened without following a link or
/// junction, a regular file, owned by this user or by `SYSTEM`,
/// `Administrators` or `TrustedInstaller` (the Unix root), and no one
/// else may change its data or its DACL (the Unix `go-w`).
#[cfg(windows)]
fn read_trusted(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use crate::base::safedir;
    let file = match safedir::open_file_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(crate::sys::openat::ERROR_CANT_RESOLVE_FILENAME) => {
            return Err("is a symbolic link or junction (remora reads only a regular file)".to_string())
        }
        Err(e) => return Err(format!("cannot open: {}", crate::base::goerr::io_text(&e))),
    };
    let meta = regular_meta(&file)?;
    let access =
        safedir::access_of(&file).map_err(|e| format!("cannot read its DACL: {}", crate::base::goerr::io_text(&e)))?;
    if !access.ours && !access.system {
        return Err(format!(
            "is owned by {}, not by this user ({}) or SYSTEM/Administrators",
            access.owner,
            safedir::own_uid()
        ));
    }
    if access.others & safedir::WRITE_RIGHTS != 0 {
        return Err(format!(
            "is writable by other users (their rights {:#x}; an owner-only DACL fixes it)",
            access.others
        ));
    }
    read_bounded(file, meta.len()).map(Some)
}

/// The file's bytes if it may be trusted, `None` if there is none.
#[cfg(unix)]
fn read_trusted(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // No link is followed, and a FIFO or device cannot block the open.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("is a symbolic link (remora reads only a regular file)".to_string())
        }
        Err(e) => return Err(format!("cannot open: {}", crate::base::goerr::io_text(&e))),
    };
    let meta = regular_meta(&file)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "is owned by uid {}, not by this user ({me}) or root",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "is writable by group or others (mode {:04o}; chmod go-w fixes it)",
            meta.mode() & 0o7777
        ));
    }
    read_bounded(file, meta.len()).map(Some)
}

/// `file`'s metadata when it is a regular file (both halves of
/// `read_trusted` refuse anything else).
fn regular_meta(file: &std::fs::File) -> Result<std::fs::Metadata, String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat: {}", crate::base::goerr::io_text(&e)))?;
    if !meta.file_type().is_file() {
        return Err("is not a regular file".to_string());
    }
    Ok(meta)
}

/// The bytes of a file already judged trustworthy, at most
/// [`MAX_FILE_BYTES`] (its size `len` as `stat` gave it, and again as read,
/// since it may grow in between).
fn read_bounded(file: std::fs::File, len: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    if len > MAX_FILE_BYTES {
        return Err(format!("is larger than {MAX_FILE_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {}", crate::base::goerr::io_text(&e)))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("is larger than {MAX_FILE_BYTES} bytes"));
    }
    Ok(bytes)
}

/// A bounded list of warnings, with a count of the ones left out.
#[derive(Default)]
struct Warnings {
    kept: Vec<String>,
    dropped: usize,
}

impl Warnings {
    fn push(&mut self, line: String) {
        if self.kept.len() < MAX_WARNINGS {
            self.kept.push(line);
        } else {
            self.dropped += 1;
        }
    }

    fn finish(mut self, shown: &str) -> Vec<String> {
        if self.dropped > 0 {
            self.kept.push(format!(
                "{shown}: {} more line(s) ignored for the same kinds of reason",
                self.dropped
            ));
        }
        self.kept
    }
}

/// Parses the file's lines; each bad line becomes a warning and is
/// skipped. Values are checked with the flag grammar on a scratch
/// [`Flags`], so a value that passes here also applies.
fn parse(text: &[u8], shown: &str, warnings: &mut Warnings) -> Vec<Entry> {
    let keys = keys();
    let mut entries: Vec<Entry> = Vec::new();
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(line_text) = std::str::from_utf8(raw) else {
            warnings.push(format!("{shown}:{line}: not UTF-8 text; line ignored"));
            continue;
        };
        let trimmed = line_text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if trimmed.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            warnings.push(format!("{shown}:{line}: holds control characters; line ignored"));
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            warnings.push(format!(
                "{shown}:{line}: {} is not `key = value`; line ignored",
                go_quote(trimmed.as_bytes())
            ));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(&known) = keys.iter().find(|k| **k == key) else {
            warnings.push(format!(
                "{shown}:{line}: unknown key {} (known: {}); line ignored",
                go_quote(key.as_bytes()),
                keys.join(", ")
            ));
            continue;
        };
        if let Err(why) = check_value(known, value) {
            warnings.push(format!(
                "{shown}:{line}: invalid value {} for {known}: {why}; line ignored",
                go_quote(value.as_bytes())
            ));
            continue;
        }
        if let Some(earlier) = entries.iter_mut().find(|e| e.key == known) {
            warnings.push(format!(
                "{shown}:{line}: {known} repeats line {}; this line wins",
                earlier.line
            ));
            earlier.value = value.to_string();
            earlier.line = line;
            continue;
        }
        entries.push(Entry {
            key: known,
            value: value.to_string(),
            line,
        });
    }
    entries
}

/// The keys whose values are paths.
const PATH_KEYS: [&str; 2] = ["replay-dir", "wire-log"];

/// A key's value as its flag takes it, plus the file's own rule for paths:
/// absolute, or `~/` for the daemon user's home (a relative path would
/// depend on where the daemon happened to start).
fn check_value(key: &'static str, value: &str) -> Result<(), String> {
    if PATH_KEYS.contains(&key) && !value.is_empty() && !value.starts_with('/') && !value.starts_with("~/") {
        return Err("want an absolute path or one starting with ~/".to_string());
    }
    Flags::default().set(key, OsStr::new(&expand_home(key, value)))
}

/// `~/x` in a path key becomes `$HOME/x`, by the same rule as the `~` of
/// request paths ([`crate::base::gopath::expand_home`]).
fn expand_home(key: &str, value: &str) -> String {
    if PATH_KEYS.contains(&key) {
        crate::base::gopath::expand_home(value, crate::base::gopath::home_dir().as_deref())
    } else {
        value.to_string()
    }
}

/// Fills every flag not given on the command line from the file, and
/// returns where each setting came from. `log_level_env` is the value of
/// `REMORA_LOG_LEVEL`, which outranks the file.
pub(crate) fn apply(flags: &mut Flags, loaded: &Loaded, log_level_env: Option<&str>) -> Provenance {
    let env_level = log_level_env.and_then(Level::parse);
    let keys = keys();
    let mut sources = Vec::with_capacity(keys.len());
    for key in keys {
        let source = if flags.explicit.contains(&key) {
            Source::Flag
        } else if key == "log-level" && env_level.is_some() {
            flags.log_level = env_level;
            Source::Env("REMORA_LOG_LEVEL")
        } else if let Some(entry) = loaded.entries.iter().find(|e| e.key == key) {
            // Checked in `parse`; a failure here leaves the default.
            match flags.set(key, OsStr::new(&expand_home(key, &entry.value))) {
                Ok(()) => Source::File(entry.line),
                Err(_) => Source::Default,
            }
        } else {
            Source::Default
        };
        sources.push((key, source));
    }
    Provenance {
        file: loaded.path.clone(),
        sources,
    }
}

fn source_text(source: &Source, file: Option<&Path>) -> String {
    match source {
        Source::Default => "default".to_string(),
        Source::Flag => "flag".to_string(),
        Source::Env(name) => format!("env {name}"),
        Source::File(line) => match file {
            Some(path) => format!("{}:{line}", path.display()),
            None => format!("{FILE_NAME}:{line}"),
        },
    }
}

/// The one start-up log line: every setting, its value and its origin.
pub(crate) fn summary_line(flags: &Flags, provenance: &Provenance) -> String {
    let file = provenance.file.as_deref();
    let parts: Vec<String> = provenance
        .sources
        .iter()
        .map(|(key, source)| format!("{key}={} ({})", flags.text(key, true), source_text(source, file)))
        .collect();
    format!("settings: {}", parts.join(", "))
}

/// `-print-config`: the effective settings in the file's own format, so
/// the output can be saved as a `remora.conf`. A header names the file and
/// its state; each setting follows a comment with its origin, and a
/// setting at its default is itself commented out.
pub(crate) fn print_config(flags: &Flags, loaded: &Loaded, provenance: &Provenance) -> String {
    let mut out = String::new();
    let file = provenance.file.as_deref();
    let state = match &loaded.state {
        FileState::Absent => "absent",
        FileState::Read => "read",
        FileState::Refused(_) => "ignored",
    };
    match file {
        None => out.push_str("# settings file: unknown (the executable's directory could not be found)\n"),
        Some(p) => out.push_str(&format!("# settings file: {} ({state})\n", p.display())),
    }
    for warning in &loaded.warnings {
        out.push_str(&format!("# warning: {warning}\n"));
    }
    for (key, source) in &provenance.sources {
        let value = flags.text(key, false);
        let line = format!("{key} = {value}");
        match source {
            Source::Default => out.push_str(&format!("# {line}  (default)\n")),
            _ => out.push_str(&format!("# from {}\n{line}\n", source_text(source, file))),
        }
    }
    out
}

// Modes, links and FIFOs: Unix-only fixtures.
#[cfg(test)]
#[cfg(unix)] // Unix modes and signals
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entries(text: &str) -> (Vec<Entry>, Vec<String>) {
        let mut w = Warnings::default();
        let e = parse(text.as_bytes(), "f", &mut w);
        (e, w.finish("f"))
    }

    #[test]
    fn every_key_is_a_flag() {
        for key in keys() {
            if let Err(crate::launch::flags::ParseError::Invalid(why)) =
                crate::launch::flags::parse(&[format!("-{key}=x").into()])
            {
                assert!(!why.contains("not defined"), "{key}: {why}");
            }
        }
    }

    #[test]
    fn the_keys_come_from_the_table() {
        // A flag only the table knows is a key, in its rank's place.
        let planted = crate::base::flagtable::planted();
        let mut expected = keys();
        expected.push("planted-knob");
        assert_eq!(keys_of(&planted), expected);
        // Without it, the keys are the table's settings.
        let mut marked: Vec<&str> = FLAGS.iter().filter(|f| f.conf.is_some()).map(|f| f.name).collect();
        let mut listed = keys();
        marked.sort_unstable();
        listed.sort_unstable();
        assert_eq!(listed, marked);
    }

    #[test]
    fn lines_comments_and_blanks() {
        let (e, w) = entries("# a comment\n\n  replay-budget-mb = 16 \r\nkeep-children=true\n");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            e,
            vec![
                Entry {
                    key: "replay-budget-mb",
                    value: "16".into(),
                    line: 3
                },
                Entry {
                    key: "keep-children",
                    value: "true".into(),
                    line: 4
                },
            ]
        );
    }

    #[test]
    fn bad_lines_warn_with_file_and_line_and_are_skipped() {
        let (e, w) = entries(
            "bogus = 1\nreplay-budget-mb = lots\nreference-build = 123\nno equals sign\nreplay-dir = rel/path\nlog-level = loud\n",
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(w.len(), 6, "{w:?}");
        assert!(w[0].starts_with("f:1: unknown key \"bogus\""), "{}", w[0]);
        assert!(
            w[1].starts_with("f:2: invalid value \"lots\" for replay-budget-mb: parse error"),
            "{}",
            w[1]
        );
        assert!(w[2].contains("40 or 64 hex digits"), "{}", w[2]);
        assert!(
            w[3].starts_with("f:4: \"no equals sign\" is not `key = value`"),
            "{}",
            w[3]
        );
        assert!(
            w[4].starts_with("f:5: invalid value \"rel/path\" for replay-dir"),
            "{}",
            w[4]
        );
        assert!(
            w[5].starts_with("f:6: invalid value \"loud\" for log-level"),
            "{}",
            w[5]
        );
    }

    #[test]
    fn a_repeated_key_keeps_the_last_line_and_says_so() {
        let (e, w) = entries("replay-budget-mb = 1\nreplay-budget-mb = 2\n");
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].value.as_str(), e[0].line), ("2", 2));
        assert_eq!(
            w,
            vec!["f:2: replay-budget-mb repeats line 1; this line wins".to_string()]
        );
    }

    #[test]
    fn garbage_costs_a_bounded_number_of_warnings() {
        let garbage: Vec<u8> = (0..MAX_FILE_BYTES as usize).map(|i| (i * 7919 % 251) as u8).collect();
        let mut w = Warnings::default();
        let e = parse(&garbage, "f", &mut w);
        let w = w.finish("f");
        assert!(e.is_empty());
        assert_eq!(w.len(), MAX_WARNINGS + 1, "{w:?}");
        assert!(w.last().unwrap().contains("more line(s) ignored"));
    }

    #[test]
    fn the_flag_outranks_the_file_and_the_file_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(
            &path,
            "replay-budget-mb = 16\nmetrics-addr = 127.0.0.1:9\nlog-level = warn\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let loaded = load(&path);
        assert_eq!(loaded.state, FileState::Read);
        let mut flags = crate::launch::flags::parse(&["-replay-budget-mb".into(), "32".into()]).unwrap();
        let p = apply(&mut flags, &loaded, None);
        assert_eq!(flags.replay_budget_mb, 32);
        assert_eq!(flags.metrics_addr, "127.0.0.1:9");
        assert_eq!(flags.log_level, Some(Level::Warn));
        let source = |k: &str| p.sources.iter().find(|(key, _)| *key == k).unwrap().1.clone();
        assert_eq!(source("replay-budget-mb"), Source::Flag);
        assert_eq!(source("metrics-addr"), Source::File(2));
        assert_eq!(source("keep-children"), Source::Default);
        // The environment's level outranks the file's.
        let mut flags = Flags::default();
        let p = apply(&mut flags, &loaded, Some("error"));
        assert_eq!(flags.log_level, Some(Level::Error));
        assert_eq!(p.sources[5], ("log-level", Source::Env("REMORA_LOG_LEVEL")));
    }

    #[test]
    fn an_untrusted_file_is_ignored_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "replay-budget-mb = 16\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let loaded = load(&path);
        assert!(matches!(&loaded.state, FileState::Refused(why) if why.contains("writable by group or others")));
        let mut flags = Flags::default();
        apply(&mut flags, &loaded, None);
        assert_eq!(flags.replay_budget_mb, 2048);

        std::fs::remove_file(&path).unwrap();
        let real = dir.path().join("real.conf");
        std::fs::write(&real, "replay-budget-mb = 16\n").unwrap();
        std::os::unix::fs::symlink(&real, &path).unwrap();
        assert!(matches!(load(&path).state, FileState::Refused(why) if why.contains("symbolic link")));

        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(load(&path).state, FileState::Refused(why) if why.contains("not a regular file")));

        std::fs::remove_dir(&path).unwrap();
        assert_eq!(load(&path).state, FileState::Absent);
        assert!(load(&path).warnings.is_empty());
    }

    #[test]
    fn a_fifo_does_not_block_the_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(load(&path).state, FileState::Refused(why) if why.contains("not a regular file")));
    }

    #[test]
    fn print_config_is_the_file_format_with_origins() {
        let mut flags = Flags::default();
        let loaded = Loaded::default();
        let p = apply(&mut flags, &loaded, None);
        let text = print_config(&flags, &loaded, &p);
        assert!(text.contains("\n# replay-budget-mb = 2048  (default)\n"), "{text}");
        assert!(text.contains("\n# keep-children = false  (default)\n"), "{text}");
        // What it prints reads back as the same settings.
        let mut flags = crate::launch::flags::parse(&["-keep-children".into(), "-replay-budget-mb=7".into()]).unwrap();
        let p = apply(&mut flags, &loaded, None);
        let text = print_config(&flags, &loaded, &p);
        let (e, w) = entries(&text);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            e.iter().map(|e| (e.key, e.value.as_str())).collect::<Vec<_>>(),
            vec![("replay-budget-mb", "7"), ("keep-children", "true")]
        );
        assert!(summary_line(&flags, &p).starts_with("settings: reference-build=\"\" (default), "));
    }
}
