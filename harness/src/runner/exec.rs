//! Command-line steps (`run`): the binary run in `$ROOT` with a deadline,
//! its exit code, stdout and stderr recorded.

use super::conn::bounded;
use super::{exit_text, Runner};
use crate::dut::wait_or_kill;
use crate::transcript::Timing;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

impl Runner<'_> {
    pub(super) fn run_cli(
        &mut self,
        line: usize,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<Vec<u8>>,
        timeout: Duration,
    ) {
        let mut given = self.env();
        given.extend(env.iter().cloned());
        let mut cmd = self.cfg.transport.command(&self.cfg.bin);
        cmd.args(args)
            .current_dir(&self.root)
            .env_clear()
            .envs(given.iter().cloned())
            .envs(self.cfg.transport.env(&given))
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.t.push(format!("L{line} run exit"), format!("spawn failed: {e}"));
                return;
            }
        };
        if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
            std::thread::spawn(move || {
                let _ = w.write_all(&data);
            });
        }
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let ho = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let he = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let status = wait_or_kill(&mut child, started + timeout);
        let elapsed = started.elapsed();
        // A detached grandchild may hold the pipes open: do not wait forever.
        let join = |h: std::thread::JoinHandle<Vec<u8>>| -> Vec<u8> {
            let until = Instant::now() + Duration::from_secs(2);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if h.is_finished() {
                h.join().unwrap_or_default()
            } else {
                b"<pipe held open by a detached process>".to_vec()
            }
        };
        let (o, e) = (join(ho), join(he));
        self.t.timings.push(Timing {
            label: format!("L{line} run"),
            micros: elapsed.as_micros() as u64,
        });
        let code = match status {
            Some(s) => exit_text(&s),
            None => "timeout (killed)".to_string(),
        };
        self.t.push(format!("L{line} run exit"), code);
        let o = bounded(&self.norm.output(&o));
        let e = bounded(&self.norm.output(&e));
        self.t.push(format!("L{line} run stdout"), o);
        self.t.push(format!("L{line} run stderr"), e);
    }
}
