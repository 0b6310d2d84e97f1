//! A daemon kept alive across probes (`fuzz-diff`'s workers), so a case
//! costs its requests rather than a daemon start and shutdown.
//!
//! Isolation is by construction, not by restarting: before each probe the
//! fixture root is emptied and rebuilt, every connection is new, and the
//! probes are expected to use process ids no earlier probe used (the
//! generator puts the case number in them). What a probe cannot undo —
//! a `server.shutdown`, a daemon started with other flags, a different
//! token or environment — is either refused ([`LiveDaemon::run`] returns
//! an error for `start` with arguments, `run`, `log`, `env` and `token`
//! directives) or noticed (the socket is gone: the next probe restarts
//! the daemon). The caller restarts after anything suspicious.
//!
//! A live run's transcript has the same keys and values as a fresh run's:
//! the banner read at start-up is recorded where the probe's first
//! connection would have started the daemon.
//!
//! Fixture prefixes that run external commands (`git`, `sh`) are built
//! once per daemon into a template next to `$ROOT` and copied in for later
//! probes with the same prefix; the template lives under the same `$RUN`,
//! so `$ROOT`-relative content stays valid. Live sandboxes live on a
//! memory file system (`/dev/shm`, or `$HARNESS_LIVE_TMPDIR`) when there is one.

use super::{kill_mentioning, Error, RunConfig, Runner, Sandbox};
use crate::dut::{self, Env, Launch};
use crate::probe::fixture;
use crate::probe::{Fixture, Probe, StepKind};
use crate::transcript::Transcript;
use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// The token file every live probe must use (the probe default).
const TOKEN_FILE: &[u8] = b"probe-token\n";

/// A daemon that outlives the probes run on it.
pub struct LiveDaemon {
    cfg: RunConfig,
    sb: Sandbox,
    launcher: Option<Child>,
    /// The banner of the running daemon; `None` when stopped.
    banner: Option<Vec<u8>>,
    /// Fixture prefix (its steps' debug text) → template directory.
    templates: HashMap<String, PathBuf>,
    /// Daemon starts so far.
    pub starts: u64,
}

impl LiveDaemon {
    /// A sandbox for `cfg.bin`; the daemon starts with the first probe.
    pub fn new(cfg: &RunConfig) -> Result<LiveDaemon, Error> {
        Ok(LiveDaemon {
            cfg: cfg.clone(),
            sb: Sandbox::new_in(&live_tmp()).or_else(|_| Sandbox::new())?,
            launcher: None,
            banner: None,
            templates: HashMap::new(),
            starts: 0,
        })
    }

    /// Why `probe` cannot run on a shared daemon, if it cannot.
    pub fn unsupported(probe: &Probe) -> Option<String> {
        if probe.token_file != TOKEN_FILE {
            return Some("a token directive".into());
        }
        if !probe.env.is_empty() {
            return Some("an env directive".into());
        }
        probe.steps.iter().find_map(|s| match &s.kind {
            StepKind::Start { args } if !args.is_empty() => Some(format!("line {}: start with arguments", s.line)),
            StepKind::Run { .. } => Some(format!("line {}: run", s.line)),
            StepKind::Log { .. } => Some(format!("line {}: log", s.line)),
            _ => None,
        })
    }

    /// Whether the daemon is up (started and its socket still there).
    pub fn running(&self) -> bool {
        self.banner.is_some() && self.sb.socket.exists()
    }

    fn start(&mut self) -> Result<(), Error> {
        self.stop();
        let token_file = self.sb.run.join("token");
        let launch = Launch {
            bin: &self.cfg.bin,
            socket: &self.sb.socket,
            token_file: &token_file,
            log: &self.sb.log,
            append_log: false,
            cwd: &self.sb.root,
            env: Env::Exactly(crate::dut::base_env(&self.sb.run)),
            extra: &[],
            fd_limit: None,
            banner_within: Duration::from_secs(20),
            transport: dut::Transport::Socket,
        };
        let dut::Started {
            launcher: child,
            banner,
        } = dut::launch(&launch, TOKEN_FILE)?;
        self.launcher = Some(child);
        self.starts += 1;
        if banner.is_empty() || !self.sb.socket.exists() {
            self.stop();
            return Err(Error::NoBanner(self.cfg.bin.clone()));
        }
        self.banner = Some(banner);
        Ok(())
    }

    /// Stops the daemon (if running) and kills whatever it left behind.
    pub fn stop(&mut self) {
        self.banner = None;
        if let Some(mut l) = self.launcher.take() {
            let via = dut::Via {
                transport: dut::Transport::Socket,
                bin: &self.cfg.bin,
                env: &[],
            };
            dut::stop(&self.sb.socket, &TOKEN_FILE[..TOKEN_FILE.len() - 1], &mut l, &via);
            kill_mentioning(&self.sb.run);
            let _ = std::fs::remove_file(&self.sb.socket);
        }
    }

    /// Stops the daemon; the next probe starts a new one.
    pub fn restart(&mut self) {
        self.stop();
    }

    /// Runs `probe` on the running daemon (starting one if needed).
    pub fn run(&mut self, probe: &Probe) -> Result<Transcript, Error> {
        if let Some(why) = Self::unsupported(probe) {
            return Err(Error::Unsupported {
                probe: probe.name.clone(),
                why,
            });
        }
        if !self.running() {
            self.start()?;
        }
        empty_dir(&self.sb.root).map_err(|source| Error::Template {
            doing: "emptying $ROOT",
            source,
        })?;
        let skip = self.cached_fixtures(probe)?;
        let mut r = Runner::new(probe, &self.cfg, &self.sb);
        r.live = true;
        r.live_banner = self.banner.clone();
        r.skip_fixtures = skip;
        let result = r.steps();
        r.finish();
        result?;
        Ok(r.t)
    }
}

impl LiveDaemon {
    /// Builds the probe's leading fixtures that run commands (`git`, `sh`)
    /// from a template, made the first time that prefix is seen; returns
    /// how many steps the template stands for (0: none cached).
    fn cached_fixtures(&mut self, probe: &Probe) -> Result<usize, Error> {
        let prefix = probe.steps.iter().take_while(|s| s.kind.is_fixture()).count();
        let cached = probe.steps[..prefix]
            .iter()
            .any(|s| matches!(s.kind, StepKind::Fixture(Fixture::Git { .. } | Fixture::Sh { .. })));
        if !cached {
            return Ok(0);
        }
        let template = |doing| move |source| Error::Template { doing, source };
        let key = format!(
            "{:?}",
            probe.steps[..prefix].iter().map(|s| &s.kind).collect::<Vec<_>>()
        );
        if let Some(tpl) = self.templates.get(&key) {
            copy_tree(tpl, &self.sb.root).map_err(template("copying the fixture template"))?;
            return Ok(prefix);
        }
        let ctx = self.sb.ctx(probe.token());
        for s in &probe.steps[..prefix] {
            let StepKind::Fixture(step) = &s.kind else { continue };
            fixture::build(step, &ctx, &self.sb.root, &self.sb.run).map_err(|source| Error::Fixture {
                probe: probe.path.clone(),
                line: s.line,
                source,
            })?;
        }
        let tpl = self.sb.run.join(format!("template-{}", self.templates.len()));
        std::fs::create_dir(&tpl).map_err(template("saving the fixture template"))?;
        copy_tree(&self.sb.root, &tpl).map_err(template("saving the fixture template"))?;
        self.templates.insert(key, tpl);
        Ok(prefix)
    }
}

impl Drop for LiveDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where live sandboxes go: a memory file system when there is one, since
/// every case empties and refills `$ROOT` (on a disk mounted with
/// `discard` that costs tens of milliseconds per case).
fn live_tmp() -> PathBuf {
    if let Some(d) = std::env::var_os("HARNESS_LIVE_TMPDIR") {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Removes everything inside `dir`, making read-only directories writable
/// first when a plain removal fails.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let is_dir = std::fs::symlink_metadata(&p)?.is_dir();
        let r = if is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        if r.is_err() && is_dir {
            make_writable(&p);
            std::fs::remove_dir_all(&p)?;
        } else {
            r?;
        }
    }
    Ok(())
}

fn make_writable(p: &Path) {
    let Ok(m) = std::fs::symlink_metadata(p) else { return };
    if m.is_dir() {
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                make_writable(&e.path());
            }
        }
    }
}

/// Copies the tree under `src` into the existing directory `dst`: modes,
/// symlinks, fifos and hard links (as links) are kept.
fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    let mut links: HashMap<(u64, u64), PathBuf> = HashMap::new();
    let mut dirs: Vec<(PathBuf, u32)> = Vec::new();
    copy_into(src, dst, &mut links, &mut dirs)?;
    // Directory modes last: a read-only directory is filled first.
    for (d, mode) in dirs.into_iter().rev() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

fn copy_into(
    src: &Path,
    dst: &Path,
    links: &mut HashMap<(u64, u64), PathBuf>,
    dirs: &mut Vec<(PathBuf, u32)>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let m = std::fs::symlink_metadata(&from)?;
        let ft = m.file_type();
        let mode = m.permissions().mode() & 0o7777;
        if ft.is_dir() {
            std::fs::create_dir(&to)?;
            copy_into(&from, &to, links, dirs)?;
            dirs.push((to, mode));
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if ft.is_file() {
            if m.nlink() > 1 {
                if let Some(first) = links.get(&(m.dev(), m.ino())) {
                    std::fs::hard_link(first, &to)?;
                    continue;
                }
                links.insert((m.dev(), m.ino()), to.clone());
            }
            std::fs::copy(&from, &to)?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
        } else if ft.is_fifo() {
            let c = std::ffi::CString::new(to.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
            // SAFETY: mkfifo(3) with a valid NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
        }
        // Sockets and devices are not fixtures: skipped.
    }
    Ok(())
}
