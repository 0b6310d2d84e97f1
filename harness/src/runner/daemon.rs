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

/// Where and how to start a daemon.
pub(super) struct Launch<'a> {
    pub(super) bin: &'a Path,
    pub(super) socket: &'a Path,
    pub(super) token_file: &'a Path,
    pub(super) log: &'a Path,
    pub(super) root: &'a Path,
    pub(super) env: Vec<(String, String)>,
    pub(super) extra: &'a [String],
}

/// Starts `<bin> -serve …` and waits for its banner (empty if none came)
/// and, after a banner, briefly for the socket: a self-daemonizing
/// launcher exits once the banner is out and the socket may appear a
/// moment later.
pub(super) fn spawn_daemon(l: &Launch, token: &[u8]) -> Result<(Child, Vec<u8>), String> {
    std::fs::write(l.token_file, token).map_err(|e| format!("cannot write token: {e}"))?;
    let log = std::fs::File::create(l.log).map_err(|e| format!("cannot create log: {e}"))?;
    let mut cmd = Command::new(l.bin);
    cmd.arg("-serve")
        .arg("-socket")
        .arg(l.socket)
        .arg("-token-file")
        .arg(l.token_file)
        .args(l.extra)
        .current_dir(l.root)
        .env_clear()
        .envs(l.env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = cmd.spawn().map_err(|e| format!("spawn failed: {e}"))?;
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
    let deadline = Instant::now() + Duration::from_secs(5);
    while !banner.is_empty() && !l.socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((child, banner))
}

/// Stops a daemon: an authenticated `server.shutdown`, then the socket
/// must vanish and the launcher is reaped (killed past its deadline).
pub(super) fn shutdown_daemon(socket: &Path, token: &[u8], launcher: &mut Child) {
    if socket.exists() {
        if let Ok(mut s) = UnixStream::connect(socket) {
            let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":".to_vec();
            line.extend(json_string(token));
            line.extend_from_slice(b"}\n");
            let _ = s.write_all(&line);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    wait_or_kill(launcher, Instant::now() + Duration::from_secs(5));
}

impl Runner<'_> {
    pub(super) fn start(&mut self, line: usize, extra: &[String]) {
        if self.daemon_started {
            return;
        }
        self.daemon_started = true;
        if let Some(banner) = self.live_banner.take() {
            // Live mode: the daemon is already running; record its banner
            // where a fresh run would have started it.
            let v = self.norm.output(&banner);
            self.t.push(format!("L{line} banner"), v);
            return;
        }
        let token_file = self.run.join("token");
        let launch = Launch {
            bin: &self.cfg.bin,
            socket: &self.socket,
            token_file: &token_file,
            log: &self.log,
            root: &self.root,
            env: self.env(),
            extra,
        };
        match spawn_daemon(&launch, &self.probe.token_file) {
            Ok((child, banner)) => {
                let v = self.norm.output(&banner);
                self.t.push(format!("L{line} banner"), v);
                self.daemon = Some(Daemon { launcher: child });
            }
            Err(e) => self.t.push(format!("L{line} start"), e),
        }
    }

    pub(super) fn stop_daemon(&mut self) {
        let Some(mut d) = self.daemon.take() else { return };
        shutdown_daemon(&self.socket, &self.ctx.token, &mut d.launcher);
    }
}

/// Pids of processes whose command line contains `needle`: from
/// `/proc/<pid>/cmdline` where there is a `/proc`, else (macOS) from `ps`,
/// so the clean-up after each probe still finds what a run left behind.
pub fn pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return ps_pids_mentioning(needle).into_iter().filter(|p| *p != me).collect();
    };
    let mut out = Vec::new();
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

/// `ps` lists every process with its arguments joined by spaces (`ww`: not
/// cut to a terminal's width), which still contains a path that one
/// argument held. Empty when `ps` cannot run.
fn ps_pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let Ok(out) = Command::new("ps").args(["-axww", "-o", "pid=,command="]).output() else {
        return Vec::new();
    };
    out.stdout
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let line = line.trim_ascii_start();
            let end = line.iter().position(|b| !b.is_ascii_digit())?;
            let pid = std::str::from_utf8(&line[..end]).ok()?.parse().ok()?;
            contains(&line[end..], needle).then_some(pid)
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ps` fallback that macOS relies on, run where it can be: on a
    /// machine without `ps` there is nothing to compare with.
    #[test]
    fn ps_finds_a_process_by_an_argument() {
        if Command::new("ps").arg("-o").arg("pid=").output().is_err() {
            eprintln!("skipping: no ps here");
            return;
        }
        let needle = format!("remora-ps-needle-{}", std::process::id());
        // `read` keeps the shell itself waiting, with no child of its own
        // left behind once it is killed.
        let mut child = Command::new("sh")
            .args(["-c", "read line", &needle])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let found = ps_pids_mentioning(needle.as_bytes());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, [child.id() as i32]);
    }
}
