//! Building one case's units: plain requests, their mutations, junk
//! lines, process scenarios and reattaches, with ids and process ids kept
//! coherent within the case.

use super::predict::expand;
use super::vocab::*;
use super::{atoms, render_members, Case, Member, Req, Rng, Unit, Val};

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
        let r = &mut *self.rng;
        let safe_dest = [
            "\"$ROOT/out\"",
            "\"$ROOT/out/sub\"",
            "\"out\"",
            "\"/\"",
            "\"\"",
            "\"$ROOT/d\"",
        ];
        let safe_archive = [
            "\"$ROOT/t.tgz\"",
            "\"$ROOT/bad.tgz\"",
            "\"$ROOT/missing.tgz\"",
            "\"t.tgz\"",
            "\"\"",
        ];
        let safe_repo = ["\"$ROOT/repo\"", "\"$ROOT/d\"", "\"$ROOT/missing\"", "\"\""];
        let safe_wt = ["\"$ROOT/wt\"", "\"$ROOT/wt2\"", "\"wt\"", "\"$ROOT/repo\"", "\"\""];
        let sens = |k: &str, v: String| Member {
            key: format!("\"{k}\""),
            val: Val::Text(v),
            sensitive: true,
        };
        use remora::protocol::method::{FilesMethod as F, GitMethod as G, Method, PluginsMethod, ProcessMethod as P};
        // Exhaustive over the daemon's table: a new method does not build
        // until it has params here.
        let Ok(method) = Method::from_name(method) else {
            return Some(vec![]);
        };
        let p = match method {
            Method::Server(_) => {
                if r.pct(70) {
                    return None;
                }
                vec![Member::new("path", path(r))]
            }
            Method::Files(F::Stat | F::List | F::Validate) | Method::Git(G::Info | G::Status | G::ListBranches) => {
                let good = path(r);
                vec![Member::new("path", field(r, good))]
            }
            Method::Files(F::Read) => {
                let good = path(r);
                let mut v = vec![Member::new("path", field(r, good))];
                if r.pct(60) {
                    let n = r.pick(&INTS).to_string();
                    v.push(Member::new("maxBytes", field(r, n)));
                }
                v
            }
            Method::Files(F::ExtractTar) => {
                let a = r.pick(&safe_archive).to_string();
                let d = r.pick(&safe_dest).to_string();
                let mut v = vec![sens("archivePath", field(r, a)), sens("destDir", field(r, d))];
                if r.pct(15) {
                    v.remove(r.below(2));
                }
                v
            }
            Method::Git(G::WorktreeCreate) => {
                let mut v = vec![];
                if r.pct(80) {
                    let b = r.pick(&safe_repo).to_string();
                    v.push(sens("baseRepo", field(r, b)));
                }
                if r.pct(85) {
                    let names = ["\"feat\"", "\"side\"", "\"\"", "\"a b\"", "\"-x\"", "\"f\\u2028\""];
                    let n = r.pick(&names).to_string();
                    v.push(Member::new("branchName", field(r, n)));
                }
                let w = r.pick(&safe_wt).to_string();
                v.push(sens("worktreePath", field(r, w)));
                if r.pct(40) {
                    let s = ["\"main\"", "\"master\"", "\"side\"", "\"nope\"", "\"\""];
                    let s = r.pick(&s).to_string();
                    v.push(Member::new("sourceBranch", field(r, s)));
                }
                if r.pct(25) {
                    // Attach to a local branch instead of creating one.
                    let e = ["\"side\"", "\"master\"", "\"nope\"", "\"\"", "\"-x\""];
                    let e = r.pick(&e).to_string();
                    v.push(sens("existingBranch", field(r, e)));
                }
                if r.pct(20) {
                    // No small positive deadline: whether git finishes
                    // first would depend on the machine's load.
                    let t = ["0", "-1", "600000", "\"100\"", "1.5", "null"];
                    v.push(Member::new("timeoutMs", r.pick(&t).to_string()));
                }
                v
            }
            Method::Git(G::WorktreeRemove) => {
                let b = r.pick(&safe_repo).to_string();
                let w = r.pick(&safe_wt).to_string();
                vec![sens("baseRepo", field(r, b)), sens("worktreePath", field(r, w))]
            }
            // Process methods outside a scenario: unknown ids and missing
            // fields only (never a command).
            Method::Process(P::Spawn) => match r.below(3) {
                0 => vec![],
                1 => vec![Member::new("id", "\"ghost\"")],
                _ => vec![Member::new("command", "\"\"")],
            },
            Method::Process(P::Stdin) => {
                let d = ["\"YWJj\"", "\"!!\"", "\"\"", "1"];
                let d = r.pick(&d).to_string();
                vec![Member::new("id", "\"ghost\""), Member::new("data", d)]
            }
            Method::Process(P::Kill | P::KillAndWait | P::Reattach) => {
                if r.pct(30) {
                    vec![]
                } else {
                    let id = ["\"ghost\"", "\"\"", "1", "null"];
                    let id = r.pick(&id).to_string();
                    vec![Member::new("id", id)]
                }
            }
            // The harness's socket is not under a `run/<client>/` layout,
            // so the sweep is skipped and nothing on disk is touched.
            Method::Plugins(PluginsMethod::Prune) => {
                let mut v = vec![];
                if r.pct(50) {
                    let k = ["[]", "[\"abc\"]", "null", "[1]", "\"abc\"", "[null]"];
                    v.push(Member::new("keep", r.pick(&k).to_string()));
                }
                if r.pct(60) {
                    let n = r.pick(&INTS).to_string();
                    v.push(Member::new("minAgeDays", field(r, n)));
                }
                v
            }
        };
        Some(p)
    }

    /// Applies envelope and params mutations to a request.
    pub(super) fn mutate(&mut self, req: &mut Req) {
        let r = &mut *self.rng;
        if !r.pct(45) {
            return;
        }
        for _ in 0..1 + r.below(2) {
            let ms = &mut req.members;
            match r.below(16) {
                0 => {
                    // Drop a member.
                    if !ms.is_empty() {
                        ms.remove(r.below(ms.len()));
                    }
                }
                1 => {
                    // Wrong jsonrpc.
                    let v = ["\"1.0\"", "\"2.0 \"", "\"\"", "2", "2.0", "null", "\"2\""];
                    set(ms, "jsonrpc", r.pick_str(&v));
                }
                2 => {
                    let v = [
                        "\"wrong\"",
                        "\"\"",
                        "123",
                        "null",
                        "\"PROBE-TOKEN\"",
                        "\"$TOKEN \"",
                        "\"$TOKEN\\u0000\"",
                    ];
                    set(ms, "auth", r.pick_str(&v));
                }
                3 => {
                    // Case-folded key.
                    let i = r.below(ms.len().max(1));
                    if let Some(m) = ms.get_mut(i) {
                        let k = m.key.trim_matches('"').to_string();
                        m.key = format!("\"{}\"", fold_key(r, &k));
                    }
                }
                4 => {
                    // Duplicate key (case-folded or not), good or bad first.
                    if !ms.is_empty() {
                        let i = r.below(ms.len());
                        let mut d = ms[i].clone();
                        if r.pct(50) {
                            let k = d.key.trim_matches('"').to_string();
                            d.key = format!("\"{}\"", fold_key(r, &k));
                        }
                        d.val = Val::Text(match d.key.to_ascii_lowercase().as_str() {
                            "\"auth\"" => "\"bad\"".into(),
                            "\"method\"" => "\"server.ping\"".into(),
                            _ => id_safe_confused(r),
                        });
                        d.sensitive = false;
                        let at = if r.pct(50) { i } else { ms.len() };
                        ms.insert(at, d);
                    }
                }
                5 => {
                    // A name the table does not have, or a mistyped method.
                    if r.pct(85) {
                        set(ms, "method", r.pick_str(&NOT_METHODS));
                    } else {
                        set(ms, "method", r.pick_str(&["123", "null"]));
                    }
                }
                6 | 7 => {
                    let v = r.pick(&IDS).to_string();
                    if r.pct(10) {
                        ms.retain(|m| m.key != "\"id\"");
                    } else {
                        set(ms, "id", &v);
                    }
                }
                8 => {
                    // An extra unknown member.
                    let k = ["\"extra\"", "\"x\"", "\"\"", "\"id \"", "\"résumé\"", "\"\\u0069d\""];
                    let k = r.pick(&k).to_string();
                    let v = if r.pct(50) { id_safe_confused(r) } else { junk_string(r) };
                    let at = r.below(ms.len() + 1);
                    ms.insert(
                        at,
                        Member {
                            key: k,
                            val: Val::Text(v),
                            sensitive: false,
                        },
                    );
                }
                9 => {
                    // Shuffle member order.
                    for i in (1..ms.len()).rev() {
                        let j = r.below(i + 1);
                        ms.swap(i, j);
                    }
                }
                10 => {
                    // Params not an object / null / absent.
                    let v = ["\"x\"", "[]", "null", "1", "true", "[{}]", "\"\""];
                    if r.pct(25) {
                        ms.retain(|m| m.key != "\"params\"");
                    } else {
                        set(ms, "params", r.pick_str(&v));
                    }
                }
                11 => {
                    // Case-fold or duplicate a params key / add an unknown one.
                    if let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") {
                        if !p.is_empty() && r.pct(60) {
                            let i = r.below(p.len());
                            let mut d = p[i].clone();
                            let k = d.key.trim_matches('"').to_string();
                            d.key = format!("\"{}\"", fold_key(r, &k));
                            if r.pct(50) {
                                p[i] = d;
                            } else {
                                // Duplicate with a non-destructive junk value first.
                                d.val = Val::Text(if d.sensitive {
                                    "\"\"".into()
                                } else {
                                    r.pick(&CONFUSED).to_string()
                                });
                                d.sensitive = false;
                                p.insert(i, d);
                            }
                        } else {
                            let v = r.pick(&CONFUSED).to_string();
                            p.push(Member::new("zzz", v));
                        }
                    }
                }
                12 => {
                    // Line prefix / suffix.
                    let pre = ["", "$bytes(\\x20)", "$bytes(\\t)", "$bytes(\\xef\\xbb\\xbf)"];
                    let suf = [
                        "$bytes(\\r)",
                        "$bytes(\\x20)",
                        " x",
                        "}",
                        "{}",
                        ",",
                        "$bytes(\\x00)",
                        "\\n",
                    ];
                    if r.pct(40) {
                        req.prefix = r.pick(&pre).to_string();
                    } else {
                        req.suffix = r.pick(&suf).to_string();
                    }
                }
                13 => {
                    // Whitespace between tokens / deep nesting in an unknown member.
                    let deep = if r.pct(50) {
                        format!("{}1{}", "[".repeat(60), "]".repeat(60))
                    } else {
                        "{ \"a\" : [ 1 , 2 ] }".into()
                    };
                    ms.push(Member::new("nest", deep));
                }
                14 => {
                    // Truncate the object (malformed JSON). A truncated
                    // request with destructive parameters is not shrunk
                    // character by character.
                    if ms
                        .iter()
                        .any(|m| m.sensitive || matches!(&m.val, Val::Obj(p) if p.iter().any(|m| m.sensitive)))
                    {
                        req.shrinkable = false;
                    }
                    req.raw = Some({
                        let t = req_text_members(ms);
                        let cut = r.below(atoms(&t).len().max(1));
                        safe_cut(&t, cut)
                    });
                }
                _ => {
                    // Junk inside string values of non-sensitive params.
                    if let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") {
                        for m in p.iter_mut().filter(|m| !m.sensitive) {
                            if let Val::Text(t) = &mut m.val {
                                if t.starts_with('"') && t.ends_with('"') && t.len() >= 2 && r.pct(50) {
                                    let j = junk_string(r);
                                    *t = join_junk(t, &j);
                                }
                            }
                        }
                    }
                }
            }
        }
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
        match self.rng.below(4) {
            0 | 1 => {
                // A finite command, then maybe a reattach on some connection.
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
            2 => {
                // A long-running child ended by kill / killAndWait, then KILL.
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
            _ => {
                // stdin: a child reading one line; mutated writes, then "\n".
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
            // it (a notification, a folded key): its frames would race the
            // rest of the case.
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

/// A mistyped value that may end up as the request id: none that expands
/// a path, since an `await` id is literal and the path differs per run.
fn id_safe_confused(r: &mut Rng) -> String {
    loop {
        let c = r.pick(&CONFUSED);
        if !c.contains('$') {
            return c.to_string();
        }
    }
}

pub(super) fn data_is_bad(p: &[Member]) -> bool {
    p.iter()
        .any(|m| m.key == "\"data\"" && matches!(&m.val, Val::Text(t) if !t.starts_with("\"$b64")))
}

pub(super) fn req_text_members(ms: &[Member]) -> String {
    let mut s = String::new();
    render_members(&mut s, ms);
    s
}

/// Cuts template text after `at` atoms (never inside an escape or a
/// `$…` template).
pub(super) fn safe_cut(t: &str, at: usize) -> String {
    atoms(t).into_iter().take(at).collect()
}
pub(super) fn set(ms: &mut [Member], key: &str, val: &str) {
    let k = format!("\"{key}\"");
    for m in ms.iter_mut().filter(|m| m.key == k) {
        m.val = Val::Text(val.to_string());
        m.sensitive = false;
    }
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
