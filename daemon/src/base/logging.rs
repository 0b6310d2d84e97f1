//! The operational log: leveled lines on stderr in Go's `log` format.
//!
//! Every line is `2006/01/02 15:04:05 LEVEL [Component] message`, the level
//! tag padded to five characters so the `[Component]` prefixes stay
//! byte-identical to the reference's and any grep for them keeps matching.
//! The threshold comes once from `REMORA_LOG_LEVEL` (debug, info, warn,
//! error; unset or unknown means debug). Tokens never reach this module:
//! callers log method names and ids, never request bodies.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

impl Level {
    fn tag(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO ",
            Level::Warn => "WARN ",
            Level::Error => "ERROR",
        }
    }

    /// Parses a `REMORA_LOG_LEVEL` value; anything unknown is `Debug`.
    pub(crate) fn from_setting(value: Option<&str>) -> Level {
        value.and_then(Level::parse).unwrap_or(Level::Debug)
    }

    /// A level by name (case-insensitive, surrounding blanks ignored);
    /// `None` for anything else.
    pub(crate) fn parse(value: &str) -> Option<Level> {
        match value.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" | "warning" => Some(Level::Warn),
            "error" => Some(Level::Error),
            _ => None,
        }
    }

    /// The level's name as `-log-level` takes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

static THRESHOLD: AtomicU8 = AtomicU8::new(Level::Debug as u8);

/// Reads `REMORA_LOG_LEVEL` and sets the threshold.
pub(crate) fn init_from_env() {
    let setting = std::env::var("REMORA_LOG_LEVEL").ok();
    set_threshold(Level::from_setting(setting.as_deref()));
}

pub(crate) fn set_threshold(level: Level) {
    THRESHOLD.store(level as u8, Ordering::Relaxed);
}

pub(crate) fn enabled(level: Level) -> bool {
    level as u8 >= THRESHOLD.load(Ordering::Relaxed)
}

/// Formats one log line (without the trailing newline's write) for `level`.
pub(crate) fn format_line(level: Level, args: fmt::Arguments<'_>) -> String {
    format!("{} {} {}\n", timestamp(), level.tag(), args)
}

/// The size stderr may reach before it is started over; 0 = no cap.
static CAP: AtomicU64 = AtomicU64::new(0);
/// Bytes written to stderr since it was (last) started over.
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// What replaces a full capped stderr: a fresh file, and the name the
/// full one now has (for the note). Set by the daemon once it knows its
/// log's directory ([`rotate_with`]); it must not log.
pub(crate) type Rotator = Box<dyn Fn() -> Option<(std::fs::File, &'static str)> + Send + Sync>;

static ROTATOR: std::sync::OnceLock<Rotator> = std::sync::OnceLock::new();

/// Sets how a full capped stderr is rotated (once; later calls are
/// ignored). Without one, or when it fails, the file is started over.
pub(crate) fn rotate_with(rotator: Rotator) {
    let _ = ROTATOR.set(rotator);
}

/// Whether stderr is capped ([`cap_stderr`]).
pub(crate) fn stderr_capped() -> bool {
    CAP.load(Ordering::Relaxed) > 0
}

/// Caps stderr, a log file of the daemon's own, at `cap` bytes: a line
/// that would pass it first rotates the file ([`rotate_with`]: the full
/// file is renamed, a fresh one takes its place on stderr), or, when that
/// cannot be done, truncates it (it is opened for append, so writing goes
/// on at its new end); either way a first line says so.
pub(crate) fn cap_stderr(cap: u64) {
    WRITTEN.store(crate::sys::os::stderr_len(), Ordering::Relaxed);
    CAP.store(cap, Ordering::Relaxed);
}

/// Writes one line to stderr if `level` passes the threshold.
pub(crate) fn write(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = format_line(level, args);
    #[cfg(feature = "fuzzing")]
    if capture::take(&line) {
        return;
    }
    let mut err = std::io::stderr().lock();
    let cap = CAP.load(Ordering::Relaxed);
    let len = line.len() as u64;
    if cap > 0 && WRITTEN.fetch_add(len, Ordering::Relaxed).saturating_add(len) > cap {
        // The full file stays whole under its new name.
        let rotated = ROTATOR
            .get()
            .and_then(|rotate| rotate())
            .and_then(|(fresh, kept_in)| crate::sys::os::replace_stderr(&fresh).then_some(kept_in));
        let note = match rotated {
            Some(kept_in) => Some(format_line(
                Level::Warn,
                format_args!("[daemon] the log reached {cap} bytes; the lines before this one are in {kept_in}"),
            )),
            None if crate::sys::os::truncate_stderr() => Some(format_line(
                Level::Warn,
                format_args!("[daemon] the log reached {cap} bytes and was started over"),
            )),
            None => None,
        };
        if let Some(note) = note {
            let _ = err.write_all(note.as_bytes());
            WRITTEN.store(note.len() as u64 + len, Ordering::Relaxed);
        }
    }
    // One write per line so concurrent tasks never interleave mid-line.
    let _ = err.write_all(line.as_bytes());
}

/// Log lines kept in memory instead of written, for the fuzzing build's
/// checks of what a request logs (per thread, so each fuzzer thread sees
/// only its own lines; off unless [`capture::lines`] is running).
#[cfg(feature = "fuzzing")]
pub(crate) mod capture {
    use std::cell::RefCell;

    thread_local! {
        static LINES: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Keeps `line` if this thread is capturing; returns whether it did.
    pub(super) fn take(line: &str) -> bool {
        LINES.with(|lines| match lines.borrow_mut().as_mut() {
            Some(kept) => {
                kept.push(line.to_string());
                true
            }
            None => false,
        })
    }

    /// Runs `body` with this thread's log lines captured; returns its
    /// result and the lines, each formatted as it would have been written.
    pub(crate) fn lines<R>(body: impl FnOnce() -> R) -> (R, Vec<String>) {
        let outer = LINES.with(|lines| lines.borrow_mut().replace(Vec::new()));
        let result = body();
        let kept = LINES.with(|lines| std::mem::replace(&mut *lines.borrow_mut(), outer));
        (result, kept.unwrap_or_default())
    }
}

/// Local wall-clock time as Go's `log` prints it: `2006/01/02 15:04:05`.
fn timestamp() -> String {
    let Some([year, month, day, hour, minute, second]) = crate::sys::os::local_time() else {
        return "0000/00/00 00:00:00".to_string();
    };
    format!("{year:04}/{month:02}/{day:02} {hour:02}:{minute:02}:{second:02}")
}

/// How many characters of one client-controlled string a log line shows.
pub(crate) const UNTRUSTED_MAX_CHARS: usize = 256;

/// A client-controlled string as a log line may show it: control
/// characters (`\n`, `\r`, ESC, DEL, C1, U+2028/U+2029) escaped so a
/// client cannot forge or split lines, and cut after
/// [`UNTRUSTED_MAX_CHARS`] characters with the number of bytes left out, so
/// one request cannot write megabytes of log.
pub(crate) struct Untrusted<'a>(pub &'a str);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (count, (at, c)) in self.0.char_indices().enumerate() {
            if count == UNTRUSTED_MAX_CHARS {
                return write!(f, "…(+{} bytes)", self.0.len() - at);
            }
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                    if (c as u32) < 0x80 {
                        write!(f, "\\x{:02x}", c as u32)?
                    } else {
                        write!(f, "\\u{:04x}", c as u32)?
                    }
                }
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// How many warnings of one kind one connection may log: the first
/// `limit` go through, the rest are only counted, so a client repeating a
/// bad request cannot flood the log.
#[derive(Debug)]
pub(crate) struct Quota {
    left: std::sync::atomic::AtomicU32,
    suppressed: std::sync::atomic::AtomicU64,
}

impl Quota {
    pub(crate) fn new(limit: u32) -> Quota {
        Quota {
            left: std::sync::atomic::AtomicU32::new(limit),
            suppressed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether one more warning may be logged; counts it otherwise.
    pub(crate) fn allow(&self) -> bool {
        let took = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1))
            .is_ok();
        if !took {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
        }
        took
    }

    /// Warnings counted but not logged.
    pub(crate) fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }
}

// The macros test the threshold before building their arguments, so a
// quiet level costs nothing, whatever the arguments compute.
#[macro_export]
macro_rules! log_debug { ($($t:tt)*) => { if $crate::base::logging::enabled($crate::base::logging::Level::Debug) { $crate::base::logging::write($crate::base::logging::Level::Debug, format_args!($($t)*)) } } }
#[macro_export]
macro_rules! log_info { ($($t:tt)*) => { if $crate::base::logging::enabled($crate::base::logging::Level::Info) { $crate::base::logging::write($crate::base::logging::Level::Info, format_args!($($t)*)) } } }
#[macro_export]
macro_rules! log_warn { ($($t:tt)*) => { if $crate::base::logging::enabled($crate::base::logging::Level::Warn) { $crate::base::logging::write($crate::base::logging::Level::Warn, format_args!($($t)*)) } } }
#[macro_export]
macro_rules! log_error { ($($t:tt)*) => { if $crate::base::logging::enabled($crate::base::logging::Level::Error) { $crate::base::logging::write($crate::base::logging::Level::Error, format_args!($($t)*)) } } }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format_is_go_log_with_padded_level() {
        let line = format_line(Level::Info, format_args!("[Server] New connection from: @"));
        let (stamp, rest) = line.split_at(19);
        assert_eq!(rest, " INFO  [Server] New connection from: @\n");
        let b = stamp.as_bytes();
        assert!(
            b[4] == b'/' && b[7] == b'/' && b[10] == b' ' && b[13] == b':' && b[16] == b':',
            "{stamp}"
        );
        assert!(format_line(Level::Warn, format_args!("x")).ends_with(" WARN  x\n"));
        assert!(format_line(Level::Error, format_args!("x")).ends_with(" ERROR x\n"));
        assert!(format_line(Level::Debug, format_args!("x")).ends_with(" DEBUG x\n"));
    }

    #[test]
    fn untrusted_strings_cannot_split_lines_or_flood() {
        let shown = Untrusted("a\nb\r\tc\u{1b}[31m\u{7f}\u{85}\u{2028}é").to_string();
        assert_eq!(shown, "a\\nb\\r\\tc\\x1b[31m\\x7f\\u0085\\u2028é");
        let long = "x".repeat(10_000);
        let shown = Untrusted(&long).to_string();
        assert_eq!(
            shown,
            format!(
                "{}…(+{} bytes)",
                "x".repeat(UNTRUSTED_MAX_CHARS),
                10_000 - UNTRUSTED_MAX_CHARS
            )
        );
        assert_eq!(
            Untrusted(&"y".repeat(UNTRUSTED_MAX_CHARS)).to_string().len(),
            UNTRUSTED_MAX_CHARS
        );
    }

    #[test]
    fn a_quota_lets_the_first_warnings_through_and_counts_the_rest() {
        let q = Quota::new(2);
        assert!(q.allow());
        assert!(q.allow());
        assert!(!q.allow());
        assert!(!q.allow());
        assert_eq!(q.suppressed(), 2);
    }

    #[test]
    fn level_setting_parses_with_debug_default() {
        assert_eq!(Level::from_setting(None), Level::Debug);
        assert_eq!(Level::from_setting(Some("bogus")), Level::Debug);
        assert_eq!(Level::from_setting(Some("INFO")), Level::Info);
        assert_eq!(Level::from_setting(Some("warn")), Level::Warn);
        assert_eq!(Level::from_setting(Some("error")), Level::Error);
    }
}
