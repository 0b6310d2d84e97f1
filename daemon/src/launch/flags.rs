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
//! The flags themselves (names, kinds, defaults, help texts, where the
//! help lists them) are the table [`crate::base::flagtable`]; this module
//! is the grammar and the help's layout. Mode selection and what the
//! values mean live in [`crate::launch::cli`].

use crate::base::flagtable::{Flag, Flags, Kind, Listed, Section, FLAGS};
use crate::base::goerr::go_quote;
use std::ffi::{OsStr, OsString};

/// Why parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// `-h` or `-help`: print the usage, exit 0.
    Help,
    /// Print this line, then the usage; exit 2.
    Invalid(String),
}

/// Parses the arguments after `argv[0]` the way Go's `FlagSet.Parse` does.
pub(crate) fn parse(args: &[OsString]) -> Result<Flags, ParseError> {
    let mut flags = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_encoded_bytes();
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
            // SAFETY: split just after an ASCII '=' of bytes from
            // `as_encoded_bytes`, which keeps them valid encoded bytes.
            Some(eq) => (
                &body[..eq],
                Some(unsafe { OsStr::from_encoded_bytes_unchecked(&body[eq + 1..]) }),
            ),
            None => (body, None),
        };
        let name_text = lossy(name);
        let Some(spec) = FLAGS.iter().find(|s| s.name.as_bytes() == name) else {
            if name == b"help" || name == b"h" {
                return Err(ParseError::Help);
            }
            return Err(ParseError::Invalid(format!(
                "flag provided but not defined: -{name_text}"
            )));
        };
        if !spec.takes_value() {
            let value = inline.unwrap_or(OsStr::new("true"));
            if flags.set(spec.name, value).is_err() {
                return Err(ParseError::Invalid(format!(
                    "invalid boolean value {} for -{name_text}: parse error",
                    go_quote(value.as_encoded_bytes())
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
                go_quote(value.as_encoded_bytes())
            )));
        }
        flags.explicit.push(spec.name);
    }
    flags.rest = args[i..].to_vec();
    Ok(flags)
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

/// The synopsis of every mode of `table`, in its order: what `-h` starts
/// with and what follows a flag error.
fn synopsis(table: &[Flag], argv0: &str) -> String {
    let name = program(argv0);
    let mut out = format!("Usage: {name} MODE [OPTION...]   (one mode per run)\n\n");
    for mode in table {
        let Listed::Mode(args) = mode.listed else {
            continue;
        };
        let head = format!("  {name} -{}", mode.name);
        out.push_str(&head);
        if !args.is_empty() {
            out.push_str(&wrapped(args, 8, head.len()));
        }
        out.push('\n');
        out.push_str("      ");
        out.push_str(&wrapped(mode.usage, 6, 6));
        out.push('\n');
    }
    out
}

/// One option's lines: `  -name VALUE` padded to a column, then its
/// description and any non-zero default.
fn option_line(spec: &Flag) -> String {
    let head = format!("  -{} {}", spec.name, spec.value);
    let head = head.trim_end();
    let mut text = spec.usage.to_string();
    let zero = match spec.kind {
        Kind::Bool => "false",
        Kind::Str => "",
        Kind::Int => "0",
        Kind::Duration => "0s",
        Kind::Minutes => "0",
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
    usage_of(FLAGS, argv0)
}

/// [`usage`] of the flags in `table`: each section lists its options in
/// the table's order.
fn usage_of(table: &[Flag], argv0: &str) -> String {
    let mut out = synopsis(table, argv0);
    for section in Section::ALL {
        out.push_str(&format!("\nOptions of {}:\n", section.title()));
        for spec in table {
            if matches!(spec.listed, Listed::Options(under) if under.contains(&section)) {
                out.push_str(&option_line(spec));
            }
        }
    }
    let others: Vec<&Flag> = table
        .iter()
        .filter(|s| matches!(s.listed, Listed::Options(under) if under.is_empty()))
        .collect();
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
        synopsis(FLAGS, argv0),
        program(argv0)
    )
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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
        for spec in FLAGS {
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
    }

    #[test]
    fn the_help_comes_from_the_table() {
        // A flag only the table knows is listed in its section, in its
        // place, with its value word and default.
        let planted = crate::base::flagtable::planted();
        let u = usage_of(&planted, "remora");
        let serve = u.find("\nOptions of -serve:\n").unwrap();
        let line = u
            .find("\n  -planted-knob N         a flag only the table knows (default 5)\n")
            .unwrap();
        let bridge = u.find("\nOptions of -bridge and -stop:\n").unwrap();
        let last = u.find("\n  -exited-retention-min MINUTES\n").unwrap();
        assert!(serve < last && last < line && line < bridge, "{u}");
        // Without it, the help is the table's as well.
        assert_eq!(usage_of(FLAGS, "remora"), usage("remora"));
        assert!(!usage("remora").contains("planted"));
    }
}
