//! Directive lines to [`Probe`] steps: one arm per directive of
//! `docs/PROBES.md`.

use super::lex::*;
use super::*;

/// Parses probe text; `path` is used for the name and error messages.
pub fn parse(path: &Path, text: &str) -> Result<Probe, ParseError> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut probe = Probe {
        name,
        path: path.to_path_buf(),
        desc: String::new(),
        token_file: b"probe-token\n".to_vec(),
        timeout: Duration::from_secs(20),
        env: Vec::new(),
        accepts: Vec::new(),
        masks: Vec::new(),
        steps: Vec::new(),
    };
    let mut pending_accept: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    let mut idx = 0;
    while idx < lines.len() {
        let lineno = idx + 1;
        let raw = lines[idx];
        idx += 1;
        let cx = LineCx {
            file: path,
            line: lineno,
        };
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (head, rest) = words(trimmed, 1);
        let cmd = head[0];
        let kind = match cmd {
            "desc" => {
                if !probe.desc.is_empty() {
                    probe.desc.push(' ');
                }
                probe.desc.push_str(rest.trim_end());
                continue;
            }
            "token" => {
                let toks = lex(&cx, rest)?;
                let [t] = toks.as_slice() else {
                    return Err(cx.err("token takes one string"));
                };
                probe.token_file = tok_template(&cx, t)?.expand(&Ctx::default());
                continue;
            }
            "timeout" => {
                probe.timeout = Duration::from_millis(parse_ms(&cx, Some(rest.trim()))?);
                continue;
            }
            "env" => {
                let (k, v) = rest
                    .trim()
                    .split_once('=')
                    .ok_or_else(|| cx.err("env takes KEY=VALUE"))?;
                probe.env.push((k.to_string(), v.to_string()));
                continue;
            }
            "accept" => {
                let (pat, reason) = rest
                    .split_once('|')
                    .ok_or_else(|| cx.err("accept takes `<key glob> | <reason>`"))?;
                if reason.trim().is_empty() {
                    return Err(cx.err("an accepted divergence needs a reason"));
                }
                probe.accepts.push(Accept {
                    pattern: pat.trim().to_string(),
                    reason: reason.trim().to_string(),
                });
                continue;
            }
            "mask" => {
                let key = rest.trim();
                if key.is_empty() || key.contains(char::is_whitespace) {
                    return Err(cx.err("mask takes one JSON key"));
                }
                probe.masks.push(key.to_string());
                continue;
            }
            "accept-next" => {
                if rest.trim().is_empty() {
                    return Err(cx.err("an accepted divergence needs a reason"));
                }
                pending_accept = Some(rest.trim().to_string());
                continue;
            }
            "file" => {
                let toks = lex(&cx, rest)?;
                let (path, mode, content) = match toks.as_slice() {
                    [p, m, c] if is_mode(m.text()) => (p, parse_mode(&cx, m.text())?, c),
                    [p, c] => (p, 0o644, c),
                    _ => return Err(cx.err("file <path> [<mode>] <content>")),
                };
                StepKind::File {
                    path: tok_template(&cx, path)?,
                    mode,
                    content: tok_template(&cx, content)?,
                }
            }
            "dir" => {
                let toks = lex(&cx, rest)?;
                let (path, mode) = match toks.as_slice() {
                    [p, m] => (p, parse_mode(&cx, m.text())?),
                    [p] => (p, 0o755),
                    _ => return Err(cx.err("dir <path> [<mode>]")),
                };
                StepKind::Dir {
                    path: tok_template(&cx, path)?,
                    mode,
                }
            }
            "symlink" | "hardlink" => {
                let toks = lex(&cx, rest)?;
                let [p, t] = toks.as_slice() else {
                    return Err(cx.err(format!("{cmd} <path> <target>")));
                };
                let (path, target) = (tok_template(&cx, p)?, tok_template(&cx, t)?);
                if cmd == "symlink" {
                    StepKind::Symlink { path, target }
                } else {
                    StepKind::Hardlink { path, target }
                }
            }
            "fifo" => {
                let toks = lex(&cx, rest)?;
                let [p] = toks.as_slice() else {
                    return Err(cx.err("fifo <path>"));
                };
                StepKind::Fifo {
                    path: tok_template(&cx, p)?,
                }
            }
            "chmod" => {
                let toks = lex(&cx, rest)?;
                let [m, p] = toks.as_slice() else {
                    return Err(cx.err("chmod <mode> <path>"));
                };
                StepKind::Chmod {
                    mode: parse_mode(&cx, m.text())?,
                    path: tok_template(&cx, p)?,
                }
            }
            "git" => {
                let toks = lex(&cx, rest)?;
                StepKind::Git {
                    args: toks.iter().map(|t| tok_template(&cx, t)).collect::<Result<_, _>>()?,
                }
            }
            "sh" => StepKind::Sh {
                command: parse_template(&cx, rest.trim_end(), false)?,
            },
            "tar" => {
                let toks = lex(&cx, rest)?;
                let (p, format) = match toks.as_slice() {
                    [p] => (p, TarFormat::Gzip),
                    [p, f] => (
                        p,
                        match f.text() {
                            "gzip" => TarFormat::Gzip,
                            "plain" => TarFormat::Plain,
                            "truncated" => TarFormat::Truncated,
                            "garbage" => TarFormat::Garbage,
                            other => return Err(cx.err(format!("unknown tar format {other:?}"))),
                        },
                    ),
                    _ => return Err(cx.err("tar <path> [gzip|plain|truncated|garbage]")),
                };
                let path = tok_template(&cx, p)?;
                let mut entries = Vec::new();
                loop {
                    let Some(l) = lines.get(idx) else {
                        return Err(cx.err("tar block without `end`"));
                    };
                    let ecx = LineCx {
                        file: path_of(&cx),
                        line: idx + 1,
                    };
                    idx += 1;
                    let t = l.trim();
                    if t.is_empty() || t.starts_with('#') {
                        continue;
                    }
                    if t == "end" {
                        break;
                    }
                    entries.push(parse_tar_entry(&ecx, t)?);
                }
                StepKind::Tar { path, format, entries }
            }
            "start" => {
                let toks = lex(&cx, rest)?;
                StepKind::Start {
                    args: toks.iter().map(|t| tok_template(&cx, t)).collect::<Result<_, _>>()?,
                }
            }
            "connect" => {
                let (w, extra) = words(rest, 2);
                if !extra.is_empty() {
                    return Err(cx.err("connect <conn> [bridge]"));
                }
                let bridge = match w.get(1) {
                    None => false,
                    Some(&"bridge") => true,
                    Some(other) => return Err(cx.err(format!("unknown transport {other:?}"))),
                };
                StepKind::Connect {
                    conn: conn_name(&cx, w.first().copied())?,
                    bridge,
                }
            }
            "send" => {
                let (w, payload) = words(rest, 1);
                StepKind::Send {
                    conn: conn_name(&cx, w.first().copied())?,
                    line: parse_template(&cx, payload.trim_end(), false)?,
                    len: None,
                }
            }
            "sendn" => {
                let (w, payload) = words(rest, 2);
                let len = w
                    .get(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| cx.err("sendn <conn> <length> <line with $FILL>"))?;
                let line = parse_template(&cx, payload.trim_end(), false)?;
                if !line.has_fill() {
                    return Err(cx.err("sendn needs a $FILL in its line"));
                }
                StepKind::Send {
                    conn: conn_name(&cx, w.first().copied())?,
                    line,
                    len: Some(len),
                }
            }
            "raw" => {
                let (w, payload) = words(rest, 1);
                let toks = lex(&cx, payload)?;
                let mut pieces = Vec::new();
                for t in &toks {
                    pieces.extend(tok_template(&cx, t)?.0);
                }
                StepKind::Raw {
                    conn: conn_name(&cx, w.first().copied())?,
                    bytes: Template(pieces),
                }
            }
            "call" => {
                let (w, params) = words(rest, 3);
                if w.len() < 3 {
                    return Err(cx.err("call <conn> <id> <method> [<params json>]"));
                }
                let params = params.trim_end();
                StepKind::Call {
                    conn: conn_name(&cx, Some(w[0]))?,
                    id: check_id(&cx, w[1])?,
                    method: w[2].to_string(),
                    params: if params.is_empty() {
                        None
                    } else {
                        Some(parse_template(&cx, params, false)?)
                    },
                }
            }
            "await" => {
                let (w, id) = words(rest, 1);
                StepKind::Await {
                    conn: conn_name(&cx, w.first().copied())?,
                    id: check_id(&cx, id.trim())?,
                }
            }
            "await-exit" => {
                let (w, extra) = words(rest, 2);
                if w.len() != 2 || !extra.is_empty() {
                    return Err(cx.err("await-exit <conn> <process id>"));
                }
                StepKind::AwaitExit {
                    conn: conn_name(&cx, Some(w[0]))?,
                    proc_id: w[1].to_string(),
                }
            }
            "await-output" => {
                let (w, needle) = words(rest, 3);
                if w.len() != 3 || !matches!(w[2], "stdout" | "stderr") {
                    return Err(cx.err("await-output <conn> <process id> stdout|stderr <text>"));
                }
                let toks = lex(&cx, needle)?;
                let [t] = toks.as_slice() else {
                    return Err(cx.err("await-output needs one text argument"));
                };
                StepKind::AwaitOutput {
                    conn: conn_name(&cx, Some(w[0]))?,
                    proc_id: w[1].to_string(),
                    stream: w[2].to_string(),
                    needle: tok_template(&cx, t)?,
                }
            }
            "await-frames" => {
                let (w, _) = words(rest, 2);
                StepKind::AwaitFrames {
                    conn: conn_name(&cx, w.first().copied())?,
                    count: w
                        .get(1)
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| cx.err("await-frames <conn> <count>"))?,
                }
            }
            "await-close" => StepKind::AwaitClose {
                conn: conn_name(&cx, Some(rest.trim()))?,
            },
            "await-gone" => StepKind::AwaitGone,
            "quiet" => {
                let (w, _) = words(rest, 2);
                StepKind::Quiet {
                    conn: conn_name(&cx, w.first().copied())?,
                    ms: parse_ms(&cx, w.get(1).copied())?,
                }
            }
            "close" => StepKind::Close {
                conn: conn_name(&cx, Some(rest.trim()))?,
            },
            "sleep" => StepKind::Sleep {
                ms: parse_ms(&cx, Some(rest.trim()))?,
            },
            "run" => parse_run(&cx, rest)?,
            "snapshot" => StepKind::Snapshot,
            "log" => {
                if rest.trim().is_empty() {
                    return Err(cx.err("log <substring>"));
                }
                StepKind::Log {
                    pattern: rest.trim().to_string(),
                }
            }
            other => return Err(cx.err(format!("unknown directive {other:?}"))),
        };
        if let Some(reason) = pending_accept.take() {
            probe.accepts.push(Accept {
                pattern: format!("L{lineno} *"),
                reason,
            });
        }
        probe.steps.push(Step { line: lineno, kind });
    }
    if pending_accept.is_some() {
        return Err(ParseError {
            file: path.to_path_buf(),
            line: lines.len(),
            message: "accept-next at the end of the probe applies to nothing".into(),
        });
    }
    Ok(probe)
}

fn path_of<'a>(cx: &LineCx<'a>) -> &'a Path {
    cx.file
}

fn parse_run(cx: &LineCx, rest: &str) -> Result<StepKind, ParseError> {
    let toks = lex(cx, rest)?;
    let sep = toks
        .iter()
        .position(|t| t == &Tok::Bare("--".into()))
        .ok_or_else(|| cx.err("run [stdin=<text>] [env=K=V]… [timeout=<ms>] -- <args>…"))?;
    let mut stdin = None;
    let mut env = Vec::new();
    let mut timeout_ms = None;
    let mut i = 0;
    while i < sep {
        let t = toks[i].text();
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
            "env" => {
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
                env.push((ek.to_string(), tok_template(cx, &vt)?));
            }
            "timeout" => timeout_ms = Some(parse_ms(cx, Some(value_tok.text()))?),
            other => return Err(cx.err(format!("unknown run option {other:?}"))),
        }
        i += 1;
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

fn parse_tar_entry(cx: &LineCx, t: &str) -> Result<TarEntry, ParseError> {
    let (w, rest) = words(t, 1);
    let toks = lex(cx, rest)?;
    let kind = w[0];
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
