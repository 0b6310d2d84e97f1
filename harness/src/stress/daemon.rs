//! One daemon under stress: its fresh directory, its processes (found by
//! the socket path on their command line, so a self-daemonizing binary or
//! a wrapper counts as one daemon), their memory and descriptors, the
//! children it spawned for us (tagged through their environment) and the
//! cleanup that kills all of them. Each signal goes through a hold
//! (remora's `PidRef`) taken while the process was proven the one meant:
//! the daemon's processes when they were found serving the socket, a
//! tagged child just before its kill; never through a number read earlier
//! ([`procfs::hold_if`]).
//!
//! It is a [`crate::dut::Daemon`] (the shared launcher, in a directory of
//! its own) with the bookkeeping a stress scenario needs on top. The
//! figures and the environment tags are read from `/proc`, so `harness
//! stress` is Linux-only. Elsewhere (macOS) this compiles and answers
//! "none"/"unknown"; nothing runs it there (`ci/release` runs `check`).

use super::Error;
use crate::base::sync::lock;
use crate::dut::procfs::{self, alive, fd_count, fd_kinds, pids_with_env, zombie_parent};
use crate::dut::{self, client, Options};
use remora::sys::process::PidRef;
use std::path::{Path, PathBuf};
use std::process::Child;
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
    dut: dut::Daemon,
    pub socket: PathBuf,
    /// The daemon's processes (launcher wrapper, daemonized child).
    pids: Arc<Mutex<Vec<i32>>>,
    /// Holds on them, taken while they were found serving the socket:
    /// every signal to the daemon goes through these.
    holds: Vec<PidRef>,
    /// Client subprocesses a scenario started; killed at drop.
    pub clients: Vec<Child>,
    /// The pid we started; a self-daemonizing launcher exits on its own.
    launcher_pid: Option<i32>,
}

impl Daemon {
    /// Starts `bin` in a fresh directory and waits for its banner.
    pub fn start(bin: &Path) -> Result<Daemon, Error> {
        Daemon::start_inner(bin, None)
    }

    /// Starts the daemon with its descriptor limit (soft and hard) set to
    /// `limit`, to show what happens when a client tries to exhaust it.
    pub fn start_with_fd_limit(bin: &Path, limit: u64) -> Result<Daemon, Error> {
        Daemon::start_inner(bin, Some(limit))
    }

    fn start_inner(bin: &Path, fd_limit: Option<u64>) -> Result<Daemon, Error> {
        let options = Options {
            prefix: "hs",
            env: Vec::new(),
            isolated: true,
            fd_limit,
            banner_within: Duration::from_secs(30),
        };
        let dut = dut::Daemon::start(bin, options)?;
        let mut d = Daemon {
            socket: dut.socket().to_path_buf(),
            dut,
            pids: Arc::new(Mutex::new(Vec::new())),
            holds: Vec::new(),
            clients: Vec::new(),
            launcher_pid: None,
        };
        d.settle()?;
        Ok(d)
    }

    /// Starts the binary on this directory's socket again, after a kill.
    pub fn launch(&mut self) -> Result<(), Error> {
        self.dut.launch()?;
        self.settle()
    }

    /// After a start: a self-daemonizing launcher exits right after its
    /// banner (up to 500 ms), then the daemon's processes are collected.
    fn settle(&mut self) -> Result<(), Error> {
        let launcher = self.dut.launcher();
        self.launcher_pid = launcher.as_ref().map(|l| l.id() as i32);
        if let Some(l) = launcher {
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = l.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // Held once proven to serve the socket: what is signalled later
        // is this process or nothing.
        let holds: Vec<PidRef> = self
            .steady_pids()
            .into_iter()
            .filter_map(|pid| procfs::hold_if(pid, |pid| self.serves(pid)))
            .collect();
        if holds.is_empty() {
            return Err(Error::NoDaemonProcess);
        }
        *lock(&self.pids) = holds.iter().map(PidRef::pid).collect();
        self.holds = holds;
        Ok(())
    }

    /// Whether `pid` is alive with the socket and `-serve` on its command
    /// line.
    fn serves(&self, pid: i32) -> bool {
        alive(pid)
            && procfs::mentions(pid, self.socket.as_os_str().as_encoded_bytes())
            && procfs::has_arg(pid, &[b"-serve", b"--serve"])
    }

    /// The live processes whose command line names the socket and
    /// `-serve`.
    fn serving_pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = procfs::pids_mentioning(self.socket.as_os_str().as_encoded_bytes())
            .into_iter()
            .filter(|p| self.serves(*p))
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
        self.dut.log_tail()
    }

    pub fn pids(&self) -> Vec<i32> {
        lock(&self.pids).clone()
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
                let st = procfs::state(p).unwrap_or('?');
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
        self.sum(procfs::rss_kib)
    }

    pub fn hwm_kib(&self) -> u64 {
        self.sum(procfs::hwm_kib)
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
        format!("{TAG_VAR}={}", self.dut.dir().display())
    }

    /// The `env` object for a spawn whose tree is named `sub`.
    pub fn child_env(&self, sub: &str) -> String {
        format!(
            "{{\"{TAG_VAR}\":{},\"{SUB_VAR}\":{}}}",
            serde_json::Value::from(self.dut.dir().to_string_lossy()),
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
            .filter(|p| procfs::environ_has(*p, want.as_bytes()))
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

    /// Sends a signal to every daemon process, through its hold.
    pub fn signal(&self, sig: i32) {
        for hold in &self.holds {
            let _ = hold.signal(sig);
        }
    }

    /// SIGKILLs every live process tagged with this daemon, each proven
    /// tagged just before its signal; returns the ones found.
    pub fn kill_tagged(&self) -> Vec<i32> {
        procfs::kill_with_env(self.tag().as_bytes())
    }

    /// SIGSTOPs every daemon process and waits until all their threads
    /// have stopped; false if they did not within 30 s.
    pub fn stop(&self) -> bool {
        self.signal(libc::SIGSTOP);
        Self::wait_for(Duration::from_secs(30), || {
            self.pids()
                .into_iter()
                .filter(|p| alive(*p))
                .all(procfs::all_threads_stopped)
        })
    }

    /// SIGKILLs the daemon's processes and waits until they are gone.
    pub fn kill_daemon(&mut self) -> bool {
        self.signal(libc::SIGKILL);
        if let Some(mut l) = self.dut.take_launcher() {
            let _ = l.kill();
            let _ = l.wait();
        }
        Daemon::wait_for(Duration::from_secs(10), || !self.pids().iter().any(|p| alive(*p)))
    }

    /// Waits for the daemon's processes to exit on their own.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let ok = Daemon::wait_for(within, || {
            if let Some(l) = self.dut.launcher() {
                let _ = l.try_wait();
            }
            !self.pids().iter().any(|p| alive(*p))
        });
        if ok {
            if let Some(mut l) = self.dut.take_launcher() {
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
                    let p = lock(&pids).clone();
                    let kib: u64 = p.into_iter().filter_map(procfs::rss_kib).sum();
                    lock(&points).push((t0.elapsed().as_secs_f64(), kib as f64 / 1024.0));
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

    /// Kills client subprocesses, the daemon's processes (through their
    /// holds) and every process tagged with this daemon (each proven
    /// tagged), after a polite shutdown.
    fn cleanup(&mut self) {
        if self.alive() {
            let token = client::TOKEN.as_bytes();
            client::request_shutdown(
                &self.socket,
                token,
                Some(Duration::from_secs(2)),
                Duration::from_secs(8),
            );
            self.wait_exit(Duration::from_secs(8));
        }
        for c in &mut self.clients {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.signal(libc::SIGKILL);
        if let Some(mut l) = self.dut.take_launcher() {
            let _ = l.kill();
            let _ = l.wait();
        }
        for _ in 0..5 {
            if self.kill_tagged().is_empty() {
                break;
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
        std::mem::take(&mut *lock(&self.points))
    }
}
