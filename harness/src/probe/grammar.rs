//! The grammar of a directive line as the table of directives describes
//! it: a [`Directive`] is a name, the [`Shape`] of its arguments and an
//! [`Action`]; [`Args`] is what an action is given, [`Source`] the lines a
//! block directive reads on, [`Header`] the probe the header directives
//! build.

use super::lex::*;
use super::*;

/// One directive of the probe language (`docs/PROBES.md`).
pub(super) struct Directive {
    pub(super) name: &'static str,
    /// What the arguments look like; the error a line whose arguments do
    /// not fit the shape gets.
    pub(super) usage: &'static str,
    pub(super) shape: Shape,
    pub(super) action: Action,
}

/// How a directive's arguments are read before its action sees them.
pub(super) enum Shape {
    /// The rest of the line as written; the action reads it.
    Line,
    /// Tokens (bare or quoted), at least `min` and at most `max`.
    Tokens { min: usize, max: usize },
}

/// What a directive does with its arguments.
pub(super) enum Action {
    /// Sets something probe-wide; no step.
    Header(fn(&mut Header, &Args) -> Result<(), ParseError>),
    /// One step.
    Step(fn(&Args) -> Result<StepKind, ParseError>),
    /// One fixture step.
    Fixture(fn(&Args) -> Result<Fixture, ParseError>),
    /// One fixture that also reads the block of lines after it (`tar` … `end`).
    Block(fn(&Args, &mut Source) -> Result<Fixture, ParseError>),
}

/// The arguments of one directive line.
pub(super) struct Args<'a> {
    pub(super) cx: LineCx<'a>,
    pub(super) name: &'static str,
    usage: &'static str,
    /// The line after the directive's name.
    pub(super) rest: &'a str,
    /// [`Shape::Tokens`]: the tokens (empty for [`Shape::Line`]).
    pub(super) toks: Vec<Tok>,
}

impl<'a> Args<'a> {
    /// Reads `rest` in the directive's shape.
    pub(super) fn read(d: &Directive, cx: LineCx<'a>, rest: &'a str) -> Result<Args<'a>, ParseError> {
        let toks = match d.shape {
            Shape::Line => Vec::new(),
            Shape::Tokens { min, max } => {
                let toks = lex(&cx, rest)?;
                if toks.len() < min || toks.len() > max {
                    return Err(cx.err(d.usage));
                }
                toks
            }
        };
        Ok(Args {
            cx,
            name: d.name,
            usage: d.usage,
            rest,
            toks,
        })
    }

    /// The error of arguments that do not fit the directive.
    pub(super) fn usage(&self) -> ParseError {
        self.cx.err(self.usage)
    }
}

/// The probe's lines, read one at a time (a block directive reads on).
pub(super) struct Source<'a> {
    file: &'a Path,
    pub(super) lines: Vec<&'a str>,
    next: usize,
}

impl<'a> Source<'a> {
    pub(super) fn new(file: &'a Path, text: &'a str) -> Source<'a> {
        Source {
            file,
            lines: text.lines().collect(),
            next: 0,
        }
    }

    /// The next line with its context (1-based line number).
    pub(super) fn next_line(&mut self) -> Option<(LineCx<'a>, &'a str)> {
        let line = self.lines.get(self.next)?;
        self.next += 1;
        let cx = LineCx {
            file: self.file,
            line: self.next,
        };
        Some((cx, line))
    }
}

/// The probe as the header directives build it, and an `accept-next`
/// waiting for its step.
pub(super) struct Header {
    pub(super) probe: Probe,
    pub(super) pending_accept: Option<String>,
}

impl Header {
    pub(super) fn new(path: &Path) -> Header {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let probe = Probe {
            name,
            path: path.to_path_buf(),
            desc: String::new(),
            token_file: b"probe-token\n".to_vec(),
            timeout: Duration::from_secs(20),
            env: Vec::new(),
            accepts: Vec::new(),
            masks: Vec::new(),
            build: None,
            steps: Vec::new(),
        };
        Header {
            probe,
            pending_accept: None,
        }
    }

    /// Adds a step; a pending `accept-next` applies to it.
    pub(super) fn push_step(&mut self, line: usize, kind: StepKind) {
        if let Some(reason) = self.pending_accept.take() {
            self.probe.accepts.push(Accept {
                pattern: format!("L{line} *"),
                reason,
            });
        }
        self.probe.steps.push(Step { line, kind });
    }
}
