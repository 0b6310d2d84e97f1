//! The command-line flags, parsed with Go's `flag` package semantics.
//!
//! The reference is a Go program using `flag.Parse` with `ExitOnError`, and
//! drivers invoke it with either one or two dashes, `-name value` or
//! `-name=value`. This module reproduces that grammar and its messages
//! byte for byte:
//!
//! - `-x` and `--x` are the same flag; `--` ends the flags, and so does the
//!   first argument that is not a flag (`-` alone is not a flag).
//! - Booleans take no separate value (`-serve`, `-serve=false`); string and
//!   int flags take `=value` or the next argument, whatever it looks like.
//! - Errors are one line (`flag provided but not defined: -x`, …) followed
//!   by the synopsis of the modes; `-h` / `-help` print only the help.
//! - The help is remora's own (Go's `PrintDefaults` lists flags
//!   alphabetically, modes among options): a synopsis of each mode, then
//!   the options of each mode. Both go to stderr, as Go's do.
//!
//! Mode selection and what the values mean live in [`crate::launch::cli`].

use crate::base::goerr::go_quote;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// The value type of a flag, which decides how it parses and how the usage
/// line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Str,
    Int,
    /// Go's `flag.Duration` ([`crate::base::goduration`]).
    Duration,
}

struct Spec {
    name: &'static str,
    kind: Kind,
    /// The default as Go's `DefValue` prints it.
    default: &'static str,
    usage: &'static str,
}

/// Every flag, sorted by name (the order `PrintDefaults` uses).
const SPECS: &[Spec] = &[
    Spec {
        name: "bridge",
        kind: Kind::Bool,
        default: "false",
        usage: "relay stdin/stdout to the daemon's socket (each request carries its own \"auth\")",
    },
    Spec {
        name: "cli-checksum",
        kind: Kind::Str,
        default: "",
        usage: "expected SHA-256 of the CLI blob; always checked for -cli-url, for -cli-zst when given",
    },
    Spec {
        name: "cli-dir",
        kind: Kind::Str,
        default: "",
        usage: "directory holding the agent CLI versions (required)",
    },
    Spec {
        name: "cli-download-timeout",
        kind: Kind::Duration,
        default: "0s",
        usage: "give up a -cli-url download not complete within this long, e.g. 10m (-install; 0 = no deadline, as the reference)",
    },
    Spec {
        name: "cli-keep",
        kind: Kind::Int,
        default: "3",
        usage: "how many most recent CLI versions to keep",
    },
    Spec {
        name: "cli-url",
        kind: Kind::Str,
        default: "",
        usage: "URL to download the zstd-compressed CLI from (needs -cli-checksum)",
    },
    Spec {
        name: "cli-version",
        kind: Kind::Str,
        default: "",
        usage: "agent CLI version to ensure, installed as <cli-dir>/<version> (required)",
    },
    Spec {
        name: "cli-zst",
        kind: Kind::Str,
        default: "",
        usage: "local zstd-compressed CLI blob to install (wins over -cli-url; removed once installed)",
    },
    Spec {
        name: "exited-retention-min",
        kind: Kind::Int,
        default: "1440",
        usage: "minutes an exited process stays answerable; past 15 only while its whole replay log is kept (-serve)",
    },
    Spec {
        name: "install",
        kind: Kind::Bool,
        default: "false",
        usage: "make sure the agent CLI is installed; prints one __INSTALL_RESULT__ line, exit 0",
    },
    Spec {
        name: "keep-children",
        kind: Kind::Bool,
        default: "false",
        usage: "leave spawned children running when the daemon stops",
    },
    Spec {
        name: "log-level",
        kind: Kind::Str,
        default: "",
        usage: "log threshold: debug, info, warn or error; empty means REMORA_LOG_LEVEL, else debug",
    },
    Spec {
        name: "metrics-addr",
        kind: Kind::Str,
        default: "",
        usage: "serve Prometheus counters at http://HOST:PORT/metrics (no auth; off when empty)",
    },
    Spec {
        name: "print-config",
        kind: Kind::Bool,
        default: "false",
        usage: "print the effective settings (flags, remora.conf beside the binary, defaults) with where each came from, and exit",
    },
    Spec {
        name: "probe-cli",
        kind: Kind::Str,
        default: "",
        usage: "run PATH --version (30s bound): prints nothing if it ran, __CLI_HUNG__ if it was killed at the bound, __CLI_BAD__ if it is missing or failed",
    },
    Spec {
        name: "reference-build",
        kind: Kind::Str,
        default: "",
        usage: "the reference build this install stands in for (40 or 64 hex digits): -version then prints claude-ssh <sha> (via remora ...)",
    },
    Spec {
        name: "replay-budget-mb",
        kind: Kind::Int,
        default: "2048",
        usage: "disk budget in MiB for all replay logs together (oldest exited first)",
    },
    Spec {
        name: "replay-dir",
        kind: Kind::Str,
        default: "",
        usage: "directory for replay-log segments; empty means $XDG_STATE_HOME/remora/replay, else ~/.local/state/remora/replay",
    },
    Spec {
        name: "serve",
        kind: Kind::Bool,
        default: "false",
        usage: "start the daemon in the background; prints a banner once the socket accepts",
    },
    Spec {
        name: "socket",
        kind: Kind::Str,
        default: "",
        usage: "Unix socket path, at most 107 bytes on Linux (103 on macOS); empty means ~/.claude/remote/rpc.sock",
    },
    Spec {
        name: "stop",
        kind: Kind::Bool,
        default: "false",
        usage: "stop the daemon of -socket; prints stopped, none, terminated, killed or survivor (token: CLAUDE_RPC_TOKEN, else daemon.token)",
    },
    Spec {
        name: "token-fd",
        kind: Kind::Int,
        default: "-1",
        usage: "read the token from this open descriptor, e.g. 0 for stdin",
    },
    Spec {
        name: "token-file",
        kind: Kind::Str,
        default: "",
        usage: "read the token from this file, then delete it",
    },
    Spec {
        name: "version",
        kind: Kind::Bool,
        default: "false",
        usage: "print the build id and time",
    },
];

/// The parsed command line. String values stay `OsString` so that paths
/// with non-UTF-8 bytes survive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Flags {
    pub serve: bool,
    pub bridge: bool,
    pub stop: bool,
    pub version: bool,
    pub install: bool,
    pub print_config: bool,
    /// `-probe-cli PATH`; empty = not this mode.
    pub probe_cli: OsString,
    pub socket: OsString,
    pub token_file: OsString,
    /// `-1` (or any negative value) means unset.
    pub token_fd: i64,
    pub metrics_addr: OsString,
    pub keep_children: bool,
    pub replay_dir: OsString,
    pub replay_budget_mb: i64,
    /// Minutes an exited process stays registered (never negative).
    pub exited_retention_min: i64,
    pub cli_dir: OsString,
    pub cli_version: OsString,
    pub cli_url: OsString,
    pub cli_checksum: OsString,
    pub cli_zst: OsString,
    pub cli_keep: i64,
    /// `-cli-download-timeout`; zero (the default) is no deadline.
    pub cli_download_timeout: std::time::Duration,
    /// `-log-level`, already checked; `None` = not set.
    pub log_level: Option<crate::base::logging::Level>,
    /// `-reference-build`, lower-cased; empty = not set.
    pub reference_build: String,
    /// The flags given on the command line, by name (precedence over
    /// `remora.conf`, see [`crate::settings`]).
    pub explicit: Vec<&'static str>,
    /// Arguments after the flags (ignored by every mode, as in Go).
    pub rest: Vec<OsString>,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            serve: false,
            bridge: false,
            stop: false,
            version: false,
            install: false,
            print_config: false,
            probe_cli: OsString::new(),
            socket: OsString::new(),
            token_file: OsString::new(),
            token_fd: -1,
            metrics_addr: OsString::new(),
            keep_children: false,
            replay_dir: OsString::new(),
            replay_budget_mb: 2048,
            exited_retention_min: 1440,
            cli_dir: OsString::new(),
            cli_version: OsString::new(),
            cli_url: OsString::new(),
            cli_checksum: OsString::new(),
            cli_zst: OsString::new(),
            cli_keep: 3,
            cli_download_timeout: std::time::Duration::ZERO,
            log_level: None,
            reference_build: String::new(),
            explicit: Vec::new(),
            rest: Vec::new(),
        }
    }
}

/// Why parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// `-h` or `-help`: print the usage, exit 0.
    Help,
    /// Print this line, then the usage; exit 2.
    Invalid(String),
}

impl Flags {
    /// Sets flag `name` from `value` with the flag grammar; the error is
    /// the reason Go's `flag` package would print. `remora.conf` values go
    /// through here too, so a key and its flag accept the same text.
    pub(crate) fn set(&mut self, name: &str, value: &OsStr) -> Result<(), String> {
        let text = || value.to_os_string();
        match name {
            "bridge" => self.bridge = parse_bool(value)?,
            "install" => self.install = parse_bool(value)?,
            "print-config" => self.print_config = parse_bool(value)?,
            "keep-children" => self.keep_children = parse_bool(value)?,
            "serve" => self.serve = parse_bool(value)?,
            "stop" => self.stop = parse_bool(value)?,
            "version" => self.version = parse_bool(value)?,
            "cli-keep" => self.cli_keep = parse_int(value.as_bytes())?,
            "cli-download-timeout" => self.cli_download_timeout = parse_duration(value)?,
            "token-fd" => self.token_fd = parse_int(value.as_bytes())?,
            "replay-budget-mb" => self.replay_budget_mb = parse_int(value.as_bytes())?,
            "exited-retention-min" => {
                let minutes = parse_int(value.as_bytes())?;
                if minutes < 0 {
                    return Err("parse error".to_string());
                }
                self.exited_retention_min = minutes;
            }
            "replay-dir" => self.replay_dir = text(),
            "cli-checksum" => self.cli_checksum = text(),
            "cli-dir" => self.cli_dir = text(),
            "cli-url" => self.cli_url = text(),
            "cli-version" => self.cli_version = text(),
            "cli-zst" => self.cli_zst = text(),
            "metrics-addr" => self.metrics_addr = text(),
            "log-level" => self.log_level = parse_log_level(value)?,
            "reference-build" => self.reference_build = parse_build_id(value)?,
            "probe-cli" => self.probe_cli = text(),
            "socket" => self.socket = text(),
            "token-file" => self.token_file = text(),
            // Every name reaching here comes from SPECS.
            _ => return Err("parse error".to_string()),
        }
        Ok(())
    }
}

/// Parses the arguments after `argv[0]` the way Go's `FlagSet.Parse` does.
pub(crate) fn parse(args: &[OsString]) -> Result<Flags, ParseError> {
    let mut flags = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        if arg.len() < 2 || arg[0] != b'-' {
            break;
        }
        let mut dashes = 1;
        if arg[1] == b'-' {
            dashes = 2;
            if arg.len() == 2 {
                // "--" ends the flags and is consumed.
                i += 1;
                break;
            }
        }
        let body = &arg[dashes..];
        if body.is_empty() || body[0] == b'-' || body[0] == b'=' {
            return Err(ParseError::Invalid(format!("bad flag syntax: {}", lossy(arg))));
        }
        i += 1;
        // The value starts after the first '=' (never the first byte).
        let (name, inline) = match body.iter().position(|&b| b == b'=') {
            Some(eq) => (&body[..eq], Some(OsStr::from_bytes(&body[eq + 1..]))),
            None => (body, None),
        };
        let name_text = lossy(name);
        let Some(spec) = SPECS.iter().find(|s| s.name.as_bytes() == name) else {
            if name == b"help" || name == b"h" {
                return Err(ParseError::Help);
            }
            return Err(ParseError::Invalid(format!(
                "flag provided but not defined: -{name_text}"
            )));
        };
        if spec.kind == Kind::Bool {
            let value = inline.unwrap_or(OsStr::new("true"));
            if flags.set(spec.name, value).is_err() {
                return Err(ParseError::Invalid(format!(
                    "invalid boolean value {} for -{name_text}: parse error",
                    go_quote(value.as_bytes())
                )));
            }
            flags.explicit.push(spec.name);
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match args.get(i) {
                Some(next) => {
                    i += 1;
                    next.as_os_str()
                }
                None => return Err(ParseError::Invalid(format!("flag needs an argument: -{name_text}"))),
            },
        };
        if let Err(why) = flags.set(spec.name, value) {
            return Err(ParseError::Invalid(format!(
                "invalid value {} for flag -{name_text}: {why}",
                go_quote(value.as_bytes())
            )));
        }
        flags.explicit.push(spec.name);
    }
    flags.rest = args[i..].to_vec();
    Ok(flags)
}

/// The modes in the order the help lists them, each with its synopsis
/// (what follows `remora -<mode>`).
const MODES: &[(&str, &str)] = &[
    ("serve", "[-socket PATH] (-token-file FILE | -token-fd N) [OPTION...]"),
    ("bridge", "[-socket PATH]"),
    ("stop", "[-socket PATH]"),
    (
        "install",
        "-cli-dir DIR -cli-version VERSION [-cli-url URL -cli-checksum SHA256 | -cli-zst FILE] [-cli-keep N]",
    ),
    ("probe-cli", "PATH"),
    ("version", "[-reference-build SHA]"),
    ("print-config", "[-serve OPTION...]"),
];

/// The options of each mode, in the order the help lists them. A flag in
/// no mode and not a mode itself is listed under "Other options".
const OPTIONS: &[(&str, &[&str])] = &[
    (
        "-serve",
        &[
            "socket",
            "token-file",
            "token-fd",
            "keep-children",
            "metrics-addr",
            "replay-dir",
            "replay-budget-mb",
            "exited-retention-min",
        ],
    ),
    ("-bridge and -stop", &["socket"]),
    (
        "-install",
        &[
            "cli-dir",
            "cli-version",
            "cli-url",
            "cli-checksum",
            "cli-zst",
            "cli-keep",
            "cli-download-timeout",
        ],
    ),
    ("-version", &["reference-build"]),
    ("every mode", &["log-level"]),
];

/// What the help shows after a flag that takes a value.
fn placeholder(spec: &Spec) -> &'static str {
    match (spec.name, spec.kind) {
        (_, Kind::Bool) => "",
        ("socket" | "probe-cli", _) => "PATH",
        ("token-file" | "cli-zst", _) => "FILE",
        ("metrics-addr", _) => "HOST:PORT",
        ("replay-dir" | "cli-dir", _) => "DIR",
        ("replay-budget-mb", _) => "MIB",
        ("exited-retention-min", _) => "MINUTES",
        ("cli-version", _) => "VERSION",
        ("cli-url", _) => "URL",
        ("cli-checksum", _) => "SHA256",
        ("reference-build", _) => "SHA",
        ("log-level", _) => "LEVEL",
        (_, Kind::Int) => "N",
        (_, Kind::Duration) => "DURATION",
        (_, Kind::Str) => "VALUE",
    }
}

fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The program's name as the operator typed it, without its directory.
fn program(argv0: &str) -> &str {
    argv0.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("remora")
}

/// `text` wrapped at 80 columns, every line indented by `indent` spaces
/// except the first, which the caller has already started.
fn wrapped(text: &str, indent: usize, mut column: usize) -> String {
    let mut out = String::new();
    for word in text.split(' ') {
        if column > indent && column + 1 + word.len() > 80 {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else if column > indent {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    out
}

/// The synopsis of every mode: what `-h` starts with and what follows a
/// flag error.
fn synopsis(argv0: &str) -> String {
    let name = program(argv0);
    let mut out = format!("Usage: {name} MODE [OPTION...]   (one mode per run)\n\n");
    for (mode, args) in MODES {
        let head = format!("  {name} -{mode}");
        out.push_str(&head);
        if !args.is_empty() {
            out.push_str(&wrapped(args, 8, head.len()));
        }
        out.push('\n');
        if let Some(spec) = spec(mode) {
            out.push_str("      ");
            out.push_str(&wrapped(spec.usage, 6, 6));
            out.push('\n');
        }
    }
    out
}

/// One option's lines: `  -name VALUE` padded to a column, then its
/// description and any non-zero default.
fn option_line(spec: &Spec) -> String {
    let head = format!("  -{} {}", spec.name, placeholder(spec));
    let head = head.trim_end();
    let mut text = spec.usage.to_string();
    let zero = match spec.kind {
        Kind::Bool => "false",
        Kind::Str => "",
        Kind::Int => "0",
        Kind::Duration => "0s",
    };
    if spec.default != zero && spec.default != "-1" {
        text.push_str(&format!(" (default {})", spec.default));
    }
    const COLUMN: usize = 26;
    if head.len() + 2 > COLUMN {
        format!("{head}\n{}{}\n", " ".repeat(COLUMN), wrapped(&text, COLUMN, COLUMN))
    } else {
        format!("{head:<COLUMN$}{}\n", wrapped(&text, COLUMN, COLUMN))
    }
}

/// The `-h` text: the synopsis of every mode, then the options of each
/// mode (a flag in none of them under "Other options"), then how flags
/// are written. Printed on stderr, as Go's `flag` does.
pub(crate) fn usage(argv0: &str) -> String {
    let mut out = synopsis(argv0);
    let mut listed: Vec<&str> = MODES.iter().map(|(m, _)| *m).collect();
    for (title, names) in OPTIONS {
        out.push_str(&format!("\nOptions of {title}:\n"));
        for name in *names {
            if let Some(spec) = spec(name) {
                out.push_str(&option_line(spec));
            }
            listed.push(name);
        }
    }
    let others: Vec<&Spec> = SPECS.iter().filter(|s| !listed.contains(&s.name)).collect();
    if !others.is_empty() {
        out.push_str("\nOther options:\n");
        for spec in others {
            out.push_str(&option_line(spec));
        }
    }
    out.push_str(concat!(
        "\nFlags take one dash or two (-serve, --serve); a value follows as -flag VALUE\n",
        "or -flag=VALUE. Environment: CLAUDE_RPC_TOKEN (the token for -stop),\n",
        "REMORA_LOG_LEVEL=debug|info|warn|error (the daemon's log). The protocol:\n",
        "docs/PROTOCOL.md in the source repository.\n",
    ));
    out
}

/// What follows a flag error: the synopsis, and where the rest is.
pub(crate) fn usage_after_error(argv0: &str) -> String {
    format!(
        "{}\nRun {} -h for the options of each mode.\n",
        synopsis(argv0),
        program(argv0)
    )
}

/// A Go duration as `flag.Duration` takes it (every failure is `parse
/// error`); a negative one means no deadline, like zero.
fn parse_duration(value: &OsStr) -> Result<std::time::Duration, String> {
    let ns = crate::base::goduration::parse(&value.to_string_lossy()).map_err(|_| "parse error".to_string())?;
    Ok(std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(0)))
}

/// A `-log-level` value: one of the level names (case-insensitive).
fn parse_log_level(value: &OsStr) -> Result<Option<crate::base::logging::Level>, String> {
    let text = value.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(None);
    }
    crate::base::logging::Level::parse(&text)
        .map(Some)
        .ok_or_else(|| "want debug, info, warn or error".to_string())
}

/// A `-reference-build` value: a git commit id of 40 (SHA-1) or 64
/// (SHA-256) hex digits, lower-cased; empty unsets it.
fn parse_build_id(value: &OsStr) -> Result<String, String> {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return Ok(String::new());
    }
    if (bytes.len() == 40 || bytes.len() == 64) && bytes.iter().all(u8::is_ascii_hexdigit) {
        return Ok(String::from_utf8_lossy(bytes).to_ascii_lowercase());
    }
    Err("want a commit id of 40 or 64 hex digits".to_string())
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &OsStr) -> Result<bool, String> {
    match value.as_bytes() {
        b"1" | b"t" | b"T" | b"TRUE" | b"true" | b"True" => Ok(true),
        b"0" | b"f" | b"F" | b"FALSE" | b"false" | b"False" => Ok(false),
        _ => Err("parse error".to_string()),
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` as the `flag` package reports it:
/// base prefixes (`0x`, `0o`, `0b`, a leading `0` for octal), `_` digit
/// separators, and the errors "parse error" / "value out of range".
fn parse_int(s: &[u8]) -> Result<i64, String> {
    const SYNTAX: &str = "parse error";
    const RANGE: &str = "value out of range";
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn invalid(list: &[&str]) -> String {
        match parse(&args(list)) {
            Err(ParseError::Invalid(m)) => m,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn one_or_two_dashes_and_inline_values() {
        let f = parse(&args(&["--serve", "-socket=/a", "--token-file", "/t", "-token-fd=0"])).unwrap();
        assert!(f.serve);
        assert_eq!(f.socket, "/a");
        assert_eq!(f.token_file, "/t");
        assert_eq!(f.token_fd, 0);
        let f = parse(&args(&["-serve=false", "--socket=/b=c"])).unwrap();
        assert!(!f.serve);
        assert_eq!(f.socket, "/b=c");
    }

    #[test]
    fn parsing_stops_at_non_flags_and_double_dash() {
        let f = parse(&args(&["-serve", "x", "-stop"])).unwrap();
        assert!(f.serve && !f.stop);
        assert_eq!(f.rest, args(&["x", "-stop"]));
        let f = parse(&args(&["-serve", "--", "-stop"])).unwrap();
        assert!(!f.stop);
        assert_eq!(f.rest, args(&["-stop"]));
        let f = parse(&args(&["-", "-stop"])).unwrap();
        assert!(!f.stop);
        // A bool flag never takes the next argument as its value.
        let f = parse(&args(&["-serve", "false"])).unwrap();
        assert!(f.serve);
        // A string flag takes the next argument whatever it looks like.
        let f = parse(&args(&["-socket", "-stop"])).unwrap();
        assert_eq!(f.socket, "-stop");
        assert!(!f.stop);
        let f = parse(&args(&["-token-fd", "-1"])).unwrap();
        assert_eq!(f.token_fd, -1);
    }

    #[test]
    fn go_error_messages() {
        assert_eq!(invalid(&["-bogus"]), "flag provided but not defined: -bogus");
        assert_eq!(invalid(&["--bogus=1"]), "flag provided but not defined: -bogus");
        assert_eq!(invalid(&["-socket"]), "flag needs an argument: -socket");
        assert_eq!(
            invalid(&["-serve=x"]),
            "invalid boolean value \"x\" for -serve: parse error"
        );
        assert_eq!(
            invalid(&["-serve="]),
            "invalid boolean value \"\" for -serve: parse error"
        );
        assert_eq!(
            invalid(&["-cli-keep", "x"]),
            "invalid value \"x\" for flag -cli-keep: parse error"
        );
        assert_eq!(
            invalid(&["-cli-keep=99999999999999999999"]),
            "invalid value \"99999999999999999999\" for flag -cli-keep: value out of range"
        );
        assert_eq!(invalid(&["---x"]), "bad flag syntax: ---x");
        assert_eq!(invalid(&["-=x"]), "bad flag syntax: -=x");
        assert_eq!(parse(&args(&["-h"])), Err(ParseError::Help));
        assert_eq!(parse(&args(&["--help"])), Err(ParseError::Help));
        assert_eq!(parse(&args(&["-help=1"])), Err(ParseError::Help));
    }

    #[test]
    fn go_int_syntax() {
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
    fn help_lists_modes_then_each_modes_options() {
        let u = usage("/usr/local/bin/remora");
        assert!(u.starts_with("Usage: remora MODE [OPTION...]"), "{u}");
        let serve = u.find("  remora -serve [-socket PATH]").unwrap();
        let options = u.find("\nOptions of -serve:\n").unwrap();
        assert!(serve < options, "{u}");
        assert!(
            u.contains("\n  -cli-keep N             how many most recent CLI versions to keep (default 3)\n"),
            "{u}"
        );
        assert!(u.contains("\n  -replay-budget-mb MIB   "), "{u}");
        // Every flag is described, as a mode or as an option.
        for spec in SPECS {
            let named = [format!("-{} ", spec.name), format!("-{}\n", spec.name)];
            assert!(
                named.iter().any(|n| u.contains(n.as_str())),
                "{} missing from {u}",
                spec.name
            );
        }
        assert!(!u.contains("Other options"), "{u}");
        for line in u.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
        let short = usage_after_error("remora");
        assert!(
            short.starts_with("Usage: remora MODE") && short.ends_with("Run remora -h for the options of each mode.\n")
        );
        let names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    #[test]
    fn the_run_lock_skips_the_value_of_every_value_flag() {
        // (`-socket` is the one value the lock reads rather than skips.)
        let mut value_flags: Vec<&str> = SPECS
            .iter()
            .filter(|s| s.kind != Kind::Bool && s.name != "socket")
            .map(|s| s.name)
            .collect();
        let mut listed = crate::rundir::runlock::VALUE_FLAGS.to_vec();
        value_flags.sort_unstable();
        listed.sort_unstable();
        assert_eq!(value_flags, listed);
    }
}
