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
//!   by the usage text; `-h` / `-help` print only the usage.
//! - The usage text is `Usage of <argv0>:` and then, sorted by name, Go's
//!   `PrintDefaults` layout.
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
        usage: "relay stdin/stdout to the daemon's socket (the client supplies auth)",
    },
    Spec {
        name: "cli-checksum",
        kind: Kind::Str,
        default: "",
        usage: "expected SHA-256 of the CLI blob (-install)",
    },
    Spec {
        name: "cli-dir",
        kind: Kind::Str,
        default: "",
        usage: "directory holding the agent CLI versions (-install)",
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
        usage: "how many most recent CLI versions to keep (-install)",
    },
    Spec {
        name: "cli-url",
        kind: Kind::Str,
        default: "",
        usage: "URL to download the CLI blob from (-install)",
    },
    Spec {
        name: "cli-version",
        kind: Kind::Str,
        default: "",
        usage: "agent CLI version to ensure (-install)",
    },
    Spec {
        name: "cli-zst",
        kind: Kind::Str,
        default: "",
        usage: "local zstd-compressed CLI blob to install (-install)",
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
        usage: "ensure the agent CLI is installed, then print one __INSTALL_RESULT__ line",
    },
    Spec {
        name: "keep-children",
        kind: Kind::Bool,
        default: "false",
        usage: "leave spawned children running across a graceful shutdown (-serve)",
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
        usage: "serve Prometheus counters at http://ADDR/metrics (-serve; off when empty)",
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
        usage: "run PATH --version (30s bound) and exit 0, printing nothing if it ran, __CLI_HUNG__ if it was killed at the bound, __CLI_BAD__ if it is missing or failed",
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
        usage: "disk budget in MiB for all replay logs together (-serve)",
    },
    Spec {
        name: "replay-dir",
        kind: Kind::Str,
        default: "",
        usage: "directory for replay-log segments; empty means ~/.local/state/remora/replay (-serve)",
    },
    Spec {
        name: "serve",
        kind: Kind::Bool,
        default: "false",
        usage: "run the daemon in the background; prints a banner once the socket accepts",
    },
    Spec {
        name: "socket",
        kind: Kind::Str,
        default: "",
        usage: "Unix socket path; empty means ~/.claude/remote/rpc.sock",
    },
    Spec {
        name: "stop",
        kind: Kind::Bool,
        default: "false",
        usage: "stop the daemon on -socket and print what happened (auth from CLAUDE_RPC_TOKEN, else daemon.token)",
    },
    Spec {
        name: "token-fd",
        kind: Kind::Int,
        default: "-1",
        usage: "read the auth token from this open file descriptor (-serve; -1 = unset)",
    },
    Spec {
        name: "token-file",
        kind: Kind::Str,
        default: "",
        usage: "read the auth token from this file, then delete it (-serve)",
    },
    Spec {
        name: "version",
        kind: Kind::Bool,
        default: "false",
        usage: "print the version and exit",
    },
];

/// The parsed command line. String values stay `OsString` so that paths
/// with non-UTF-8 bytes survive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
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
pub enum ParseError {
    /// `-h` or `-help`: print the usage, exit 0.
    Help,
    /// Print this line, then the usage; exit 2.
    Invalid(String),
}

impl Flags {
    /// Sets flag `name` from `value` with the flag grammar; the error is
    /// the reason Go's `flag` package would print. `remora.conf` values go
    /// through here too, so a key and its flag accept the same text.
    pub fn set(&mut self, name: &str, value: &OsStr) -> Result<(), String> {
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
pub fn parse(args: &[OsString]) -> Result<Flags, ParseError> {
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

/// Go's usage text: `Usage of <argv0>:` and `PrintDefaults`.
pub fn usage(argv0: &str) -> String {
    let mut out = format!("Usage of {argv0}:\n");
    for spec in SPECS {
        out.push_str("  -");
        out.push_str(spec.name);
        match spec.kind {
            Kind::Bool => {}
            Kind::Str => out.push_str(" string"),
            Kind::Int => out.push_str(" int"),
            Kind::Duration => out.push_str(" duration"),
        }
        // Go keeps a one-letter bool flag's description on the same line;
        // every name here is longer, so the description goes below.
        out.push_str("\n    \t");
        out.push_str(spec.usage);
        let zero = match spec.kind {
            Kind::Bool => "false",
            Kind::Str => "",
            Kind::Int => "0",
            Kind::Duration => "0s",
        };
        if spec.default != zero {
            if spec.kind == Kind::Str {
                out.push_str(&format!(" (default {})", go_quote(spec.default.as_bytes())));
            } else {
                out.push_str(&format!(" (default {})", spec.default));
            }
        }
        out.push('\n');
    }
    out
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
    fn usage_is_go_print_defaults() {
        let u = usage("remora");
        assert!(u.starts_with("Usage of remora:\n  -bridge\n    \trelay"), "{u}");
        assert!(
            u.contains("\n  -cli-keep int\n    \thow many most recent CLI versions to keep (-install) (default 3)\n")
        );
        assert!(u.contains("\n  -socket string\n    \t"));
        assert!(u.contains("(-serve; -1 = unset) (default -1)\n"));
        assert!(u.ends_with("  -version\n    \tprint the version and exit\n"));
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
