//! `harness import <wire-log>`: a session a daemon recorded with its wire
//! log (`-wire-log`, remora's `serve/wirelog.rs`) turned into a probe and
//! its transcript, which `harness diff` then runs like any other.
//!
//! The log is the same story a capture relay tells (client lines, daemon
//! lines, by connection, in order), so the probe is written by the
//! capture's own writer: the log's `"[redacted]"` auth is the token and
//! becomes `$TOKEN`, the recording's `--root`/`--home`/`--socket` become
//! `$ROOT`/`$HOME`/`$SOCKET`, process ids `p1`, `p2`, …; log connection `n`
//! is probe connection `c<n>`. A `server.shutdown` is left out: the
//! harness stops the daemon itself.
//!
//! The transcript takes its shape (keys, and entries the log cannot give:
//! banner, snapshot, reassembled streams) from a run of the probe against
//! `--binary`, as `harness derive` does, and then every reply's value from
//! the log: keyed by connection and id (the n-th reply of an id for a
//! repeated id, the key's `#n`), and put through the harness
//! normalisation (version, instance ids, pids, start times, paths). Stream
//! frames in the log are keyed by `processId` + `seq`; the streams'
//! entries are checked against them (a frame the run did not see is an
//! error), not copied, since the log may have cut their data.

use super::{CaptureOptions, Error, Event};
use crate::runner::RunConfig;
use crate::transcript::compare::is_reply_key;
use crate::transcript::normalize::Normalizer;
use crate::transcript::Transcript;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `harness import` is given.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The wire log.
    pub log: PathBuf,
    /// The probe to write; the transcript goes to `transcripts/<stem>.txt`.
    pub out: PathBuf,
    pub transcripts: PathBuf,
    /// The recording's working directory, home and socket, if known.
    pub root: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    /// `--map FROM=TO`: literal FROM becomes probe text TO.
    pub maps: Vec<(String, String)>,
    /// Probe lines put before the session (`--prelude`).
    pub prelude: String,
    /// The binary whose run gives the transcript's shape.
    pub cfg: RunConfig,
}

/// `FROM=TO` arguments, split at the first `=`. A FROM of one character
/// (or none) would rewrite far more than a path, so it is refused.
pub fn parse_maps(args: &[String]) -> Result<Vec<(String, String)>, Error> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((from, to)) if from.len() > 1 => Ok((from.to_string(), to.to_string())),
            _ => Err(Error::Log {
                at: format!("--map {a}"),
                problem: "expected FROM=TO with FROM at least two characters long".into(),
            }),
        })
        .collect()
}

/// A `--map` target as the normalised transcript spells it: the probe's
/// `$HOME` is the daemon's home, which normalisation writes `$RUN/home`.
fn normalized_target(to: &str) -> String {
    match to.strip_prefix("$HOME") {
        Some(rest) => format!("$RUN/home{rest}"),
        None => to.to_string(),
    }
}

/// What the wire log writes for a redacted token.
const REDACTED: &[u8] = b"[redacted]";

/// One frame of the log.
struct Logged {
    conn: usize,
    inbound: bool,
    bytes: Vec<u8>,
}

/// Reads the wire log: every frame, in order, and how many were lost.
fn read_log(path: &Path) -> Result<(Vec<Logged>, u64), Error> {
    use crate::base::error::At;
    let text = std::fs::read(path).at(path)?;
    let mut frames = Vec::new();
    let mut lost = 0;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |problem: &str| Error::Log {
            at: format!("{}:{}", path.display(), i + 1),
            problem: problem.to_string(),
        };
        let record: Value = serde_json::from_slice(line).map_err(|_| bad("not a JSON record"))?;
        if let Some(n) = record.get("lost").and_then(Value::as_u64) {
            lost += n;
            continue;
        }
        let conn = record
            .get("conn")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("no conn"))?;
        let inbound = match record.get("dir").and_then(Value::as_str) {
            Some("in") => true,
            Some("out") => false,
            _ => return Err(bad("dir is neither in nor out")),
        };
        let bytes = match (record.get("frame"), record.get("raw")) {
            (Some(_), _) => frame_text(line).ok_or_else(|| bad("frame is not last"))?.to_vec(),
            (None, Some(Value::String(raw))) => raw.clone().into_bytes(),
            _ => return Err(bad("neither frame nor raw")),
        };
        frames.push(Logged {
            conn: usize::try_from(conn).unwrap_or(usize::MAX),
            inbound,
            bytes,
        });
    }
    Ok((frames, lost))
}

/// The frame's own text in a record: the wire log writes it last, so its
/// escapes and number spellings are the wire's, not a re-serialisation's.
fn frame_text(line: &[u8]) -> Option<&[u8]> {
    let at = memchr::memmem::find(line, b",\"frame\":")?;
    line.get(at + 9..line.len().checked_sub(1)?)
}

fn is_shutdown(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .is_some_and(|v| v.get("method").and_then(Value::as_str) == Some("server.shutdown"))
}

/// Writes the probe and its transcript; returns their paths.
pub fn run(o: &ImportOptions) -> Result<(PathBuf, PathBuf), Error> {
    use crate::base::error::At;
    let (frames, lost) = read_log(&o.log)?;
    if lost > 0 {
        return Err(Error::Log {
            at: o.log.display().to_string(),
            problem: format!("{lost} frame(s) were lost while recording; the session cannot be replayed whole"),
        });
    }
    let frames: Vec<Logged> = frames
        .into_iter()
        .filter(|f| !(f.inbound && is_shutdown(&f.bytes)))
        .collect();
    let events: Vec<Event> = frames
        .iter()
        .map(|f| {
            if f.inbound {
                Event::Client(f.conn, f.bytes.clone())
            } else {
                Event::Daemon(f.conn, f.bytes.clone())
            }
        })
        .collect();
    let capture = CaptureOptions {
        socket: o.socket.clone().unwrap_or_default(),
        listen: None,
        out: o.out.clone(),
        token: REDACTED.to_vec(),
        root: o.root.clone(),
        home: o.home.clone(),
        maps: o.maps.clone(),
        prelude: o.prelude.clone(),
        large: 4096,
    };
    let probe_path = super::write_probe(&capture, &events, false)?;
    let text = std::fs::read_to_string(&probe_path).at(&probe_path)?;
    let probe = crate::probe::parse(&probe_path, &text).map_err(|error| Error::Unparsable { error, probe: text })?;
    let shape = crate::runner::run(&probe, &o.cfg).map_err(|e| Error::Run(e.to_string()))?;
    let transcript = from_log(&shape, &frames, o, &probe.masks)?;
    std::fs::create_dir_all(&o.transcripts).at(&o.transcripts)?;
    let path = o.transcripts.join(format!("{}.txt", probe.name));
    let mut text = transcript.to_text();
    text.insert_str(
        text.find('\n').map_or(0, |n| n + 1),
        &format!(
            "# imported from a wire log by `harness import` ({} frames): replies from the log, other entries recorded from {}\n",
            frames.len(),
            o.cfg.bin.display()
        ),
    );
    std::fs::write(&path, text).at(&path)?;
    Ok((probe_path, path))
}

/// The run's transcript with every reply's value taken from the log.
fn from_log(shape: &Transcript, frames: &[Logged], o: &ImportOptions, masks: &[String]) -> Result<Transcript, Error> {
    let s = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let mut paths = vec![
        (s(&o.root), "$ROOT".into()),
        (s(&o.socket), "$SOCKET".into()),
        (s(&o.home), "$RUN/home".into()),
    ];
    paths.extend(o.maps.iter().map(|(from, to)| (from.clone(), normalized_target(to))));
    let mut norm = Normalizer::new(&paths, &o.cfg.renames).with_masks(masks);
    let mut seen_frames: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut out = Transcript {
        probe: shape.probe.clone(),
        ..Default::default()
    };
    for e in &shape.entries {
        if !is_reply_key(&e.key) {
            out.push(e.key.clone(), e.value.clone());
            continue;
        }
        let (conn, id, nth) = reply_key(&e.key).ok_or_else(|| Error::Log {
            at: e.key.clone(),
            problem: "a reply key the import cannot read".into(),
        })?;
        let logged = frames
            .iter()
            .filter(|f| !f.inbound && f.conn == conn)
            .filter_map(|f| Some((f, serde_json::from_slice::<Value>(&f.bytes).ok()?)))
            .filter(|(_, v)| v.get("type").and_then(Value::as_str) != Some("stream"))
            .filter(|(_, v)| v.get("id").map(Value::to_string).as_deref() == Some(id))
            .nth(nth - 1);
        let Some((frame, _)) = logged else {
            return Err(Error::Log {
                at: e.key.clone(),
                problem: format!("the log has no reply {nth} with id {id} on connection {conn}"),
            });
        };
        out.push(e.key.clone(), norm.json(&frame.bytes));
    }
    // Stream frames, by process id and seq: each once per connection.
    for f in frames.iter().filter(|f| !f.inbound) {
        let Ok(v) = serde_json::from_slice::<Value>(&f.bytes) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some("stream") {
            continue;
        }
        let process = v.get("processId").and_then(Value::as_str).unwrap_or_default();
        let seq = v.get("seq").and_then(Value::as_u64).unwrap_or_default();
        if !seen_frames.insert((format!("c{} {process}", f.conn), seq)) {
            return Err(Error::Log {
                at: format!("connection {} process {process}", f.conn),
                problem: format!("seq {seq} twice"),
            });
        }
    }
    Ok(out)
}

/// `L12 c3 reply 7 #2` → (3, "7", 2).
fn reply_key(key: &str) -> Option<(usize, &str, usize)> {
    let conn = key.split(' ').nth(1)?.strip_prefix('c')?.parse().ok()?;
    let id = crate::derive::key_id(key);
    let nth = key.rsplit_once(" #").and_then(|(_, n)| n.parse().ok()).unwrap_or(1);
    Some((conn, id, nth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_the_records_last_member() {
        let line = br#"{"ts":"x","conn":1,"pid":2,"dir":"out","frame":{"id":1,"result":{"a":"\u003c"}}}"#;
        assert_eq!(frame_text(line).unwrap(), br#"{"id":1,"result":{"a":"\u003c"}}"#);
    }

    #[test]
    fn maps_split_at_the_first_equals_and_refuse_short_sources() {
        let maps = parse_maps(&["/opt/x/bin/tool=$ROOT/bin/tool".into(), "/a=b=c".into()]).unwrap();
        assert_eq!(maps[0], ("/opt/x/bin/tool".into(), "$ROOT/bin/tool".into()));
        assert_eq!(maps[1], ("/a".into(), "b=c".into()));
        for bad in ["/=x", "=x", "no-equals"] {
            assert!(parse_maps(&[bad.into()]).is_err(), "{bad}");
        }
        assert_eq!(normalized_target("$HOME/bin/t"), "$RUN/home/bin/t");
        assert_eq!(normalized_target("$ROOT/bin/t"), "$ROOT/bin/t");
    }

    #[test]
    fn a_map_and_the_prelude_reach_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let o = CaptureOptions {
            socket: "/run/x/rpc.sock".into(),
            listen: None,
            out: dir.path().join("m.probe"),
            token: REDACTED.to_vec(),
            root: Some("/tmp/rec".into()),
            home: None,
            maps: vec![("/tmp/rec/../tools/agent".into(), "$ROOT/bin/agent".into())],
            prelude: "env A=1".into(),
            large: 4096,
        };
        let spawn = br#"{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":{"id":"x","command":"/tmp/rec/../tools/agent","cwd":"/tmp/rec/w"},"auth":"[redacted]"}"#;
        let reply = br#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#;
        let events = [Event::Client(1, spawn.to_vec()), Event::Daemon(1, reply.to_vec())];
        let text = std::fs::read_to_string(super::super::write_probe(&o, &events, false).unwrap()).unwrap();
        let env_at = text.find("env A=1\n").expect(&text);
        let call_at = text
            .find(r#"call c1 1 process.spawn {"id":"p1","command":"$ROOT/bin/agent","cwd":"$ROOT/w"}"#)
            .expect(&text);
        assert!(env_at < call_at, "{text}");
    }

    #[test]
    fn reply_keys() {
        assert_eq!(reply_key("L12 c3 reply 7 #2"), Some((3, "7", 2)));
        assert_eq!(reply_key("L4 c1 reply \"a\""), Some((1, "\"a\"", 1)));
    }
}
