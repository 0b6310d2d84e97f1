//! Every command-line flag, declared once: one entry gives its field of
//! [`Flags`] and how a value parses into it, its name, kind, default, help
//! text and place in the help, and whether `remora.conf` may set it.
//! Everything that knows flags derives from [`FLAGS`]: the parser and the
//! help (`launch::flags`), the settings file's keys and report
//! (`launch::settings`), and the run lock's walk of another daemon's
//! command line (`rundir::runlock`), which skips the value of every flag
//! that takes one. Adding a flag is one entry below, plus the code that
//! acts on its value.
//!
//! Values follow Go's `flag` package, whose messages the parser repeats:
//! booleans are `strconv.ParseBool`, integers `strconv.ParseInt(s, 0,
//! 64)`, durations `time.ParseDuration`, each failing with the reason
//! `flag` prints.

use crate::base::goerr::go_quote;
use crate::base::logging::Level;
use std::ffi::{OsStr, OsString};
use std::time::Duration;

/// The value type of a flag, which decides how it is written (a boolean
/// takes no separate value) and which default the help leaves unsaid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Str,
    Int,
    /// Go's `flag.Duration` ([`crate::base::goduration`]).
    Duration,
    /// A count of minutes that may have a decimal fraction (`30`, `0.5`),
    /// [`Minutes`].
    Minutes,
}

/// A section of options in the help, in the order the help prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Serve,
    BridgeAndStop,
    Install,
    Doctor,
    Version,
    EveryMode,
}

impl Section {
    pub(crate) const ALL: [Section; 6] = [
        Section::Serve,
        Section::BridgeAndStop,
        Section::Install,
        Section::Doctor,
        Section::Version,
        Section::EveryMode,
    ];

    /// What follows `Options of ` in the help.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Section::Serve => "-serve",
            Section::BridgeAndStop => "-bridge and -stop",
            Section::Install => "-install",
            Section::Doctor => "-doctor",
            Section::Version => "-version",
            Section::EveryMode => "every mode",
        }
    }
}

/// Where the help lists a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// A mode: a synopsis line `remora -<name>` followed by this text.
    Mode(&'static str),
    /// An option, under each of these sections (under "Other options"
    /// when there is none).
    Options(&'static [Section]),
}

/// One flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag {
    pub name: &'static str,
    pub kind: Kind,
    /// The default as Go's `DefValue` prints it; [`Flags::default`] is
    /// every flag at this value.
    pub default: &'static str,
    /// What the help shows after the flag's name: empty for a boolean.
    pub value: &'static str,
    pub usage: &'static str,
    pub listed: Listed,
    /// `Some(n)`: a key of `remora.conf`, the n-th (from 0) wherever the
    /// settings are reported (`-print-config`, the start-up line, the
    /// list of known keys). The operator's knobs are; modes, the token,
    /// the socket and the per-call `-cli-*` values (what to install, from
    /// where) are the driver's and stay out. `cli-download-timeout` is the
    /// operator's: Desktop runs `-install` with an argv of its own, so the
    /// file is the knob that reaches it.
    pub conf: Option<u8>,
}

impl Flag {
    /// Whether the flag takes a value (`-name VALUE` or `-name=VALUE`):
    /// every kind but a boolean does.
    pub(crate) fn takes_value(&self) -> bool {
        self.kind != Kind::Bool
    }
}

/// Declares [`FLAGS`] and [`Flags`] from one list. Each entry is a field
/// of `Flags` with its type, the function that parses a value into it,
/// and the field's [`Flag`] (its `name`, `kind` and `default` first).
macro_rules! flag_table {
    ($(
        $(#[$meta:meta])*
        $field:ident: $ty:ty = $parse:ident(Flag {
            name: $name:literal,
            kind: $kind:expr,
            default: $default:literal,
            $($rest:tt)*
        }),
    )*) => {
        /// Every flag, in the order the help lists them: the modes, then
        /// the options section by section.
        pub(crate) const FLAGS: &[Flag] = &[$(Flag { name: $name, kind: $kind, default: $default, $($rest)* }),*];

        /// The parsed command line. String values stay `OsString` so that
        /// paths with non-UTF-8 bytes survive.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(crate) struct Flags {
            $($(#[$meta])* pub $field: $ty,)*
            /// The flags given on the command line, by name (precedence
            /// over `remora.conf`, see `launch::settings`).
            pub explicit: Vec<&'static str>,
            /// Arguments after the flags (ignored by every mode, as in Go).
            pub rest: Vec<OsString>,
        }

        impl Default for Flags {
            fn default() -> Self {
                Flags {
                    // Every default parses (`every_default_parses`).
                    $($field: $parse(OsStr::new($default)).unwrap_or_default(),)*
                    explicit: Vec::new(),
                    rest: Vec::new(),
                }
            }
        }

        impl Flags {
            /// Sets flag `name` from `value` with the flag grammar; the
            /// error is the reason Go's `flag` package would print.
            /// `remora.conf` values go through here too, so a key and its
            /// flag accept the same text.
            pub(crate) fn set(&mut self, name: &str, value: &OsStr) -> Result<(), String> {
                match name {
                    $($name => self.$field = $parse(value)?,)*
                    _ => return Err("parse error".to_string()),
                }
                Ok(())
            }

            /// The value of flag `name` as text: quoted as Go quotes
            /// strings (for the log), or raw (for the settings file's
            /// format).
            pub(crate) fn text(&self, name: &str, quote: bool) -> String {
                match name {
                    $($name => Value::text(&self.$field, quote),)*
                    _ => String::new(),
                }
            }
        }
    };
}

flag_table! {
    serve: bool = parse_bool(Flag {
        name: "serve",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "start the daemon in the background; prints a banner once the socket accepts",
        listed: Listed::Mode("[-socket PATH] (-token-file FILE | -token-fd N) [OPTION...]"),
        conf: None,
    }),
    bridge: bool = parse_bool(Flag {
        name: "bridge",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "relay stdin/stdout to the daemon's socket (each request carries its own \"auth\")",
        listed: Listed::Mode("[-socket PATH]"),
        conf: None,
    }),
    stop: bool = parse_bool(Flag {
        name: "stop",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "stop the daemon of -socket; prints stopped, none, terminated, killed or survivor (token: CLAUDE_RPC_TOKEN, else daemon.token)",
        listed: Listed::Mode("[-socket PATH]"),
        conf: None,
    }),
    doctor: bool = parse_bool(Flag {
        name: "doctor",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "report this user's srv dirs, running daemons, stale sockets, logind and ccd-cli, each problem with what to do; changes nothing; exit 0 when healthy, 1 when something needs doing",
        listed: Listed::Mode("[-json]"),
        conf: None,
    }),
    install: bool = parse_bool(Flag {
        name: "install",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "make sure the agent CLI is installed; prints one __INSTALL_RESULT__ line, exit 0",
        listed: Listed::Mode(
            "-cli-dir DIR -cli-version VERSION [-cli-url URL -cli-checksum SHA256 | -cli-zst FILE] [-cli-keep N]",
        ),
        conf: None,
    }),
    /// `-probe-cli PATH`; empty = not this mode.
    probe_cli: OsString = os_string(Flag {
        name: "probe-cli",
        kind: Kind::Str,
        default: "",
        value: "PATH",
        usage: "run PATH --version (30s bound): prints nothing if it ran, __CLI_HUNG__ if it was killed at the bound, __CLI_BAD__ if it is missing or failed; with CLAUDE_SSH_MANAGED_LAUNCHER=1 it runs through the host's managed launcher (33s) and prints __CLI_LAUNCHER__ when that launcher is unusable, its settings unreadable, or its run failed (reason on stderr)",
        listed: Listed::Mode("PATH"),
        conf: None,
    }),
    version: bool = parse_bool(Flag {
        name: "version",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "print the build id and time",
        listed: Listed::Mode("[-reference-build SHA]"),
        conf: None,
    }),
    print_config: bool = parse_bool(Flag {
        name: "print-config",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "print the effective settings (flags, remora.conf beside the binary, defaults) with where each came from, and exit",
        listed: Listed::Mode("[-serve OPTION...]"),
        conf: None,
    }),
    socket: OsString = os_string(Flag {
        name: "socket",
        kind: Kind::Str,
        default: "",
        value: "PATH",
        usage: "Unix socket path, at most 107 bytes on Linux (103 on macOS); empty means ~/.claude/remote/rpc.sock",
        listed: Listed::Options(&[Section::Serve, Section::BridgeAndStop]),
        conf: None,
    }),
    token_file: OsString = os_string(Flag {
        name: "token-file",
        kind: Kind::Str,
        default: "",
        value: "FILE",
        usage: "read the token from this file, then delete it",
        listed: Listed::Options(&[Section::Serve]),
        conf: None,
    }),
    /// `-1` (or any negative value) means unset.
    token_fd: i64 = parse_int(Flag {
        name: "token-fd",
        kind: Kind::Int,
        default: "-1",
        value: "N",
        usage: "read the token from this open descriptor, e.g. 0 for stdin",
        listed: Listed::Options(&[Section::Serve]),
        conf: None,
    }),
    keep_children: bool = parse_bool(Flag {
        name: "keep-children",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "leave spawned children running when the daemon stops",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(4),
    }),
    listen_pipe: bool = parse_bool(Flag {
        name: "listen-pipe",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "Windows: also serve on the named pipe \\\\.\\pipe\\remora-<instance id>, named in rpc.pipe beside the socket",
        listed: Listed::Options(&[Section::Serve]),
        conf: None,
    }),
    metrics_addr: OsString = os_string(Flag {
        name: "metrics-addr",
        kind: Kind::Str,
        default: "",
        value: "HOST:PORT",
        usage: "serve Prometheus counters at http://HOST:PORT/metrics (no auth; off when empty)",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(3),
    }),
    replay_dir: OsString = os_string(Flag {
        name: "replay-dir",
        kind: Kind::Str,
        default: "",
        value: "DIR",
        usage: "directory for replay-log segments; empty means $XDG_STATE_HOME/remora/replay, else ~/.local/state/remora/replay",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(1),
    }),
    replay_budget_mb: i64 = parse_int(Flag {
        name: "replay-budget-mb",
        kind: Kind::Int,
        default: "2048",
        value: "MIB",
        usage: "disk budget in MiB for all replay logs together (oldest exited first)",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(2),
    }),
    /// Minutes an exited process stays registered (never negative).
    exited_retention_min: i64 = parse_non_negative(Flag {
        name: "exited-retention-min",
        kind: Kind::Int,
        default: "1440",
        value: "MINUTES",
        usage: "minutes an exited process stays answerable; past 15 only while its whole replay log is kept (-serve)",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(6),
    }),
    /// `-wire-log`; empty = off.
    wire_log: OsString = os_string(Flag {
        name: "wire-log",
        kind: Kind::Str,
        default: "",
        value: "FILE",
        usage: "append every frame of every connection, both ways, to FILE as JSON lines (0600, no link followed, the token and secret-looking env redacted, rotated at 64 MiB as FILE.1 and FILE.2; off when empty)",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(8),
    }),
    /// Bytes of one string the wire log keeps (never negative; 0 = all).
    wire_log_max_string: i64 = parse_non_negative(Flag {
        name: "wire-log-max-string",
        kind: Kind::Int,
        default: "512",
        value: "BYTES",
        usage: "cut strings longer than this in the wire log (stdin and stream data, file bodies); 0 keeps them whole",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(9),
    }),
    /// `-idle-exit-min`; zero (the default) = never.
    idle_exit_min: Minutes = parse_minutes(Flag {
        name: "idle-exit-min",
        kind: Kind::Minutes,
        default: "0",
        value: "MINUTES",
        usage: "stop gracefully after this many minutes with no client connected, no child running and no exited one kept for reattach; decimals allowed (0.5); 0 never stops, as the reference",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(10),
    }),
    cli_dir: OsString = os_string(Flag {
        name: "cli-dir",
        kind: Kind::Str,
        default: "",
        value: "DIR",
        usage: "directory holding the agent CLI versions (required)",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    cli_version: OsString = os_string(Flag {
        name: "cli-version",
        kind: Kind::Str,
        default: "",
        value: "VERSION",
        usage: "agent CLI version to ensure, installed as <cli-dir>/<version> (required)",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    cli_url: OsString = os_string(Flag {
        name: "cli-url",
        kind: Kind::Str,
        default: "",
        value: "URL",
        usage: "URL to download the zstd-compressed CLI from (needs -cli-checksum)",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    cli_checksum: OsString = os_string(Flag {
        name: "cli-checksum",
        kind: Kind::Str,
        default: "",
        value: "SHA256",
        usage: "expected SHA-256 of the CLI blob; always checked for -cli-url, for -cli-zst when given",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    cli_zst: OsString = os_string(Flag {
        name: "cli-zst",
        kind: Kind::Str,
        default: "",
        value: "FILE",
        usage: "local zstd-compressed CLI blob to install (wins over -cli-url; removed once installed)",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    cli_keep: i64 = parse_int(Flag {
        name: "cli-keep",
        kind: Kind::Int,
        default: "3",
        value: "N",
        usage: "how many most recent CLI versions to keep",
        listed: Listed::Options(&[Section::Install]),
        conf: None,
    }),
    /// `-cli-download-timeout`; zero (the default) is no deadline.
    cli_download_timeout: Duration = parse_duration(Flag {
        name: "cli-download-timeout",
        kind: Kind::Duration,
        default: "0s",
        value: "DURATION",
        usage: "give up a -cli-url download not complete within this long, e.g. 10m (-install; 0 = no deadline, as the reference)",
        listed: Listed::Options(&[Section::Install]),
        conf: Some(7),
    }),
    /// `-json` of `-doctor`.
    json: bool = parse_bool(Flag {
        name: "json",
        kind: Kind::Bool,
        default: "false",
        value: "",
        usage: "print the report as one JSON object instead of text",
        listed: Listed::Options(&[Section::Doctor]),
        conf: None,
    }),
    /// `-reference-build`, lower-cased; empty = not set.
    reference_build: String = parse_build_id(Flag {
        name: "reference-build",
        kind: Kind::Str,
        default: "",
        value: "SHA",
        usage: "the reference build this install stands in for (40 or 64 hex digits): -version then prints claude-ssh <sha> (via remora ...), and -serve and -install answer as that build (the newest recorded one when it has no record)",
        listed: Listed::Options(&[Section::Version]),
        conf: Some(0),
    }),
    /// `-log-level`, already checked; `None` = not set.
    log_level: Option<Level> = parse_log_level(Flag {
        name: "log-level",
        kind: Kind::Str,
        default: "",
        value: "LEVEL",
        usage: "log threshold: debug, info, warn or error; empty means REMORA_LOG_LEVEL, else debug",
        listed: Listed::Options(&[Section::EveryMode]),
        conf: Some(5),
    }),
}

/// How a flag's value reads back as text (the settings report).
trait Value {
    /// `quote`: as Go's `%q` would print a string.
    fn text(&self, quote: bool) -> String;
}

impl Value for bool {
    fn text(&self, _quote: bool) -> String {
        self.to_string()
    }
}

impl Value for i64 {
    fn text(&self, _quote: bool) -> String {
        self.to_string()
    }
}

impl Value for OsString {
    fn text(&self, quote: bool) -> String {
        if quote {
            go_quote(self.as_encoded_bytes())
        } else {
            self.to_string_lossy().into_owned()
        }
    }
}

impl Value for String {
    fn text(&self, quote: bool) -> String {
        OsString::from(self).text(quote)
    }
}

impl Value for Duration {
    fn text(&self, _quote: bool) -> String {
        crate::base::goduration::text(*self)
    }
}

impl Value for Minutes {
    fn text(&self, _quote: bool) -> String {
        self.text.clone()
    }
}

/// The effective level: unset is `debug`.
impl Value for Option<Level> {
    fn text(&self, _quote: bool) -> String {
        self.unwrap_or(Level::Debug).name().to_string()
    }
}

/// A string value, as given.
fn os_string(value: &OsStr) -> Result<OsString, String> {
    Ok(value.to_os_string())
}

/// A Go duration as `flag.Duration` takes it (every failure is `parse
/// error`); a negative one means no deadline, like zero.
fn parse_duration(value: &OsStr) -> Result<Duration, String> {
    let ns = crate::base::goduration::parse(&value.to_string_lossy()).map_err(|_| "parse error".to_string())?;
    Ok(Duration::from_nanos(u64::try_from(ns).unwrap_or(0)))
}

/// A number of minutes as `-idle-exit-min` takes it: decimal digits with
/// an optional fraction (`90`, `0.5`, `0.02`), no sign or exponent; at
/// most 7 digits before the point (19 years) and 9 after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Minutes {
    /// As given (what the settings report prints back).
    pub text: String,
    /// Zero = off.
    pub duration: Duration,
}

fn parse_minutes(value: &OsStr) -> Result<Minutes, String> {
    let text = value.to_string_lossy().trim().to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 7 || fraction.len() > 9 || !digits(whole) || !digits(fraction) {
        return Err("want minutes: digits with an optional decimal fraction, e.g. 30 or 0.5".to_string());
    }
    if text.ends_with('.') {
        return Err("want minutes: digits with an optional decimal fraction, e.g. 30 or 0.5".to_string());
    }
    const MINUTE_NS: u128 = 60_000_000_000;
    let whole: u128 = whole.parse().unwrap_or(0);
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().unwrap_or(0)
    };
    let ns = whole * MINUTE_NS + fraction * MINUTE_NS / scale;
    Ok(Minutes {
        text,
        duration: Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)),
    })
}

/// A count (of minutes, of bytes): an integer, never negative.
fn parse_non_negative(value: &OsStr) -> Result<i64, String> {
    let minutes = parse_int(value)?;
    if minutes < 0 {
        return Err("parse error".to_string());
    }
    Ok(minutes)
}

/// A `-log-level` value: one of the level names (case-insensitive).
fn parse_log_level(value: &OsStr) -> Result<Option<Level>, String> {
    let text = value.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(None);
    }
    Level::parse(&text)
        .map(Some)
        .ok_or_else(|| "want debug, info, warn or error".to_string())
}

/// A `-reference-build` value: a git commit id of 40 (SHA-1) or 64
/// (SHA-256) hex digits, lower-cased; empty unsets it.
fn parse_build_id(value: &OsStr) -> Result<String, String> {
    let bytes = value.as_encoded_bytes();
    if bytes.is_empty() {
        return Ok(String::new());
    }
    if (bytes.len() == 40 || bytes.len() == 64) && bytes.iter().all(u8::is_ascii_hexdigit) {
        return Ok(String::from_utf8_lossy(bytes).to_ascii_lowercase());
    }
    Err("want a commit id of 40 or 64 hex digits".to_string())
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_bool(value: &OsStr) -> Result<bool, String> {
    match value.as_encoded_bytes() {
        b"1" | b"t" | b"T" | b"TRUE" | b"true" | b"True" => Ok(true),
        b"0" | b"f" | b"F" | b"FALSE" | b"false" | b"False" => Ok(false),
        _ => Err("parse error".to_string()),
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` as the `flag` package reports it:
/// base prefixes (`0x`, `0o`, `0b`, a leading `0` for octal), `_` digit
/// separators, and the errors "parse error" / "value out of range".
fn parse_int(value: &OsStr) -> Result<i64, String> {
    const SYNTAX: &str = "parse error";
    const RANGE: &str = "value out of range";
    let s = value.as_encoded_bytes();
    let (negative, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return Err(SYNTAX.to_string());
    }
    let (base, digits): (u32, &[u8]) = if body[0] == b'0' && body.len() >= 3 {
        match body[1].to_ascii_lowercase() {
            b'b' => (2, &body[2..]),
            b'o' => (8, &body[2..]),
            b'x' => (16, &body[2..]),
            _ => (8, &body[1..]),
        }
    } else if body[0] == b'0' {
        (8, &body[1..])
    } else {
        (10, body)
    };
    let mut magnitude: u64 = 0;
    let mut underscores = false;
    for &c in digits {
        if c == b'_' {
            underscores = true;
            continue;
        }
        let digit = match (c as char).to_digit(36) {
            Some(d) if d < base => d,
            _ => return Err(SYNTAX.to_string()),
        };
        magnitude = match magnitude
            .checked_mul(u64::from(base))
            .and_then(|m| m.checked_add(u64::from(digit)))
        {
            Some(m) => m,
            None => return Err(RANGE.to_string()),
        };
    }
    if underscores && !underscore_ok(s) {
        return Err(SYNTAX.to_string());
    }
    const LIMIT: u64 = 1 << 63;
    if negative {
        if magnitude > LIMIT {
            return Err(RANGE.to_string());
        }
        Ok((magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).map_err(|_| RANGE.to_string())
    }
}

/// Go's `underscoreOK`: underscores only between digits (a base prefix
/// counts as a digit).
fn underscore_ok(s: &[u8]) -> bool {
    let mut s = s;
    if let Some(b'-' | b'+') = s.first() {
        s = &s[1..];
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(s[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = s[1].eq_ignore_ascii_case(&b'x');
    }
    while i < s.len() {
        let c = s[i];
        i += 1;
        if c.is_ascii_digit() || (hex && c.to_ascii_lowercase().is_ascii_hexdigit()) {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// [`FLAGS`] and one more flag no code knows: an integer option of
/// `-serve` that `remora.conf` may set, last in the report. What derives
/// from the table shows it; what keeps a list of its own would not.
#[cfg(test)]
pub(crate) fn planted() -> Vec<Flag> {
    let mut table = FLAGS.to_vec();
    let ranks = FLAGS.iter().filter(|f| f.conf.is_some()).count();
    table.push(Flag {
        name: "planted-knob",
        kind: Kind::Int,
        default: "5",
        value: "N",
        usage: "a flag only the table knows",
        listed: Listed::Options(&[Section::Serve]),
        conf: Some(u8::try_from(ranks).unwrap_or(u8::MAX)),
    });
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses() {
        for flag in FLAGS {
            let mut flags = Flags::default();
            assert_eq!(flags.set(flag.name, OsStr::new(flag.default)), Ok(()), "{}", flag.name);
            assert_eq!(flags, Flags::default(), "{}", flag.name);
        }
        let flags = Flags::default();
        assert_eq!(
            (flags.token_fd, flags.replay_budget_mb, flags.exited_retention_min),
            (-1, 2048, 1440)
        );
        assert_eq!(
            (flags.cli_keep, flags.cli_download_timeout, flags.log_level),
            (3, Duration::ZERO, None)
        );
    }

    #[test]
    fn one_entry_per_name_and_a_value_word_for_every_value_flag() {
        let mut names: Vec<&str> = FLAGS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FLAGS.len());
        for flag in FLAGS {
            assert_eq!(flag.takes_value(), !flag.value.is_empty(), "{}", flag.name);
            if let Listed::Mode(_) = flag.listed {
                assert!(flag.conf.is_none(), "{}: a mode is the driver's", flag.name);
            }
        }
    }

    #[test]
    fn the_settings_ranks_count_from_zero() {
        let mut ranks: Vec<u8> = FLAGS.iter().filter_map(|f| f.conf).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..ranks.len() as u8).collect::<Vec<_>>());
    }

    #[test]
    fn go_int_syntax() {
        // SAFETY: every input below is whole ASCII or UTF-8 text, which is
        // valid encoded OsStr bytes on every platform.
        let parse_int = |s: &[u8]| super::parse_int(unsafe { OsStr::from_encoded_bytes_unchecked(s) });
        let ok = |s: &str| parse_int(s.as_bytes()).unwrap();
        assert_eq!(ok("3"), 3);
        assert_eq!(ok("-7"), -7);
        assert_eq!(ok("+7"), 7);
        assert_eq!(ok("0x10"), 16);
        assert_eq!(ok("0o17"), 15);
        assert_eq!(ok("017"), 15);
        assert_eq!(ok("0b101"), 5);
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("1_000"), 1000);
        assert_eq!(ok("-9223372036854775808"), i64::MIN);
        assert_eq!(ok("9223372036854775807"), i64::MAX);
        for bad in ["", "-", "x", "1.5", "08", "0x", "1__0", "_1", "1_", "0x_", " 1"] {
            assert_eq!(parse_int(bad.as_bytes()), Err("parse error".into()), "{bad:?}");
        }
        assert_eq!(parse_int(b"9223372036854775808"), Err("value out of range".into()));
        assert_eq!(parse_int(b"-9223372036854775809"), Err("value out of range".into()));
    }

    #[test]
    fn minutes_take_a_decimal_fraction() {
        let minutes = |s: &str| parse_minutes(OsStr::new(s)).map(|m| m.duration);
        assert_eq!(minutes("0"), Ok(Duration::ZERO));
        assert_eq!(minutes("30"), Ok(Duration::from_secs(1800)));
        assert_eq!(minutes("0.5"), Ok(Duration::from_secs(30)));
        assert_eq!(minutes("0.02"), Ok(Duration::from_millis(1200)));
        assert_eq!(minutes(" 2 "), Ok(Duration::from_secs(120)));
        for bad in [
            "",
            ".5",
            "1.",
            "-1",
            "+1",
            "1e3",
            "1m",
            "0x10",
            "12345678",
            "0.1234567890",
            "1.2.3",
        ] {
            assert!(minutes(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_minutes(OsStr::new("0.25")).unwrap().text, "0.25");
    }
}
