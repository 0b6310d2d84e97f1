//! The daemon a bench item runs against: [`Live`] starts a binary with the
//! reference command line in a private directory, hands out connections,
//! finds the daemon's pid and stops it again. Every bench step and
//! the memory items drive daemons through it, along with the request/line helpers and the
//! `/proc` readings (RSS, high-water mark) they measure with.

use crate::runner::pids_mentioning;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token";

pub(crate) struct Live {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    launcher: Child,
}

impl Live {
    pub(crate) fn start(bin: &Path) -> Result<Live, String> {
        Live::start_with_env(bin, &[])
    }

    /// As [`Live::start`], with extra environment for the daemon.
    pub(crate) fn start_with_env(bin: &Path, env: &[(&str, &str)]) -> Result<Live, String> {
        let dir = tempfile::Builder::new()
            .prefix("hb")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let socket = dir.path().join("rpc.sock");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.path().join("daemon.log")).map_err(|e| e.to_string())?;
        let mut launcher = Command::new(bin)
            .arg("-serve")
            .arg("-socket")
            .arg(&socket)
            .arg("-token-file")
            .arg(&token)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .envs(env.iter().copied())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let mut out = BufReader::new(launcher.stdout.take().expect("piped"));
        let mut banner = String::new();
        let _ = out.read_line(&mut banner);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while !socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if !socket.exists() {
            return Err(format!("daemon did not start (banner {banner:?})"));
        }
        Ok(Live {
            _dir: dir,
            socket,
            launcher,
        })
    }

    pub(crate) fn conn(&self) -> Result<UnixStream, String> {
        let s = UnixStream::connect(&self.socket).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(120))).ok();
        Ok(s)
    }

    /// The daemon's pid: the listening process, as the kernel reports it for
    /// a connection to the socket (`SO_PEERCRED`), so neither a launcher
    /// that is still exiting nor another process naming the socket in its
    /// command line can be taken for it. Falls back to the command-line
    /// search where peer credentials are not available.
    pub(crate) fn pid(&self) -> Option<i32> {
        self.conn().ok().and_then(|s| peer_pid(&s)).or_else(|| {
            let launcher = self.launcher.id() as i32;
            let serving = pids_mentioning(self.socket.as_os_str().as_encoded_bytes());
            serving
                .iter()
                .copied()
                .filter(|&p| p != launcher && rss_kib(p).is_some())
                .max_by_key(|&p| rss_kib(p).unwrap_or(0))
                .or_else(|| serving.contains(&launcher).then_some(launcher))
        })
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Ok(mut s) = UnixStream::connect(&self.socket) {
            let _ = s.write_all(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}\n")
                    .as_bytes(),
            );
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.read_to_end(&mut Vec::new());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
        crate::runner::kill_mentioning(self._dir.path());
    }
}

/// The pid of the process at the other end of a Unix socket (Linux).
fn peer_pid(s: &UnixStream) -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `cred`, which
        // is a live, properly sized ucred.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        (rc == 0 && cred.pid > 0).then_some(cred.pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = s;
        None
    }
}

/// `VmRSS` from `/proc`: `None` where there is no `/proc` (macOS), so the
/// bench reports no RSS figure there rather than a wrong one.
pub(crate) fn rss_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub(crate) fn req(id: usize, method: &str, params: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params},\"auth\":\"{TOKEN}\"}}\n")
}

pub(crate) fn read_line(r: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut l = Vec::new();
    match r.read_until(b'\n', &mut l) {
        Ok(0) => Err("connection closed".into()),
        Ok(_) => Ok(l),
        Err(e) => Err(e.to_string()),
    }
}

/// CPU seconds process `pid` has used so far, all its threads (those that
/// ended too), user and system, from `/proc/<pid>/stat` (clock-tick
/// resolution, 10 ms on Linux). Its children are not counted.
pub(crate) fn cpu_seconds_of(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // anything: the 14th and 15th of the line (utime, stime) are the 12th
    // and 13th after it.
    let mut after = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let utime: u64 = after.nth(11)?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// `VmHWM` from `/proc`: the peak resident set so far (`None` without `/proc`).
pub(crate) fn hwm_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
