//! Building one case's units: plain requests, their mutations, junk
//! lines, process scenarios and reattaches, with ids and process ids kept
//! coherent within the case.

use super::mutate::{mutate, set};
use super::params::params;
use super::predict::expand;
use super::vocab::*;
use super::{Case, Member, Req, Rng, Unit, Val};

/// State that makes process scenarios and ids coherent within a case.
pub(super) struct Gen<'a> {
    rng: &'a mut Rng,
    nconns: u8,
    next_id: u64,
    procs: u32,
    /// The case number: part of every process id, so ids are unique across
    /// the cases a live daemon runs.
    case: u64,
    /// Process ids that were spawned and have exited (for reattach).
    exited: Vec<(String, u8)>,
}

impl<'a> Gen<'a> {
    /// A generator for case `case` with one connection (unit tests).
    #[cfg(test)]
    pub(super) fn for_test(rng: &'a mut Rng, case: u64) -> Gen<'a> {
        Gen {
            rng,
            nconns: 1,
            next_id: 0,
            procs: 0,
            case,
            exited: Vec::new(),
        }
    }

    pub(super) fn conn(&mut self) -> u8 {
        1 + self.rng.below(self.nconns as usize) as u8
    }

    pub(super) fn id(&mut self) -> String {
        self.next_id += 1;
        if self.rng.pct(20) {
            self.rng.pick(&IDS).to_string()
        } else if self.rng.pct(20) {
            format!("\"r{}\"", self.next_id)
        } else {
            self.next_id.to_string()
        }
    }

    /// A plain, valid request.
    pub(super) fn plain(&mut self, conn: u8, method: &str, params: Option<Vec<Member>>) -> Req {
        let id = self.id();
        let mut members = vec![
            Member::new("jsonrpc", "\"2.0\""),
            Member::new("id", id),
            Member::new("method", format!("\"{method}\"")),
        ];
        if let Some(p) = params {
            members.push(Member {
                key: "\"params\"".into(),
                val: Val::Obj(p),
                sensitive: false,
            });
        }
        members.push(Member::new("auth", "\"$TOKEN\""));
        Req {
            conn,
            prefix: String::new(),
            members,
            suffix: String::new(),
            raw: None,
            shrinkable: true,
        }
    }

    /// A spawn request with a plain numeric id (so the harness can tell
    /// whether it failed and not wait for frames that never come).
    pub(super) fn spawn_req(&mut self, conn: u8, p: Vec<Member>) -> Req {
        self.numbered(conn, "process.spawn", p)
    }

    /// A plain request with a plain numeric id: for the requests a process
    /// scenario depends on (the spawn, the final newline or KILL), which
    /// must never be lost to an id the decoder rejects.
    pub(super) fn numbered(&mut self, conn: u8, method: &str, p: Vec<Member>) -> Req {
        let mut r = self.plain(conn, method, Some(p));
        self.next_id += 1;
        set(&mut r.members, "id", &self.next_id.to_string());
        r
    }

    /// Params of a (non-process) method, from the fixture-aware vocabulary.
    pub(super) fn params(&mut self, method: &str) -> Option<Vec<Member>> {
        params(self.rng, method)
    }

    /// Applies envelope and params mutations to a request.
    pub(super) fn mutate(&mut self, req: &mut Req) {
        mutate(self.rng, req);
    }

    /// One plain/mutated request of a non-process method.
    pub(super) fn request(&mut self, method: &str) -> Req {
        let conn = self.conn();
        let params = self.params(method);
        let mut req = self.plain(conn, method, params);
        self.mutate(&mut req);
        req
    }

    /// A junk line that is not a request object.
    pub(super) fn junk_line(&mut self) -> Req {
        let lines = [
            "garbage",
            "[1,2]",
            "\"str\"",
            "{",
            "{}",
            "null",
            "1",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\"} x",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\",}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"files.stat\",\"params\":{\"x\":[}},\"auth\":\"$TOKEN\"}",
            "$bytes(\\xff\\xfe)",
            "{\"id\":1,\"method\":\"server.ping\"",
            "",
            "$bytes(\\x20\\x20\\x20)",
            "{'id':1}",
            "{\"jsonrpc\":\"2.0\",\"id\":$repeat(50,[)1$repeat(50,]),\"method\":\"server.ping\",\"auth\":\"$TOKEN\"}",
            "{\"a\":\"\\x\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\"}{\"id\":2}",
        ];
        let conn = self.conn();
        Req {
            conn,
            prefix: String::new(),
            members: Vec::new(),
            suffix: String::new(),
            raw: Some(self.rng.pick(&lines).to_string()),
            shrinkable: true,
        }
    }

    pub(super) fn pid(&mut self) -> String {
        self.procs += 1;
        format!("p{}-{}", self.case, self.procs)
    }

    pub(super) fn spawn_params(&mut self, pid: &str, cmd: &str, args: &[&str], mutate: bool) -> Vec<Member> {
        let r = &mut *self.rng;
        let mut v = vec![
            Member::new("id", format!("\"{pid}\"")),
            Member {
                key: "\"command\"".into(),
                val: Val::Text(format!("\"{cmd}\"")),
                sensitive: true,
            },
        ];
        if !args.is_empty() {
            let a: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
            v.push(Member {
                key: "\"args\"".into(),
                val: Val::Text(format!("[{}]", a.join(","))),
                sensitive: true,
            });
        }
        if mutate && r.pct(30) {
            let cwds = [
                "\"$ROOT/d\"",
                "\"d\"",
                "\"/nonexistent\"",
                "\"\"",
                "\"$ROOT/a.txt\"",
                "1",
                "null",
            ];
            v.push(Member {
                key: "\"cwd\"".into(),
                val: Val::Text(r.pick(&cwds).to_string()),
                sensitive: true,
            });
        }
        if mutate && r.pct(25) {
            let envs = [
                "{\"FOO\":\"bar\"}",
                "{\"FOO\":\"\\u2028<>\"}",
                "{\"FOO\":1}",
                "[\"FOO=bar\"]",
                "null",
                "{\"\":\"x\"}",
                "{\"A=B\":\"c\"}",
            ];
            v.push(Member::new("env", r.pick(&envs).to_string()));
        }
        if mutate && r.pct(12) {
            // CT-1: the reply gains pid and startTime (normalised).
            let w = ["true", "false", "null", "1", "\"true\""];
            v.push(Member::new("wantPid", r.pick(&w).to_string()));
        }
        if mutate && r.pct(10) {
            let d = ["true", "false", "null", "0"];
            v.push(Member::new("disableShellAgentSocket", r.pick(&d).to_string()));
        }
        if mutate && r.pct(15) {
            // Type confusion in a field spawn reads.
            // A mistyped id is never a string: a string id would register
            // a process whose id the next case on a live daemon could meet.
            let i = r.below(v.len());
            let bad = loop {
                let c = r.pick(&CONFUSED);
                if i != 0 || !c.starts_with('"') {
                    break c.to_string();
                }
            };
            v[i].val = Val::Text(bad);
        }
        v
    }

    /// A process scenario.
    pub(super) fn process(&mut self) -> Unit {
        let conn = self.conn();
        let pid = self.pid();
        match self.rng.below(4) {
            0 | 1 => self.finite_process(conn, pid),
            2 => self.killed_process(conn, pid),
            _ => self.stdin_process(conn, pid),
        }
    }

    /// A finite command (a later reattach may replay it), then maybe a
    /// kill of an unknown process.
    fn finite_process(&mut self, conn: u8, pid: String) -> Unit {
        let finite: [(&str, &[&str]); 10] = [
            ("echo", &["hi"]),
            ("printf", &["a<b>&\\u2028\\n"]),
            ("true", &[]),
            ("false", &[]),
            ("sh", &["-c", "echo out; echo err >&2; exit 3"]),
            ("sh", &["-c", "printf \\\"%s\\\" \\\"$$FOO\\\""]),
            ("sh", &["-c", "kill -TERM $$$$"]),
            ("nonexistent-cmd", &[]),
            ("/nonexistent", &[]),
            ("printf", &["\\u00ff\\u0000x"]),
        ];
        let (cmd, args) = *self.rng.pick(&finite);
        let p = self.spawn_params(&pid, cmd, args, true);
        let mut spawn = self.spawn_req(conn, p);
        spawn.shrinkable = true;
        let mut reqs = vec![spawn];
        if self.rng.pct(20) {
            // A second spawn with the same id after exit is not
            // deterministic while the first runs: only an unknown one.
            let p = vec![Member::new("id", "\"ghost\"")];
            let mut k = self.plain(conn, "process.kill", Some(p));
            self.mutate(&mut k);
            reqs.push(k);
        }
        self.exited.push((pid.clone(), conn));
        Unit::Proc {
            reqs,
            conn,
            proc_id: pid,
        }
    }

    /// A long-running child ended by kill or killAndWait, then by KILL.
    fn killed_process(&mut self, conn: u8, pid: String) -> Unit {
        let p = self.spawn_params(&pid, "sleep", &["30"], false);
        let spawn = self.spawn_req(conn, p);
        let mut reqs = vec![spawn];
        let (method, extra): (&str, Vec<Member>) = if self.rng.pct(50) {
            let sigs = [
                "\"TERM\"",
                "\"KILL\"",
                "\"INT\"",
                "\"SIGTERM\"",
                "\"BOGUS\"",
                "9",
                "\"\"",
                "null",
            ];
            let s = self.rng.pick(&sigs).to_string();
            ("process.kill", vec![Member::new("signal", s)])
        } else {
            let mut v = vec![];
            if self.rng.pct(50) {
                let t = ["50", "200", "0", "-100", "\"100\"", "1.5", "null"];
                v.push(Member::new("timeoutMs", self.rng.pick(&t).to_string()));
            }
            if self.rng.pct(30) {
                let e = ["true", "false", "\"false\"", "null", "0"];
                v.push(Member::new("escalate", self.rng.pick(&e).to_string()));
            }
            ("process.killAndWait", v)
        };
        let mut p = vec![Member::new("id", format!("\"{pid}\""))];
        p.extend(extra);
        let mut k = self.plain(conn, method, Some(p));
        self.mutate(&mut k);
        reqs.push(k);
        let fin = vec![
            Member::new("id", format!("\"{pid}\"")),
            Member::new("signal", "\"KILL\""),
        ];
        let mut fin = self.numbered(conn, "process.kill", fin);
        fin.shrinkable = false;
        reqs.push(fin);
        Unit::Proc {
            reqs,
            conn,
            proc_id: pid,
        }
    }

    /// A child reading one line: mutated writes to its stdin, then "\n".
    fn stdin_process(&mut self, conn: u8, pid: String) -> Unit {
        let p = self.spawn_params(&pid, "sh", &["-c", "read -r x; printf %s \\\"$$x\\\""], false);
        let spawn = self.spawn_req(conn, p);
        let mut reqs = vec![spawn];
        let mut applied: i64 = 0;
        for _ in 0..1 + self.rng.below(3) {
            let c2 = self.conn();
            let datas = ["abc", "x", "", "<>&", "\\xe2\\x80\\xa8", "\\xff"];
            let d = self.rng.pick(&datas).to_string();
            let len = expand(&format!("$bytes({d})")).len() as i64;
            let mut p = vec![Member::new("id", format!("\"{pid}\""))];
            let data = if self.rng.pct(12) {
                let bad = ["\"!!!\"", "\"YW\"", "\"YWJj=\"", "123", "null", "\"\""];
                self.rng.pick(&bad).to_string()
            } else {
                b64(&d)
            };
            p.push(Member::new("data", data));
            if self.rng.pct(60) {
                let offs = [
                    applied.to_string(),
                    (applied + 1).to_string(),
                    (applied - 1).max(0).to_string(),
                    "0".into(),
                    "-1".into(),
                    "9223372036854775807".into(),
                    "-9223372036854775808".into(),
                    "1.0".into(),
                    "\"0\"".into(),
                    "null".into(),
                ];
                let o = self.rng.pick(&offs).clone();
                p.push(Member::new("offset", o));
            }
            if !data_is_bad(&p) {
                applied += len;
            }
            let mut w = self.plain(c2, "process.stdin", Some(p));
            self.mutate(&mut w);
            reqs.push(w);
        }
        let fin = vec![Member::new("id", format!("\"{pid}\"")), Member::new("data", b64("\\n"))];
        let mut fin = self.numbered(conn, "process.stdin", fin);
        fin.shrinkable = false;
        reqs.push(fin);
        self.exited.push((pid.clone(), conn));
        Unit::Proc {
            reqs,
            conn,
            proc_id: pid,
        }
    }

    /// A reattach to an exited process (or an unknown one).
    pub(super) fn reattach(&mut self) -> Unit {
        let conn = self.conn();
        let known = if self.exited.is_empty() {
            None
        } else {
            let i = self.rng.below(self.exited.len());
            Some(self.exited[i].clone())
        };
        let pid = known.as_ref().map(|k| k.0.clone()).unwrap_or_else(|| "ghost".into());
        // All or nothing: a partial replay (fromSeq 1, 2) of a child that
        // wrote to both streams depends on which pipe was read first.
        let seqs = ["0", "-1", "100", "9223372036854775807", "\"0\"", "1.5", "null"];
        let mut p = vec![Member::new("id", format!("\"{pid}\""))];
        if self.rng.pct(85) {
            p.push(Member::new("fromSeq", self.rng.pick(&seqs).to_string()));
        }
        if self.rng.pct(15) {
            p.push(Member::new(
                "wantPid",
                self.rng.pick_str(&["true", "false"]).to_string(),
            ));
        }
        let plain = self.plain(conn, "process.reattach", Some(p));
        let mut req = plain.clone();
        self.mutate(&mut req);
        if known.is_some() && req.process_request().is_some() && !req.starts_process(&pid) {
            // The mutation keeps the replay but loses the await-exit after
            // it (a folded key): its frames would race the rest of the
            // case. The unmutated request always leads its await-exit: an
            // envelope id the decoder rejects (`1e400`) makes it replay
            // nothing, and a `null` one still replays, answered with null.
            req = plain;
        }
        match known {
            // Replayed frames land on this connection: record them.
            Some(_) => Unit::Proc {
                reqs: vec![req],
                conn,
                proc_id: pid,
            },
            None => Unit::Req(req),
        }
    }
}

pub(super) fn data_is_bad(p: &[Member]) -> bool {
    p.iter()
        .any(|m| m.key == "\"data\"" && matches!(&m.val, Val::Text(t) if !t.starts_with("\"$b64")))
}

/// Generates case `n` of `seed`.
pub fn generate(seed: u64, n: u64) -> Case {
    let mut rng = Rng::for_case(seed, n);
    let nconns = 1 + rng.below(3) as u8;
    let mut units: Vec<Unit> = Vec::new();
    let nreq = 1 + rng.below(6);
    let mut g = Gen {
        rng: &mut rng,
        nconns,
        next_id: 0,
        procs: 0,
        case: n,
        exited: Vec::new(),
    };
    let mut body = Vec::new();
    let mut uses_git = false;
    let mut shutdown = None;
    for _ in 0..nreq {
        let roll = g.rng.below(100);
        let unit = if roll < 8 {
            Unit::Req(g.junk_line())
        } else if roll < 22 {
            g.process()
        } else if roll < 27 {
            g.reattach()
        } else if roll < 35 {
            let (a, b) = (*g.rng.pick(&READ_ONLY), *g.rng.pick(&READ_ONLY));
            uses_git |= a.starts_with("git") || b.starts_with("git");
            let (ra, rb) = (g.request(a), g.request(b));
            Unit::Pair(ra, rb)
        } else if roll < 38 {
            Unit::Close(g.conn())
        } else {
            let m = loop {
                let m = *g.rng.pick(&METHODS);
                if m == "server.shutdown" {
                    if shutdown.is_none() && g.rng.pct(30) {
                        shutdown = Some(g.conn());
                    }
                    continue;
                }
                break m;
            };
            uses_git |= m.starts_with("git");
            Unit::Req(g.request(m))
        };
        body.push(unit);
    }
    if g.rng.pct(15) {
        uses_git = true;
    }
    for f in FIXTURES {
        units.push(Unit::Fixture(f.to_string()));
    }
    if uses_git {
        for f in GIT_FIXTURE {
            units.push(Unit::Fixture(f.to_string()));
        }
    }
    units.extend(body);
    if let Some(c) = shutdown {
        units.push(Unit::Shutdown(c));
    }
    let case = Case { seed, n, units };
    debug_assert!(case.awaits_every_process(), "{}", case.render(&[]));
    case
}
