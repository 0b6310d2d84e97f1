//! The daemon's lifecycle: starting it and waiting for its banner,
//! stopping it with an authenticated `server.shutdown`, and killing what
//! a run leaves behind.

use super::{contains, json_string, Runner};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A started daemon.
pub(super) struct Daemon {
    pub(super) launcher: Child,
}

impl Runner<'_> {
    pub(super) fn start(&mut self, line: usize, extra: &[String]) {
        if self.daemon_started {
            return;
        }
        self.daemon_started = true;
        let token_file = self.run.join("token");
        if let Err(e) = std::fs::write(&token_file, &self.probe.token_file) {
            self.t
                .push(format!("L{line} start"), format!("cannot write token: {e}"));
            return;
        }
        let log = match std::fs::File::create(&self.log) {
            Ok(f) => f,
            Err(e) => {
                self.t.push(format!("L{line} start"), format!("cannot create log: {e}"));
                return;
            }
        };
        let mut cmd = Command::new(&self.cfg.bin);
        cmd.arg("-serve")
            .arg("-socket")
            .arg(&self.socket)
            .arg("-token-file")
            .arg(&token_file)
            .args(extra)
            .current_dir(&self.root)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.t.push(format!("L{line} start"), format!("spawn failed: {e}"));
                return;
            }
        };
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut banner = Vec::new();
            let _ = r.read_until(b'\n', &mut banner);
            let _ = tx.send(banner);
            // Keep draining so a foreground daemon never sees a broken pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let banner = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let v = self.norm.output(&banner);
        self.t.push(format!("L{line} banner"), v);
        // A self-daemonizing launcher exits once the banner is out; the
        // socket may appear a moment after. Wait for it briefly.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !banner.is_empty() && !self.socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.daemon = Some(Daemon { launcher: child });
    }

    pub(super) fn stop_daemon(&mut self) {
        let Some(mut d) = self.daemon.take() else { return };
        if self.socket.exists() {
            if let Ok(mut s) = UnixStream::connect(&self.socket) {
                let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":".to_vec();
                line.extend(json_string(&self.ctx.token));
                line.extend_from_slice(b"}\n");
                let _ = s.write_all(&line);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.socket.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match d.launcher.try_wait() {
                Ok(Some(_)) => break,
                _ if Instant::now() >= deadline => {
                    let _ = d.launcher.kill();
                    let _ = d.launcher.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

/// Pids of processes whose command line contains `needle`.
pub fn pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if contains(&cmd, needle) {
                out.push(pid);
            }
        }
    }
    out
}

/// SIGKILLs every process whose command line mentions `dir`.
pub fn kill_mentioning(dir: &Path) {
    for pid in pids_mentioning(dir.as_os_str().as_encoded_bytes()) {
        // SAFETY: plain kill(2) on a pid we found; errors are ignored.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Waits for `child` until `deadline`; past it the child is killed and
/// reaped and `None` is returned.
pub(super) fn wait_or_kill(child: &mut std::process::Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            _ if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}
