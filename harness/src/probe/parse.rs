//! Probe text to a [`Probe`]: each line is looked up in the table of
//! directives ([`super::directives::DIRECTIVES`]), its arguments are read
//! in the directive's shape ([`Args::read`]), and its action sets a header
//! field or yields a step.

use super::directives::DIRECTIVES;
use super::grammar::{Action, Args, Header, Source};
use super::lex::*;
use super::*;

/// Parses probe text; `path` is used for the name and error messages.
pub fn parse(path: &Path, text: &str) -> Result<Probe, ParseError> {
    let mut header = Header::new(path);
    let mut source = Source::new(path, text);
    while let Some((cx, raw)) = source.next_line() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (head, rest) = words(trimmed, 1);
        let name = head.first().copied().unwrap_or_default();
        let Some(d) = DIRECTIVES.iter().find(|d| d.name == name) else {
            return Err(cx.err(format!("unknown directive {name:?}")));
        };
        let line = cx.line;
        let args = Args::read(d, cx, rest)?;
        let kind = match d.action {
            Action::Header(set) => {
                set(&mut header, &args)?;
                continue;
            }
            Action::Step(step) => step(&args)?,
            Action::Fixture(fixture) => StepKind::Fixture(fixture(&args)?),
            Action::Block(fixture) => StepKind::Fixture(fixture(&args, &mut source)?),
        };
        header.push_step(line, kind);
    }
    if header.pending_accept.is_some() {
        return Err(ParseError {
            file: path.to_path_buf(),
            line: source.lines.len(),
            message: "accept-next at the end of the probe applies to nothing".into(),
        });
    }
    Ok(header.probe)
}
