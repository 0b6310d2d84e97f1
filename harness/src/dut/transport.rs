//! How the harness reaches a daemon under test: the one place that knows
//! whether a binary runs natively or under Wine, what `-serve` gets added
//! for it, when it is ready, and whether each connection is the AF_UNIX
//! socket itself or a `<bin> -bridge -socket …` child relaying stdio.
//!
//! - [`Transport::Socket`]: the default; the harness dials the socket.
//! - [`Transport::Bridge`] (`--via-bridge`): every connection is a
//!   `-bridge` child, the way an SSH session reaches the daemon; the
//!   daemon is the same. It checks the bridge path on Linux and is what
//!   the Wine transport rests on.
//! - [`Transport::Wine`] (`--wine`): `wine <bin>` (a `remora.exe`), served
//!   with `-listen-pipe`, every connection a `wine <bin> -bridge` child:
//!   Wine 8 has no AF_UNIX, so the bridge dials the pipe `rpc.pipe`
//!   names. Probes a Windows daemon cannot run are skipped with their
//!   reason ([`crate::probe::skips`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the harness starts and dials a daemon under test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    #[default]
    Socket,
    Bridge,
    Wine,
}

/// The platform a transport runs the daemon on, for the skip list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Platform {
    Unix,
    /// Windows under Wine 8: no AF_UNIX, no Windows `git` or POSIX tools.
    Wine,
}

impl Transport {
    /// `--via-bridge` / `--wine` (the latter implies the former).
    pub fn from_flags(via_bridge: bool, wine: bool) -> Transport {
        match (via_bridge, wine) {
            (_, true) => Transport::Wine,
            (true, false) => Transport::Bridge,
            (false, false) => Transport::Socket,
        }
    }

    /// Whether every connection goes through a `-bridge` child.
    pub(crate) fn bridged(self) -> bool {
        self != Transport::Socket
    }

    pub(crate) fn platform(self) -> Platform {
        match self {
            Transport::Wine => Platform::Wine,
            _ => Platform::Unix,
        }
    }

    /// The words a report puts after the binary's name.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Socket => "",
            Transport::Bridge => " (every connection through -bridge)",
            Transport::Wine => " (under Wine, -listen-pipe, every connection through -bridge over the pipe)",
        }
    }

    /// A command running `bin` (under `wine` for [`Transport::Wine`]).
    pub(crate) fn command(self, bin: &Path) -> Command {
        match self {
            Transport::Wine => {
                let mut c = Command::new("wine");
                c.arg(bin);
                c
            }
            _ => Command::new(bin),
        }
    }

    /// Arguments `-serve` gets after the caller's.
    pub(crate) fn serve_extra(self) -> &'static [&'static str] {
        match self {
            Transport::Wine => &["-listen-pipe"],
            _ => &[],
        }
    }

    /// Variables a command needs on top of `given`, the probe's
    /// environment: Wine's prefix (the one `ci/wine-setup` prepared, with
    /// the `ProcessPrng` stand-in), quiet Wine logging, a UTF-8 locale for
    /// Wine's own file-name conversion. Wine drops the
    /// Unix `HOME` from a Windows process's environment and takes
    /// `WINEHOME` as its `HOME` instead, so the probe's `HOME` goes there:
    /// the daemon's `~`, default socket and run dir are the probe's, as on
    /// Linux. The stand-in POSIX tools (`REMORA_WINE_TOOLS`,
    /// [`wine_tools`]) go first on the daemon's
    /// Windows `PATH` through `WINEPATH` (Wine drops the Unix `PATH`), as
    /// their `Z:` name, so `process.spawn` of `sleep` finds `sleep.exe`
    /// by `PATHEXT` as on a Windows host.
    pub(crate) fn env(self, given: &[(String, String)]) -> Vec<(String, String)> {
        match self {
            Transport::Wine => {
                let mut v = vec![("WINEDEBUG".to_string(), "-all".to_string())];
                if let Ok(p) = std::env::var("WINEPREFIX") {
                    v.push(("WINEPREFIX".to_string(), p));
                }
                // Wine reads Unix file names in the Unix locale's charset:
                // without UTF-8 a fixture's `é` lists as mojibake.
                v.push(("LC_ALL".to_string(), "C.UTF-8".to_string()));
                if let Some((_, home)) = given.iter().rev().find(|(k, _)| k == "HOME") {
                    v.push(("WINEHOME".to_string(), home.clone()));
                }
                if let Some(tools) = std::env::var_os(WINE_TOOLS_VAR) {
                    v.push(("WINEPATH".to_string(), wine_name(Path::new(&tools))));
                }
                v
            }
            _ => Vec::new(),
        }
    }

    /// How long a launcher may take to print its banner: `base`, or three
    /// times it under Wine, where a start is two Windows processes (the
    /// launcher and the detached daemon) through the one `wineserver` that
    /// every other probe's `-bridge` children go through too. With the
    /// machine loaded (load 9 on 2 cores) a Wine start past 20 s was seen,
    /// and the probe then read an empty banner.
    pub(crate) fn banner_allowance(self, base: Duration) -> Duration {
        match self {
            Transport::Wine => base * 3,
            _ => base,
        }
    }

    /// Whether a daemon on `socket` is there to be dialled: its socket,
    /// or (a Windows daemon serving the pipe alone) `rpc.pipe` beside it.
    pub(crate) fn listening(self, socket: &Path) -> bool {
        socket.exists() || (self == Transport::Wine && pipe_file(socket).exists())
    }
}

/// The Wine server of one `--wine` run, kept alive for the run's length.
///
/// Wine's server shuts itself down about 3 s after its last Windows
/// process ends and SIGKILLs whatever starts during that shutdown (one CI
/// run lost a `-serve` launcher that way; ci/README.md, `ci/wine-smoke`).
/// So a run starts a persistent one (`wineserver -p`); when it started it
/// (exit 0; 2 means one runs already, someone else's), dropping this ends
/// it with `wineserver -k`, and with it any Wine process the run left.
pub(crate) struct WineServer {
    owned: bool,
}

impl Transport {
    /// The Wine server for a run of this transport: `None` unless
    /// [`Transport::Wine`].
    pub(crate) fn wine_server(self) -> Option<WineServer> {
        (self == Transport::Wine).then(|| WineServer {
            owned: Command::new("wineserver")
                .arg("-p")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
        })
    }
}

impl Drop for WineServer {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new("wineserver")
                .arg("-k")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The variable naming the directory of Windows stand-ins for POSIX tools
/// (`<tool>.exe`, built from `ci/wine/posixtools` by `ci/wine-smoke`).
/// Under `--wine` the daemon gets it on its `PATH` (`WINEPATH`,
/// [`Transport::env`]) and the probes that spawn only those tools run
/// ([`crate::probe::skips`]).
pub(crate) const WINE_TOOLS_VAR: &str = "REMORA_WINE_TOOLS";

/// The tools `REMORA_WINE_TOOLS` provides: the stems of its `.exe` files,
/// none when it is unset or unreadable.
pub(crate) fn wine_tools() -> Vec<String> {
    let Some(dir) = std::env::var_os(WINE_TOOLS_VAR) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".exe").map(str::to_string)
        })
        .collect()
}

/// The Windows name Wine gives a Unix path: through the `Z:` drive, which
/// a Wine prefix maps to `/` (an absolute path is made of the current
/// directory first).
pub(crate) fn wine_name(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    format!("Z:{}", abs.to_string_lossy().replace('/', "\\"))
}

/// `rpc.pipe` beside `socket` (clauster's `_pipe_name_path`).
pub(crate) fn pipe_file(socket: &Path) -> PathBuf {
    socket.with_file_name("rpc.pipe")
}

/// Sends `line` through a `-bridge` child of `bin` to the daemon on
/// `socket`, closes its stdin and reads until it exits or `within`
/// passes (then it is killed). False when the bridge could not start.
pub(crate) fn bridge_once(
    transport: Transport,
    bin: &Path,
    socket: &Path,
    env: &[(String, String)],
    line: &[u8],
    within: Duration,
) -> bool {
    let mut cmd = transport.command(bin);
    cmd.arg("-bridge")
        .arg("-socket")
        .arg(socket)
        .envs(env.iter().cloned())
        .envs(transport.env(env))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let Ok(mut child) = cmd.spawn() else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(line);
    }
    if let Some(mut out) = child.stdout.take() {
        std::thread::spawn(move || {
            let _ = out.read_to_end(&mut Vec::new());
        });
    }
    super::wait_or_kill(&mut child, Instant::now() + within);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_choose_the_transport() {
        assert_eq!(Transport::from_flags(false, false), Transport::Socket);
        assert_eq!(Transport::from_flags(true, false), Transport::Bridge);
        assert_eq!(Transport::from_flags(false, true), Transport::Wine);
        assert!(!Transport::Socket.bridged());
        assert!(Transport::Bridge.bridged() && Transport::Wine.bridged());
        assert_eq!(Transport::Wine.serve_extra(), ["-listen-pipe"]);
        assert!(Transport::Bridge.serve_extra().is_empty());
        let wine = Transport::Wine.command(Path::new("/x/remora.exe"));
        assert_eq!(wine.get_program(), "wine");
        assert_eq!(wine.get_args().collect::<Vec<_>>(), ["/x/remora.exe"]);
        let base = Duration::from_secs(20);
        assert_eq!(Transport::Socket.banner_allowance(base), base);
        assert_eq!(Transport::Bridge.banner_allowance(base), base);
        assert_eq!(Transport::Wine.banner_allowance(base), Duration::from_secs(60));
    }

    #[test]
    fn wine_names_go_through_the_z_drive() {
        assert_eq!(wine_name(Path::new("/tmp/x/bin")), "Z:\\tmp\\x\\bin");
    }

    #[test]
    fn a_pipe_only_daemon_is_listening_under_wine_only() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("rpc.sock");
        assert!(!Transport::Wine.listening(&socket));
        std::fs::write(pipe_file(&socket), "\\\\.\\pipe\\remora-x\n").unwrap();
        assert!(Transport::Wine.listening(&socket));
        assert!(!Transport::Bridge.listening(&socket));
    }
}
