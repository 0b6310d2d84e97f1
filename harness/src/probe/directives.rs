//! The directives of `docs/PROBES.md`, one entry each in [`DIRECTIVES`]:
//! its name, the shape of its arguments and the function that turns them
//! into a header setting or a step.

use super::grammar::{Action, Args, Directive, Header, Shape, Source};
use super::lex::*;
use super::*;

/// Any number of tokens.
const ANY: usize = usize::MAX;

const fn header(
    name: &'static str,
    usage: &'static str,
    set: fn(&mut Header, &Args) -> Result<(), ParseError>,
) -> Directive {
    Directive {
        name,
        usage,
        shape: Shape::Line,
        action: Action::Header(set),
    }
}

const fn step(name: &'static str, usage: &'static str, f: fn(&Args) -> Result<StepKind, ParseError>) -> Directive {
    Directive {
        name,
        usage,
        shape: Shape::Line,
        action: Action::Step(f),
    }
}

const fn tokens(
    name: &'static str,
    usage: &'static str,
    (min, max): (usize, usize),
    f: fn(&Args) -> Result<StepKind, ParseError>,
) -> Directive {
    Directive {
        name,
        usage,
        shape: Shape::Tokens { min, max },
        action: Action::Step(f),
    }
}

/// A fixture directive (see [`Fixture`]).
const fn fixture(
    name: &'static str,
    usage: &'static str,
    shape: Shape,
    f: fn(&Args) -> Result<Fixture, ParseError>,
) -> Directive {
    Directive {
        name,
        usage,
        shape,
        action: Action::Fixture(f),
    }
}

/// Every directive, header directives first, in the order of
/// `docs/PROBES.md`.
pub(super) const DIRECTIVES: &[Directive] = &[
    header("desc", "desc <text>", desc),
    Directive {
        name: "token",
        usage: "token takes one string",
        shape: Shape::Tokens { min: 1, max: 1 },
        action: Action::Header(token),
    },
    header("timeout", "timeout <ms>", timeout),
    header("env", "env takes KEY=VALUE", env),
    header("build", "build takes a reference build id (7 to 40 hex digits)", build),
    header("accept", "accept takes `<key glob> | <reason>`", accept),
    header("accept-next", "accept-next <reason>", accept_next),
    header("mask", "mask takes one JSON key", mask),
    fixture(
        "file",
        "file <path> [<mode>] <content>",
        Shape::Tokens { min: 2, max: 3 },
        file,
    ),
    fixture("dir", "dir <path> [<mode>]", Shape::Tokens { min: 1, max: 2 }, dir),
    fixture(
        "symlink",
        "symlink <path> <target>",
        Shape::Tokens { min: 2, max: 2 },
        link,
    ),
    fixture(
        "hardlink",
        "hardlink <path> <target>",
        Shape::Tokens { min: 2, max: 2 },
        link,
    ),
    fixture("fifo", "fifo <path>", Shape::Tokens { min: 1, max: 1 }, fifo),
    fixture("chmod", "chmod <mode> <path>", Shape::Tokens { min: 2, max: 2 }, chmod),
    fixture("git", "git <args…>", Shape::Tokens { min: 0, max: ANY }, git),
    fixture("sh", "sh <command line>", Shape::Line, sh),
    Directive {
        name: "tar",
        usage: "tar <path> [gzip|plain|truncated|garbage]",
        shape: Shape::Tokens { min: 1, max: 2 },
        action: Action::Block(tar),
    },
    tokens("start", "start [<extra -serve args>…]", (0, ANY), start),
    step("connect", "connect <conn> [bridge]", connect),
    step("send", "send <conn> <line>", send),
    step("sendn", "sendn <conn> <length> <line with $FILL>", sendn),
    step("raw", "raw <conn> \"<bytes>\"…", raw),
    step("call", "call <conn> <id> <method> [<params json>]", call),
    step("await", "await <conn> <id>", await_reply),
    step("await-exit", "await-exit <conn> <process id>", await_exit),
    step(
        "await-output",
        "await-output <conn> <process id> stdout|stderr <text>",
        await_output,
    ),
    step("await-frames", "await-frames <conn> <count>", await_frames),
    step("await-close", "await-close <conn>", |a| {
        Ok(StepKind::AwaitClose {
            conn: conn_name(&a.cx, Some(a.rest.trim()))?,
        })
    }),
    step("await-gone", "await-gone", |_| Ok(StepKind::AwaitGone)),
    step("quiet", "quiet <conn> <ms>", quiet),
    step("close", "close <conn>", |a| {
        Ok(StepKind::Close {
            conn: conn_name(&a.cx, Some(a.rest.trim()))?,
        })
    }),
    step("sleep", "sleep <ms>", |a| {
        Ok(StepKind::Sleep {
            ms: parse_ms(&a.cx, Some(a.rest.trim()))?,
        })
    }),
    step("run", "run [stdin=<text>] [env=K=V]… [timeout=<ms>] -- <args>…", run),
    step("snapshot", "snapshot", |_| Ok(StepKind::Snapshot)),
    step("log", "log <substring>", log),
];

// Header directives.

fn desc(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    if !h.probe.desc.is_empty() {
        h.probe.desc.push(' ');
    }
    h.probe.desc.push_str(a.rest.trim_end());
    Ok(())
}

fn token(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    let [t] = a.toks.as_slice() else {
        return Err(a.usage());
    };
    h.probe.token_file = tok_template(&a.cx, t)?.expand(&Ctx::default());
    Ok(())
}

fn timeout(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    h.probe.timeout = Duration::from_millis(parse_ms(&a.cx, Some(a.rest.trim()))?);
    Ok(())
}

fn env(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    let (k, v) = a.rest.trim().split_once('=').ok_or_else(|| a.usage())?;
    h.probe.env.push((k.to_string(), v.to_string()));
    Ok(())
}

fn build(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    let id = a.rest.trim();
    let hex = id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !(7..=40).contains(&id.len()) || !hex || h.probe.build.is_some() {
        return Err(a.usage());
    }
    h.probe.build = Some(id.to_string());
    Ok(())
}

fn accept(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    let (pat, reason) = a.rest.split_once('|').ok_or_else(|| a.usage())?;
    if reason.trim().is_empty() {
        return Err(a.cx.err("an accepted divergence needs a reason"));
    }
    h.probe.accepts.push(Accept {
        pattern: pat.trim().to_string(),
        reason: reason.trim().to_string(),
    });
    Ok(())
}

fn accept_next(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    if a.rest.trim().is_empty() {
        return Err(a.cx.err("an accepted divergence needs a reason"));
    }
    h.pending_accept = Some(a.rest.trim().to_string());
    Ok(())
}

fn mask(h: &mut Header, a: &Args) -> Result<(), ParseError> {
    let key = a.rest.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(a.usage());
    }
    h.probe.masks.push(key.to_string());
    Ok(())
}

// Fixtures.

fn file(a: &Args) -> Result<Fixture, ParseError> {
    let (path, mode, content) = match a.toks.as_slice() {
        [p, m, c] if is_mode(m.text()) => (p, parse_mode(&a.cx, m.text())?, c),
        [p, c] => (p, 0o644, c),
        _ => return Err(a.usage()),
    };
    Ok(Fixture::File {
        path: tok_template(&a.cx, path)?,
        mode,
        content: tok_template(&a.cx, content)?,
    })
}

fn dir(a: &Args) -> Result<Fixture, ParseError> {
    let (path, mode) = match a.toks.as_slice() {
        [p, m] => (p, parse_mode(&a.cx, m.text())?),
        [p] => (p, 0o755),
        _ => return Err(a.usage()),
    };
    Ok(Fixture::Dir {
        path: tok_template(&a.cx, path)?,
        mode,
    })
}

/// `symlink` and `hardlink`.
fn link(a: &Args) -> Result<Fixture, ParseError> {
    let [p, t] = a.toks.as_slice() else {
        return Err(a.usage());
    };
    let (path, target) = (tok_template(&a.cx, p)?, tok_template(&a.cx, t)?);
    Ok(if a.name == "symlink" {
        Fixture::Symlink { path, target }
    } else {
        Fixture::Hardlink { path, target }
    })
}

fn fifo(a: &Args) -> Result<Fixture, ParseError> {
    let [p] = a.toks.as_slice() else {
        return Err(a.usage());
    };
    Ok(Fixture::Fifo {
        path: tok_template(&a.cx, p)?,
    })
}

fn chmod(a: &Args) -> Result<Fixture, ParseError> {
    let [m, p] = a.toks.as_slice() else {
        return Err(a.usage());
    };
    Ok(Fixture::Chmod {
        mode: parse_mode(&a.cx, m.text())?,
        path: tok_template(&a.cx, p)?,
    })
}

/// Every token as a template.
fn templates(a: &Args) -> Result<Vec<Template>, ParseError> {
    a.toks.iter().map(|t| tok_template(&a.cx, t)).collect()
}

fn git(a: &Args) -> Result<Fixture, ParseError> {
    Ok(Fixture::Git { args: templates(a)? })
}

fn sh(a: &Args) -> Result<Fixture, ParseError> {
    Ok(Fixture::Sh {
        command: parse_template(&a.cx, a.rest.trim_end(), false)?,
    })
}

/// `tar <path> [<format>]`, then one entry per line up to `end`.
fn tar(a: &Args, source: &mut Source) -> Result<Fixture, ParseError> {
    let (p, format) = match a.toks.as_slice() {
        [p] => (p, None),
        [p, f] => (p, Some(f.text())),
        _ => return Err(a.usage()),
    };
    let format = match format {
        None | Some("gzip") => TarFormat::Gzip,
        Some("plain") => TarFormat::Plain,
        Some("truncated") => TarFormat::Truncated,
        Some("garbage") => TarFormat::Garbage,
        Some(other) => return Err(a.cx.err(format!("unknown tar format {other:?}"))),
    };
    let path = tok_template(&a.cx, p)?;
    let mut entries = Vec::new();
    loop {
        let Some((ecx, l)) = source.next_line() else {
            return Err(a.cx.err("tar block without `end`"));
        };
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t == "end" {
            break;
        }
        entries.push(tar_entry(&ecx, t)?);
    }
    Ok(Fixture::Tar { path, format, entries })
}

/// One line of a `tar` block: `<kind> <name> [<mode>] [<kind's arguments>]`.
fn tar_entry(cx: &LineCx, t: &str) -> Result<TarEntry, ParseError> {
    let (w, rest) = words(t, 1);
    let toks = lex(cx, rest)?;
    let kind = w.first().copied().unwrap_or_default();
    let name = toks
        .first()
        .ok_or_else(|| cx.err("tar entry needs a name"))
        .and_then(|t| tok_template(cx, t))?;
    let args = &toks[1..];
    let (mode, args) = match args.first() {
        Some(m) if is_mode(m.text()) && kind != "chardev" && kind != "blockdev" => {
            (Some(parse_mode(cx, m.text())?), &args[1..])
        }
        _ => (None, args),
    };
    let num = |i: usize| -> Result<u32, ParseError> {
        args.get(i)
            .and_then(|t| t.text().parse().ok())
            .ok_or_else(|| cx.err(format!("{kind} <name> <major> <minor>")))
    };
    let (kind, default_mode) = match (kind, args.len()) {
        ("file", 1) => (TarKind::File(tok_template(cx, &args[0])?), 0o644),
        ("file", 0) => (TarKind::File(Template::default()), 0o644),
        ("dir", 0) => (TarKind::Dir, 0o755),
        ("symlink", 1) => (TarKind::Symlink(tok_template(cx, &args[0])?), 0o777),
        ("hardlink", 1) => (TarKind::Hardlink(tok_template(cx, &args[0])?), 0o644),
        ("chardev", 2) => (TarKind::CharDev(num(0)?, num(1)?), 0o644),
        ("blockdev", 2) => (TarKind::BlockDev(num(0)?, num(1)?), 0o644),
        ("fifo", 0) => (TarKind::Fifo, 0o644),
        _ => {
            return Err(cx.err(format!(
                "bad tar entry {t:?} (file|dir|symlink|hardlink|chardev|blockdev|fifo)"
            )))
        }
    };
    Ok(TarEntry {
        name,
        mode: mode.unwrap_or(default_mode),
        kind,
    })
}

// Connections and requests.

fn start(a: &Args) -> Result<StepKind, ParseError> {
    Ok(StepKind::Start { args: templates(a)? })
}

fn connect(a: &Args) -> Result<StepKind, ParseError> {
    let (w, extra) = words(a.rest, 2);
    if !extra.is_empty() {
        return Err(a.usage());
    }
    let bridge = match w.get(1) {
        None => false,
        Some(&"bridge") => true,
        Some(other) => return Err(a.cx.err(format!("unknown transport {other:?}"))),
    };
    Ok(StepKind::Connect {
        conn: conn_name(&a.cx, w.first().copied())?,
        bridge,
    })
}

fn send(a: &Args) -> Result<StepKind, ParseError> {
    let (w, payload) = words(a.rest, 1);
    Ok(StepKind::Send {
        conn: conn_name(&a.cx, w.first().copied())?,
        line: parse_template(&a.cx, payload.trim_end(), false)?,
        len: None,
    })
}

fn sendn(a: &Args) -> Result<StepKind, ParseError> {
    let (w, payload) = words(a.rest, 2);
    let len = w.get(1).and_then(|s| s.parse().ok()).ok_or_else(|| a.usage())?;
    let line = parse_template(&a.cx, payload.trim_end(), false)?;
    if !line.has_fill() {
        return Err(a.cx.err("sendn needs a $FILL in its line"));
    }
    Ok(StepKind::Send {
        conn: conn_name(&a.cx, w.first().copied())?,
        line,
        len: Some(len),
    })
}

fn raw(a: &Args) -> Result<StepKind, ParseError> {
    let (w, payload) = words(a.rest, 1);
    let mut pieces = Vec::new();
    for t in &lex(&a.cx, payload)? {
        pieces.extend(tok_template(&a.cx, t)?.0);
    }
    Ok(StepKind::Raw {
        conn: conn_name(&a.cx, w.first().copied())?,
        bytes: Template(pieces),
    })
}

fn call(a: &Args) -> Result<StepKind, ParseError> {
    let (w, params) = words(a.rest, 3);
    let [conn, id, method] = w.as_slice() else {
        return Err(a.usage());
    };
    let params = params.trim_end();
    Ok(StepKind::Call {
        conn: conn_name(&a.cx, Some(*conn))?,
        id: check_id(&a.cx, id)?,
        method: method.to_string(),
        params: if params.is_empty() {
            None
        } else {
            Some(parse_template(&a.cx, params, false)?)
        },
    })
}

fn await_reply(a: &Args) -> Result<StepKind, ParseError> {
    let (w, id) = words(a.rest, 1);
    Ok(StepKind::Await {
        conn: conn_name(&a.cx, w.first().copied())?,
        id: check_id(&a.cx, id.trim())?,
    })
}

fn await_exit(a: &Args) -> Result<StepKind, ParseError> {
    let (w, extra) = words(a.rest, 2);
    let ([conn, proc_id], "") = (w.as_slice(), extra) else {
        return Err(a.usage());
    };
    Ok(StepKind::AwaitExit {
        conn: conn_name(&a.cx, Some(*conn))?,
        proc_id: proc_id.to_string(),
    })
}

fn await_output(a: &Args) -> Result<StepKind, ParseError> {
    let (w, needle) = words(a.rest, 3);
    let [conn, proc_id, stream @ ("stdout" | "stderr")] = w.as_slice() else {
        return Err(a.usage());
    };
    let toks = lex(&a.cx, needle)?;
    let [t] = toks.as_slice() else {
        return Err(a.cx.err("await-output needs one text argument"));
    };
    Ok(StepKind::AwaitOutput {
        conn: conn_name(&a.cx, Some(*conn))?,
        proc_id: proc_id.to_string(),
        stream: stream.to_string(),
        needle: tok_template(&a.cx, t)?,
    })
}

fn await_frames(a: &Args) -> Result<StepKind, ParseError> {
    let (w, _) = words(a.rest, 2);
    Ok(StepKind::AwaitFrames {
        conn: conn_name(&a.cx, w.first().copied())?,
        count: w.get(1).and_then(|s| s.parse().ok()).ok_or_else(|| a.usage())?,
    })
}

fn quiet(a: &Args) -> Result<StepKind, ParseError> {
    let (w, _) = words(a.rest, 2);
    Ok(StepKind::Quiet {
        conn: conn_name(&a.cx, w.first().copied())?,
        ms: parse_ms(&a.cx, w.get(1).copied())?,
    })
}

// Command-line modes and logs.

/// `run [stdin=<text>] [env=K=V]… [timeout=<ms>] -- <args>…`.
fn run(a: &Args) -> Result<StepKind, ParseError> {
    let cx = &a.cx;
    let toks = lex(cx, a.rest)?;
    let sep = toks
        .iter()
        .position(|t| t == &Tok::Bare("--".into()))
        .ok_or_else(|| a.usage())?;
    let (mut stdin, mut env, mut timeout_ms) = (None, Vec::new(), None);
    for t in &toks[..sep] {
        let t = t.text();
        let (k, v) = t
            .split_once('=')
            .ok_or_else(|| cx.err(format!("bad run option {t:?}")))?;
        // `stdin=` may be followed by a separate quoted token.
        let value_tok = if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
            Tok::Quoted(v[1..v.len() - 1].to_string())
        } else {
            Tok::Bare(v.to_string())
        };
        match k {
            "stdin" => stdin = Some(tok_template(cx, &value_tok)?),
            "env" => env.push(run_env(cx, value_tok)?),
            "timeout" => timeout_ms = Some(parse_ms(cx, Some(value_tok.text()))?),
            other => return Err(cx.err(format!("unknown run option {other:?}"))),
        }
    }
    Ok(StepKind::Run {
        stdin,
        env,
        args: toks[sep + 1..]
            .iter()
            .map(|t| tok_template(cx, t))
            .collect::<Result<_, _>>()?,
        timeout_ms,
    })
}

/// The value of a `run` option `env=KEY=VALUE`: the key and its template
/// (quoted, escapes and all, when the value or the whole option is).
fn run_env(cx: &LineCx, value_tok: Tok) -> Result<(String, Template), ParseError> {
    let text = value_tok.text().to_string();
    let (ek, ev) = text.split_once('=').ok_or_else(|| cx.err("env=KEY=VALUE"))?;
    let vt = if ev.len() >= 2 && ev.starts_with('"') && ev.ends_with('"') {
        Tok::Quoted(ev[1..ev.len() - 1].to_string())
    } else {
        match value_tok {
            Tok::Quoted(_) => Tok::Quoted(ev.to_string()),
            Tok::Bare(_) => Tok::Bare(ev.to_string()),
        }
    };
    Ok((ek.to_string(), tok_template(cx, &vt)?))
}

fn log(a: &Args) -> Result<StepKind, ParseError> {
    if a.rest.trim().is_empty() {
        return Err(a.usage());
    }
    Ok(StepKind::Log {
        pattern: a.rest.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::DIRECTIVES;

    #[test]
    fn each_directive_has_one_entry_named_in_its_usage() {
        let mut names: Vec<&str> = DIRECTIVES.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DIRECTIVES.len(), "a directive is listed twice");
        for d in DIRECTIVES {
            assert!(d.usage.starts_with(d.name), "{}: {}", d.name, d.usage);
        }
    }

    /// `docs/PROBES.md` and the table list the same directives.
    #[test]
    fn the_table_is_the_documented_language() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROBES.md")).unwrap();
        for d in DIRECTIVES {
            let (spaced, alone) = (format!("`{} ", d.name), format!("`{}`", d.name));
            let documented = doc.lines().filter(|l| l.starts_with("| `")).any(|l| {
                l.split(" / ")
                    .map(|cell| cell.trim_start_matches("| "))
                    .any(|cell| cell.starts_with(&spaced) || cell.starts_with(&alone))
            });
            assert!(documented, "`{}` is not in docs/PROBES.md", d.name);
        }
    }
}
