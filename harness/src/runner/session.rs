//! Connections and awaits: opening socket and bridge connections, writing
//! request lines, and turning what arrived into transcript entries.

use super::conn::{bounded, id_matches, seq_runs, spawn_reader, Conn, ConnState, Shared};
use super::{contains, exit_text, Runner};
use crate::base::sync::{lock, wait_timeout};
use crate::dut::wait_or_kill;
use crate::transcript::Timing;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{ChildStdin, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

impl Runner<'_> {
    pub(super) fn connect(&mut self, line: usize, name: &str, bridge: bool) {
        if !self.daemon_started {
            self.start(line, &[]);
        }
        let shared: Shared = Arc::new((Mutex::new(ConnState::default()), Condvar::new()));
        // A bridged transport (`--via-bridge`, `--wine`) dials every
        // connection through a `-bridge` child.
        if bridge || self.cfg.transport.bridged() {
            let mut cmd = self.cfg.transport.command(&self.cfg.bin);
            cmd.arg("-bridge")
                .arg("-socket")
                .arg(&self.socket)
                .current_dir(&self.root)
                .env_clear()
                .envs(self.env())
                .envs(self.cfg.transport.env(&self.env()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            match cmd.spawn() {
                Ok(mut child) => {
                    let stdin: ChildStdin = child.stdin.take().expect("piped");
                    spawn_reader(child.stdout.take().expect("piped"), shared.clone());
                    let mut err = child.stderr.take().expect("piped");
                    let h = std::thread::spawn(move || {
                        let mut v = Vec::new();
                        let _ = err.read_to_end(&mut v);
                        v
                    });
                    self.conns.insert(
                        name.to_string(),
                        Conn {
                            writer: Some(Box::new(stdin)),
                            shared,
                            stream: None,
                            bridge: Some(child),
                            bridge_err: Some(h),
                            record_bridge: bridge,
                            sent: Default::default(),
                        },
                    );
                }
                Err(e) => self
                    .t
                    .push(format!("L{line} connect {name}"), format!("bridge spawn failed: {e}")),
            }
            return;
        }
        match UnixStream::connect(&self.socket) {
            Ok(s) => {
                let r = s.try_clone().expect("clone socket");
                spawn_reader(r, shared.clone());
                let w = s.try_clone().expect("clone socket");
                self.conns.insert(
                    name.to_string(),
                    Conn {
                        writer: Some(Box::new(w)),
                        shared,
                        stream: Some(s),
                        bridge: None,
                        bridge_err: None,
                        record_bridge: false,
                        sent: Default::default(),
                    },
                );
            }
            Err(e) => self.t.push(
                format!("L{line} connect {name}"),
                format!("connect failed: {}", e.kind()),
            ),
        }
    }

    pub(super) fn write(&mut self, line: usize, conn: &str, bytes: &[u8], id: Option<Value>) {
        if !self.conns.contains_key(conn) {
            self.connect(line, conn, false);
        }
        let Some(c) = self.conns.get_mut(conn) else {
            self.t.push(format!("L{line} {conn} send"), "no connection");
            return;
        };
        let res = match c.writer.as_mut() {
            Some(w) => w.write_all(bytes).and_then(|_| w.flush()),
            None => Err(std::io::Error::other("closed")),
        };
        c.sent.observe(bytes);
        // A write to a peer that already closed is not recorded: whether it
        // fails depends on timing. The awaits that follow show the closure.
        let _ = res;
        if let Some(id) = id {
            self.sent.insert((conn.to_string(), id.to_string()), Instant::now());
            // Remember spawn/reattach requests so a failed one does not make
            // a later await-exit wait for frames that will never come.
            if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(bytes) {
                let method = m.get("method").and_then(Value::as_str).unwrap_or("");
                let pid = m.get("params").and_then(|p| p.get("id")).and_then(Value::as_str);
                if let (true, Some(pid)) = (matches!(method, "process.spawn" | "process.reattach"), pid) {
                    self.proc_requests
                        .insert((conn.to_string(), id.to_string()), pid.to_string());
                }
            }
        }
    }

    /// Waits until `cond` holds on `conn`'s state; `None` if no such conn.
    pub(super) fn wait_conn(&self, conn: &str, cond: impl FnMut(&mut ConnState) -> bool) -> Option<bool> {
        self.wait_conn_for(conn, self.timeout(), cond)
    }

    /// [`Self::wait_conn`] with its own limit (never past the case's).
    pub(super) fn wait_conn_for(
        &self,
        conn: &str,
        limit: Duration,
        mut cond: impl FnMut(&mut ConnState) -> bool,
    ) -> Option<bool> {
        let c = self.conns.get(conn)?;
        let (m, cv) = &*c.shared;
        let deadline = Instant::now() + limit.min(self.timeout());
        let mut st = lock(m);
        loop {
            if cond(&mut st) {
                return Some(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Some(false);
            }
            st = wait_timeout(cv, st, deadline - now);
        }
    }

    pub(super) fn await_reply(&mut self, line: usize, conn: &str, id: &str) {
        let want: Value = serde_json::from_str(id).unwrap_or(Value::Null);
        let mut got: Option<(Vec<u8>, Instant)> = None;
        let mut eof = false;
        let ok = self.wait_conn(conn, |st| {
            if let Some(r) = st.replies.iter_mut().find(|r| !r.taken && id_matches(&want, &r.id)) {
                r.taken = true;
                got = Some((r.raw.clone(), r.at));
                return true;
            }
            eof = st.eof;
            st.eof
        });
        let key = format!("L{line} {conn} reply {id}");
        match (ok, got) {
            (None, _) => self.t.push(key, "no such connection"),
            (_, Some((raw, at))) => {
                if let Some(sent) = self.sent.remove(&(conn.to_string(), want.to_string())) {
                    self.t.timings.push(Timing {
                        label: key.clone(),
                        micros: at.saturating_duration_since(sent).as_micros() as u64,
                    });
                }
                if let Some(pid) = self.proc_requests.remove(&(conn.to_string(), want.to_string())) {
                    let ok = serde_json::from_slice::<Value>(&raw)
                        .ok()
                        .and_then(|v| v.get("result").cloned());
                    let alive = ok.as_ref().is_some_and(|r| {
                        r.get("success") == Some(&Value::Bool(true)) || r.get("found") == Some(&Value::Bool(true))
                    });
                    // A reattach replays before it replies: for a process
                    // that is no longer running, every frame this
                    // connection will get for it has arrived.
                    let finished = ok.as_ref().is_some_and(|r| {
                        r.get("found") == Some(&Value::Bool(true)) && r.get("running") == Some(&Value::Bool(false))
                    });
                    if !alive {
                        self.dead_procs.insert((conn.to_string(), pid));
                    } else if finished {
                        self.settled_procs.insert((conn.to_string(), pid));
                    }
                }
                let v = bounded(&self.norm.json(&raw));
                self.t.push(key, v);
            }
            (Some(_), None) if eof => self.t.push(key, "<connection closed, no reply>"),
            (Some(_), None) => self.t.push(key, "<timeout, no reply>"),
        }
    }

    pub(super) fn await_exit(&mut self, line: usize, conn: &str, proc_id: &str) {
        let p = proc_id.to_string();
        let dead = self.dead_procs.contains(&(conn.to_string(), p.clone()));
        let settled = self.settled_procs.contains(&(conn.to_string(), p.clone()));
        let ok = self.wait_conn(conn, |st| {
            st.eof
                || settled
                || st.procs.get(&p).is_some_and(|ps| ps.exit.is_some())
                // An earlier await-exit leaves an empty entry: no frames
                // still means nothing will come.
                || (dead && st.procs.get(&p).is_none_or(|ps| ps.frames == 0))
        });
        if ok.is_none() {
            self.t.push(format!("L{line} {conn} {proc_id}"), "no such connection");
            return;
        }
        let c = &self.conns[conn];
        let mut st = lock(&c.shared.0);
        let ps = st.procs.entry(p).or_default();
        ps.recorded_frames = Some(ps.frames);
        let prefix = format!("L{line} {conn} {proc_id}");
        let mut entries: Vec<(String, Vec<u8>)> = vec![
            (format!("{prefix} stdout"), bounded(&ps.stdout)),
            (format!("{prefix} stderr"), bounded(&ps.stderr)),
        ];
        let exit = ps.exit.clone().unwrap_or_else(|| b"<no exit frame>".to_vec());
        entries.push((format!("{prefix} exit"), exit));
        let shapes: Vec<Vec<u8>> = ps.shapes.iter().cloned().collect();
        entries.push((format!("{prefix} shapes"), shapes.join(&b'\n')));
        let mut seq = seq_runs(&ps.seqs);
        if ps.exit.is_some() && ps.seqs.last() != ps.seqs.iter().max() {
            seq.push_str("; exit not last");
        }
        // Present or not, never how many: how output is cut into frames
        // depends on pipe scheduling, and a reattach on the spawning
        // connection replays them all after the first exit.
        if ps.frames_after_exit > 0 {
            seq.push_str("; frames after exit");
        }
        for b in &ps.bad {
            seq.push_str("; ");
            seq.push_str(b);
        }
        entries.push((format!("{prefix} seq"), seq.into_bytes()));
        drop(st);
        for (k, v) in entries {
            let v = self.norm.text(&v);
            self.t.push(k, v);
        }
    }

    pub(super) fn await_output(&mut self, line: usize, conn: &str, proc_id: &str, stream: &str, needle: &[u8]) {
        let p = proc_id.to_string();
        let dead = self.dead_procs.contains(&(conn.to_string(), p.clone()));
        let mut seen = Vec::new();
        let ok = self.wait_conn(conn, |st| {
            let Some(ps) = st.procs.get(&p) else {
                return st.eof || dead;
            };
            let buf = if stream == "stdout" { &ps.stdout } else { &ps.stderr };
            seen = buf.clone();
            contains(buf, needle) || st.eof
        });
        let v = match ok {
            None => b"no such connection".to_vec(),
            Some(_) if contains(&seen, needle) => b"seen".to_vec(),
            Some(_) => {
                let mut v = b"not seen; got: ".to_vec();
                v.extend(bounded(&seen));
                v
            }
        };
        self.t.push(format!("L{line} {conn} {proc_id} {stream} has"), v);
    }

    /// Unawaited replies that arrived, marked taken, joined by newlines.
    pub(super) fn take_unawaited(&mut self, conn: &str) -> Vec<u8> {
        let Some(c) = self.conns.get(conn) else {
            return b"no such connection".to_vec();
        };
        let mut st = lock(&c.shared.0);
        let mut out: Vec<Vec<u8>> = Vec::new();
        for r in st.replies.iter_mut().filter(|r| !r.taken) {
            r.taken = true;
            out.push(r.raw.clone());
        }
        drop(st);
        let out: Vec<Vec<u8>> = out.iter().map(|r| bounded(&self.norm.json(r))).collect();
        out.join(&b'\n')
    }

    pub(super) fn await_close(&mut self, line: usize, conn: &str) {
        let ok = self.wait_conn(conn, |st| st.eof);
        let v = match ok {
            None => "no such connection",
            Some(true) => "closed by server",
            Some(false) => "still open at timeout",
        };
        self.t.push(format!("L{line} {conn} close"), v);
        let rest = self.take_unawaited(conn);
        if !rest.is_empty() {
            self.t.push(format!("L{line} {conn} unawaited"), rest);
        }
    }

    pub(super) fn close(&mut self, line: usize, conn: &str) {
        let Some(mut c) = self.conns.remove(conn) else {
            self.t.push(format!("L{line} close {conn}"), "no such connection");
            return;
        };
        if let Some(s) = &c.stream {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        c.writer = None;
        if let Some(v) = self.finish_bridge(&mut c) {
            self.t.push(format!("L{line} {conn} bridge"), v);
        }
    }

    pub(super) fn finish_bridge(&mut self, c: &mut Conn) -> Option<Vec<u8>> {
        let mut child = c.bridge.take()?;
        c.writer = None;
        let status = wait_or_kill(&mut child, Instant::now() + Duration::from_secs(5));
        let err = c.bridge_err.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let mut v = match status {
            Some(s) => format!("exit={} stderr=", exit_text(&s)).into_bytes(),
            None => b"still running after stdin closed (killed) stderr=".to_vec(),
        };
        v.extend(self.norm.output(&err));
        c.record_bridge.then_some(v)
    }
}
