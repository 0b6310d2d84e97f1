//! One daemon under stress: its fresh directory, its processes (found by
//! the socket path on their command line, so a self-daemonizing binary or
//! a wrapper counts as one daemon), their memory and descriptors, the
//! children it spawned for us (tagged through their environment) and the
//! cleanup that kills all of them by pid.
//!
//! The figures and the environment tags are read from `/proc`, so `harness
//! stress` is Linux-only. Elsewhere (macOS) this compiles and answers
//! "none"/"unknown"; nothing runs it there (`ci/release` runs `check`).

use super::wire::TOKEN;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environment variable every child we spawn carries; its value names the
/// daemon directory, so processes it left behind can be found by pid.
pub const TAG_VAR: &str = "HARNESS_STRESS_TAG";
/// A second variable naming one child's tree inside a scenario.
pub const SUB_VAR: &str = "HARNESS_STRESS_SUB";

/// Descriptors by kind per daemon process, for naming what leaked.
pub struct FdCensus(Vec<(i32, std::collections::BTreeMap<String, u64>)>);

impl FdCensus {
    /// What `later` holds beyond `self`, e.g. `pid 12: socket +4, pipe +2`;
    /// empty when nothing grew.
    pub fn growth_to(&self, later: &FdCensus) -> String {
        let mut parts = Vec::new();
        for (pid, after) in &later.0 {
            let before = self.0.iter().find(|(p, _)| p == pid).map(|(_, k)| k);
            let grown: Vec<String> = after
                .iter()
                .filter_map(|(kind, n)| {
                    let was = before.and_then(|b| b.get(kind)).copied().unwrap_or(0);
                    (*n > was).then(|| format!("{kind} +{}", n - was))
                })
                .collect();
            if !grown.is_empty() {
                parts.push(format!("pid {pid}: {}", grown.join(", ")));
            }
        }
        parts.join("; ")
    }
}

/// A started daemon.
pub struct Daemon {
    dir: tempfile::TempDir,
    pub socket: PathBuf,
    bin: PathBuf,
    launcher: Option<Child>,
    /// The daemon's processes (launcher wrapper, daemonized child).
    pids: Arc<Mutex<Vec<i32>>>,
    /// Client subprocesses a scenario started; killed at drop.
    pub clients: Vec<Child>,
    /// The pid we started; a self-daemonizing launcher exits on its own.
    launcher_pid: Option<i32>,
    /// The descriptor limit the daemon starts with, if the scenario sets one.
    fd_limit: Option<u64>,
}

/// Reads `/proc/<pid>/status` field `key` (kB).
pub fn status_kib(pid: i32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The state letter of `/proc/<path>/stat` (`R`, `S`, `T`, `Z`, ...).
fn state(stat_path: &str) -> Option<char> {
    let s = std::fs::read_to_string(stat_path).ok()?;
    s.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next())
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    !matches!(state(&format!("/proc/{pid}/stat")), Some('Z') | Some('X') | None)
}

/// The parent of `pid` when `pid` is a zombie (exited, not yet reaped).
fn zombie_parent(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = s.rsplit_once(')')?.1.split_whitespace();
    (f.next()? == "Z").then_some(())?;
    f.next()?.parse().ok()
}

/// Whether every thread of `pid` has stopped (state `T`): a SIGSTOP is
/// delivered asynchronously, and a thread still running on another core
/// can write one more reply.
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    rd.flatten()
        .all(|t| state(&format!("{}/stat", t.path().display())) == Some('T'))
}

fn fd_count(pid: i32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// What `pid`'s descriptors point at, by kind (`socket`, `pipe`,
/// `anon_inode:[eventpoll]`, a path): the detail a leak report needs.
fn fd_kinds(pid: i32) -> std::collections::BTreeMap<String, u64> {
    let mut kinds = std::collections::BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    for e in rd.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        // `socket:[12345]` and `pipe:[678]` differ per object; the kind is what matters.
        let kind = match t.split_once(":[") {
            Some((k, _)) if k == "socket" || k == "pipe" => k.to_string(),
            _ => t.into_owned(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a pid this module found or started; errors ignored.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Live processes whose environment holds `needle` (a `KEY=value` entry).
pub fn pids_with_env(needle: &[u8]) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    let me = std::process::id() as i32;
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|c| *c == 0).any(|kv| kv == needle) && alive(pid) {
                out.push(pid);
            }
        }
    }
    out
}

impl Daemon {
    /// Starts `bin` in a fresh directory and waits for its banner.
    pub fn start(bin: &Path) -> Result<Daemon, String> {
        Daemon::start_inner(bin, None)
    }

    /// Starts the daemon with its descriptor limit (soft and hard) set to
    /// `limit`, to show what happens when a client tries to exhaust it.
    pub fn start_with_fd_limit(bin: &Path, limit: u64) -> Result<Daemon, String> {
        Daemon::start_inner(bin, Some(limit))
    }

    fn start_inner(bin: &Path, fd_limit: Option<u64>) -> Result<Daemon, String> {
        let dir = tempfile::Builder::new()
            .prefix("hs")
            .tempdir()
            .map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir.path().join("home")).map_err(|e| e.to_string())?;
        let socket = dir.path().join("rpc.sock");
        let mut d = Daemon {
            dir,
            socket,
            bin: bin.to_path_buf(),
            launcher: None,
            pids: Arc::new(Mutex::new(Vec::new())),
            clients: Vec::new(),
            launcher_pid: None,
            fd_limit,
        };
        d.launch()?;
        Ok(d)
    }

    /// Starts the binary on this directory's socket (again, after a kill).
    pub fn launch(&mut self) -> Result<(), String> {
        let token = self.dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.bin);
        if let Some(limit) = self.fd_limit {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    let lim = libc::rlimit {
                        rlim_cur: limit as libc::rlim_t,
                        rlim_max: limit as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut launcher = cmd
            .arg("-serve")
            .arg("-socket")
            .arg(&self.socket)
            .arg("-token-file")
            .arg(&token)
            .current_dir(self.dir.path())
            .env_clear()
            .envs(crate::fixture::base_env(self.dir.path()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.bin.display()))?;
        let out = launcher.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut banner = String::new();
            let _ = r.read_line(&mut banner);
            let _ = tx.send(banner);
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let banner = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        // A self-daemonizing launcher exits right after its banner.
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = launcher.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.launcher_pid = Some(launcher.id() as i32);
        self.launcher = Some(launcher);
        if banner.is_empty() || !self.socket.exists() {
            return Err(format!(
                "daemon did not start (banner {banner:?}; log: {})",
                self.log_tail()
            ));
        }
        let pids = self.steady_pids();
        if pids.is_empty() {
            return Err("daemon process not found".into());
        }
        *self.pids.lock().unwrap() = pids;
        Ok(())
    }

    /// The live processes whose command line names the socket and
    /// `-serve`.
    fn serving_pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = crate::runner::pids_mentioning(self.socket.as_os_str().as_encoded_bytes())
            .into_iter()
            .filter(|p| {
                alive(*p)
                    && std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| c.split(|b| *b == 0).any(|a| a == b"-serve" || a == b"--serve"))
                        .unwrap_or(false)
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// The daemon's processes once the set has stayed the same for 500 ms
    /// (up to 20 s). One scan right after the banner can catch a process
    /// on its way out or in: a launcher still exiting, or a child the
    /// daemon forked at start-up (remora's login-shell probe) before its
    /// `exec`, which still shows the daemon's command line and would later
    /// read as a daemon death.
    fn steady_pids(&self) -> Vec<i32> {
        const STEADY: Duration = Duration::from_millis(500);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut since = Instant::now();
        let mut set = self.serving_pids();
        loop {
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            let next = self.serving_pids();
            if now >= deadline {
                return next;
            }
            if next != set {
                set = next;
                since = now;
            } else if now.duration_since(since) >= STEADY {
                return set;
            }
        }
    }

    pub fn log_tail(&self) -> String {
        let l = std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default();
        let t: String = l.chars().rev().take(400).collect();
        t.chars().rev().collect()
    }

    pub fn pids(&self) -> Vec<i32> {
        self.pids.lock().unwrap().clone()
    }

    /// Whether every daemon process is still alive. A launcher that
    /// daemonized something else may exit late (a loaded machine): only
    /// when it is the whole daemon (a wrapper) does it count.
    ///
    /// The same holds one level down: behind a wrapper that starts a
    /// self-daemonizing binary (remora behind `mutant-proxy`), the inner
    /// launcher can still be running when the pids are collected, then
    /// exits and stays a zombie of the wrapper, which never reaps it. A
    /// zombie whose parent is another live daemon process is such a
    /// launcher, as long as some other daemon process still lives; a
    /// daemon that really died is gone (reaped by init) or, when it was
    /// the wrapper's only child, leaves nothing else alive.
    pub fn alive(&self) -> bool {
        let p = self.pids();
        let others: Vec<i32> = p.iter().copied().filter(|p| Some(*p) != self.launcher_pid).collect();
        if others.is_empty() {
            return !p.is_empty() && p.iter().all(|p| alive(*p));
        }
        let live: Vec<i32> = others.iter().copied().filter(|p| alive(*p)).collect();
        let exited_launcher = |pid: i32| zombie_parent(pid).is_some_and(|parent| p.contains(&parent) && alive(parent));
        !live.is_empty() && others.iter().all(|p| live.contains(p) || exited_launcher(*p))
    }

    /// Each daemon process with its state letter (`?` when gone), the
    /// launcher marked: what a "daemon died" verdict saw.
    pub fn describe(&self) -> String {
        self.pids()
            .into_iter()
            .map(|p| {
                let st = state(&format!("/proc/{p}/stat")).unwrap_or('?');
                let who = if Some(p) == self.launcher_pid {
                    " (launcher)"
                } else {
                    ""
                };
                format!("pid {p}{who} {st}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn sum(&self, f: impl Fn(i32) -> Option<u64>) -> u64 {
        self.pids().into_iter().filter_map(f).sum()
    }

    pub fn rss_kib(&self) -> u64 {
        self.sum(|p| status_kib(p, "VmRSS:"))
    }

    pub fn hwm_kib(&self) -> u64 {
        self.sum(|p| status_kib(p, "VmHWM:"))
    }

    pub fn fds(&self) -> u64 {
        self.sum(fd_count)
    }

    /// Every daemon process's descriptors by kind, keyed by pid.
    pub fn fd_census(&self) -> FdCensus {
        FdCensus(self.pids().into_iter().map(|p| (p, fd_kinds(p))).collect())
    }

    /// The tag children carry: `HARNESS_STRESS_TAG=<dir>`.
    pub fn tag(&self) -> String {
        format!("{TAG_VAR}={}", self.dir.path().display())
    }

    /// The `env` object for a spawn whose tree is named `sub`.
    pub fn child_env(&self, sub: &str) -> String {
        format!(
            "{{\"{TAG_VAR}\":{},\"{SUB_VAR}\":{}}}",
            serde_json::Value::from(self.dir.path().to_string_lossy()),
            serde_json::Value::from(sub)
        )
    }

    /// Live processes spawned through this daemon (any tree).
    pub fn tagged(&self) -> Vec<i32> {
        pids_with_env(self.tag().as_bytes())
    }

    /// Live processes of the tree named `sub`.
    pub fn tagged_sub(&self, sub: &str) -> Vec<i32> {
        let want = format!("{SUB_VAR}={sub}");
        self.tagged()
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .map(|e| e.split(|c| *c == 0).any(|kv| kv == want.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Polls `f` every 10 ms until it holds or `within` passes.
    pub fn wait_for(within: Duration, mut f: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if f() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends a signal to every daemon process.
    pub fn signal(&self, sig: i32) {
        for p in self.pids() {
            kill(p, sig);
        }
    }

    /// SIGSTOPs every daemon process and waits until all their threads
    /// have stopped; false if they did not within 30 s.
    pub fn stop(&self) -> bool {
        self.signal(libc::SIGSTOP);
        Self::wait_for(Duration::from_secs(30), || {
            self.pids().into_iter().filter(|p| alive(*p)).all(all_threads_stopped)
        })
    }

    /// SIGKILLs the daemon's processes and waits until they are gone.
    pub fn kill_daemon(&mut self) -> bool {
        self.signal(libc::SIGKILL);
        if let Some(mut l) = self.launcher.take() {
            let _ = l.kill();
            let _ = l.wait();
        }
        Daemon::wait_for(Duration::from_secs(10), || !self.pids().iter().any(|p| alive(*p)))
    }

    /// Waits for the daemon's processes to exit on their own.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let ok = Daemon::wait_for(within, || {
            if let Some(l) = self.launcher.as_mut() {
                let _ = l.try_wait();
            }
            !self.pids().iter().any(|p| alive(*p))
        });
        if ok {
            if let Some(mut l) = self.launcher.take() {
                let _ = l.wait();
            }
        }
        ok
    }

    /// Starts a thread sampling the daemon's RSS (MiB) every `every`.
    pub fn sampler(&self, every: Duration) -> Sampler {
        let pids = self.pids.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let points = Arc::new(Mutex::new(Vec::new()));
        let t0 = Instant::now();
        let h = {
            let (stop, points) = (stop.clone(), points.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let p = pids.lock().unwrap().clone();
                    let kib: u64 = p.into_iter().filter_map(|p| status_kib(p, "VmRSS:")).sum();
                    points
                        .lock()
                        .unwrap()
                        .push((t0.elapsed().as_secs_f64(), kib as f64 / 1024.0));
                    std::thread::sleep(every);
                }
            })
        };
        Sampler {
            stop,
            points,
            h: Some(h),
        }
    }

    /// Kills (by pid) client subprocesses, the daemon's processes and
    /// every process tagged with this daemon, after a polite shutdown.
    fn cleanup(&mut self) {
        if self.alive() {
            if let Ok(mut s) = UnixStream::connect(&self.socket) {
                let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                let _ = s.write_all(
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}\n")
                        .as_bytes(),
                );
                let _ = s.set_read_timeout(Some(Duration::from_secs(8)));
                let _ = s.read_to_end(&mut Vec::new());
            }
            self.wait_exit(Duration::from_secs(8));
        }
        for c in &mut self.clients {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.signal(libc::SIGKILL);
        if let Some(mut l) = self.launcher.take() {
            let _ = l.kill();
            let _ = l.wait();
        }
        for _ in 0..5 {
            let left = self.tagged();
            if left.is_empty() {
                break;
            }
            for p in left {
                kill(p, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A background RSS sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    points: Arc<Mutex<Vec<(f64, f64)>>>,
    h: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Stops sampling; returns `(seconds, MiB)` points.
    pub fn stop(mut self) -> Vec<(f64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.h.take() {
            let _ = h.join();
        }
        std::mem::take(&mut *self.points.lock().unwrap())
    }
}
