//! The probes a transport cannot run, each with the reason the report
//! shows: one table ([`RULES`]) of name globs, plus the fixture kinds a
//! Windows daemon cannot be shown ([`fixture_need`]). A skipped probe is
//! never run and never counted as identical or differing; `harness
//! diff`/`check` list it under "skipped" with its reason.
//!
//! What each [`Need`] excludes:
//! - [`Need::DirectSocket`]: what a probe observes only on a socket it
//!   dialled itself, not through a `-bridge` child (`--via-bridge` and
//!   `--wine`);
//! - [`Need::AfUnix`], [`Need::Posix`], [`Need::WineTools`],
//!   [`Need::NotPorted`], [`Need::WindowsText`], [`Need::WindowsAnswer`]:
//!   a Windows daemon under
//!   Wine (`--wine`). A probe whose `process.spawn` runs a POSIX tool by
//!   name ([`POSIX_TOOLS`]) is a [`Need::WineTools`] skip found from its
//!   steps, so a new probe of that kind needs no row; a tool the stand-ins
//!   of `ci/wine/posixtools` provide (`<tool>.exe` in the directory
//!   `REMORA_WINE_TOOLS` names, [`crate::dut::transport::wine_tools`]) is not
//!   lacking.

use super::{Fixture, Probe, StepKind};
use crate::dut::transport::{Platform, Transport};

/// Why a probe cannot run on a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A socket the harness dialled itself.
    DirectSocket,
    /// The AF_UNIX socket file: Wine 8 has none, the daemon serves its
    /// pipe alone.
    AfUnix,
    /// A POSIX-only feature (signals, file types and modes, the run-dir
    /// lock, parent death).
    Posix,
    /// A tool the Wine prefix does not have (Git for Windows).
    WineTools,
    /// A mode the Windows build does not have yet (issue 43).
    NotPorted,
    /// A Windows difference in the answer: the OS's error messages (Go's
    /// `syscall.Errno` text is `FormatMessage`'s on Windows, Wine's own
    /// under Wine), Go's Windows file modes, and Windows path rules (no
    /// `ENOTDIR`, `..` resolved by name).
    WindowsText,
    /// A recorded Windows answer that differs from the Linux transcript:
    /// `features` without `git.worktree.external_root` (docs/UPSTREAM.md,
    /// "Windows answers"; `ci/wine-smoke` checks the Windows list itself).
    WindowsAnswer,
}

impl Need {
    /// Whether `transport` lacks this.
    fn lacking_on(self, transport: Transport) -> bool {
        match self {
            Need::DirectSocket => transport.bridged(),
            Need::AfUnix
            | Need::Posix
            | Need::WineTools
            | Need::NotPorted
            | Need::WindowsText
            | Need::WindowsAnswer => transport.platform() == Platform::Wine,
        }
    }
}

/// One row: probes whose name matches `names` (a glob) need `need`.
pub(crate) struct Rule {
    pub(crate) names: &'static str,
    pub(crate) need: Need,
    pub(crate) reason: &'static str,
}

/// Why the `files.extract_tar` probes that get past the argument checks
/// are not comparable under Wine (the ones refused before, such as
/// `tar-relative-dest` and `tar-root-dest`, run and match).
const TAR_UNIX_DEST: &str = "its destDir is a Unix path (/tmp/...): Go's filepath.IsAbs on Windows wants a drive or share, so the Windows build refuses it as `destDir must be an absolute, non-root path` before any entry (the engine's Windows tests, tarx/windows/engine_tests.rs, run under Wine)";

/// The skip list, by probe name.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        names: "server-capabilities*",
        need: Need::WindowsAnswer,
        reason: "a Windows build lists no git.worktree.external_root in features (recorded; ci/wine-smoke checks that list)",
    },
    Rule {
        names: "ref-socket-responses",
        need: Need::WindowsAnswer,
        reason: "its capabilities reply: a Windows build lists no git.worktree.external_root (ref-socket-responses-windows is that golden)",
    },
    Rule {
        names: "server-many-connections",
        need: Need::WindowsAnswer,
        reason: "a connection asks for capabilities: a Windows build lists no git.worktree.external_root",
    },
    Rule {
        names: "server-shutdown-reconnect-fails",
        need: Need::DirectSocket,
        reason: "records the harness's own connect failing; through -bridge the refusal is the bridge's exit",
    },
    Rule {
        names: "bridge-dial-failure",
        need: Need::AfUnix,
        reason: "the AF_UNIX dial's error text; under Wine -bridge dials the pipe",
    },
    Rule {
        names: "cli-socket-mode",
        need: Need::AfUnix,
        reason: "the socket file's mode; under Wine there is no socket file",
    },
    Rule {
        names: "cli-stale-socket",
        need: Need::AfUnix,
        reason: "a stale AF_UNIX socket file",
    },
    Rule {
        names: "cli-stop-*-socket",
        need: Need::AfUnix,
        reason: "-stop's removal of a stale or foreign socket path",
    },
    Rule {
        names: "ref-socket-files-read-socket",
        need: Need::AfUnix,
        reason: "reads a socket file",
    },
    Rule {
        names: "server-run-lock*",
        need: Need::Posix,
        reason: "the run-dir lock (flock); Windows has none (claustrum's record)",
    },
    Rule {
        names: "server-orphan-exit",
        need: Need::Posix,
        reason: "orphan detection by parent death",
    },
    Rule {
        names: "tar-*-entry",
        need: Need::Posix,
        reason: "POSIX tar entry types (links, fifos, devices)",
    },
    Rule {
        names: "git-*",
        need: Need::WineTools,
        reason: "the daemon runs git; the Wine prefix has no Git for Windows",
    },
    Rule {
        names: "*-git-*",
        need: Need::WineTools,
        reason: "the daemon runs git; the Wine prefix has no Git for Windows",
    },
    Rule {
        names: "ref-socket-worktree-*",
        need: Need::WineTools,
        reason: "the daemon runs git; the Wine prefix has no Git for Windows",
    },
    Rule {
        names: "install-*",
        need: Need::WindowsAnswer,
        reason: "-install's Windows facts differ from the Linux transcript (cliPath with \\ separators and <version>.exe), the probes' CLIs are #!/bin/sh scripts, and Wine reads $ROOT's /tmp (mode 1777) as writable by others, so the cli dir is refused; ci/wine/installcheck/run checks -install under Wine instead",
    },
    Rule {
        names: "cli-probe-cli*",
        need: Need::Posix,
        reason: "the probe's CLIs are #!/bin/sh scripts, which Windows does not run; ci/wine/installcheck/run checks -probe-cli under Wine instead (a CLI that runs, a missing one, exit 3, a hang whose grandchild dies with it)",
    },
    Rule {
        names: "files-stat-socket",
        need: Need::AfUnix,
        reason: "stats a socket file the fixture makes; Windows shows no socket file",
    },
    Rule {
        names: "files-stat-chardev",
        need: Need::Posix,
        reason: "stats /dev/null, a character device; Windows has no /dev",
    },
    Rule {
        names: "server-token-file-removed",
        need: Need::Posix,
        reason: "its fixture reads the run-dir lock (daemon.lock); Windows has none",
    },
    Rule {
        names: "server-capabilities-build-5fd08069",
        need: Need::NotPorted,
        reason: "calls launcher.resolve; the Windows answer (every launcher refused, as claustrum records) is not written yet (issue 43)",
    },
    Rule {
        names: "server-capabilities-build-89cb6289",
        need: Need::NotPorted,
        reason: "calls launcher.resolve; the Windows answer (every launcher refused, as claustrum records) is not written yet (issue 43)",
    },
    Rule {
        names: "ref-socket-git",
        need: Need::NotPorted,
        reason: "git.info; the git methods are refusals on Windows for now, and the Wine prefix has no Git for Windows",
    },
    Rule {
        names: "bridge-many",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "files-stat-dir",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "files-stat-file",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "files-stat-modes",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "files-stat-relative",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "params-duplicate-last-wins",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "params-key-case",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "params-unknown-key-ignored",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "ref-socket-files",
        need: Need::WindowsText,
        reason: "a files.stat mode: Go on Windows reports -rw-rw-rw- (read-only: -r--r--r--) and drwxrwxrwx, directories of size 0",
    },
    Rule {
        names: "cli-serve-bad-token-file",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "files-list-file",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "files-list-missing",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "files-stat-trailing-slash",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "params-empty-object",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "params-path-nul",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "process-absolute-missing",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "process-cwd-missing",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "process-exec-format-error",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "process-not-executable",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "ref-socket-error-text-parity",
        need: Need::WindowsText,
        reason: "an OS error's text: the Windows system message (Wine's under Wine), not the Linux errno text",
    },
    Rule {
        names: "bridge-default-socket",
        need: Need::AfUnix,
        reason: "the AF_UNIX dial's error text for the default socket; under Wine -bridge says WSAEAFNOSUPPORT and no rpc.pipe",
    },
    Rule {
        names: "cli-serve-*socket*-missing*",
        need: Need::AfUnix,
        reason: "runs -serve without -listen-pipe: under Wine the AF_UNIX listen fails (WSAEAFNOSUPPORT) and the daemon exits 1 with it, as issue 43 asks",
    },
    Rule {
        names: "server-capabilities-instance-new-boot",
        need: Need::AfUnix,
        reason: "restarts the daemon with -serve without -listen-pipe: under Wine the AF_UNIX listen fails (WSAEAFNOSUPPORT)",
    },
    Rule {
        names: "ref-socket-tilde-expansion",
        need: Need::NotPorted,
        reason: "its `~` expansions match under Wine; it also calls files.extract_tar and git.* (not ported) and shows Windows modes",
    },
    Rule {
        names: "record-clauster-hosted",
        need: Need::WineTools,
        reason: "spawns a #! shell script as the agent CLI; Windows runs no #! scripts and the Wine prefix has no sh",
    },
    Rule {
        names: "kill-live",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "kill-signal-*",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "kill-wait-live",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "kill-wait-signal-kill",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "kill-wait-timeout-*",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "process-stdin-closed-spawn",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "reattach-want-pid",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "stdin-cat-interactive",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "stdin-large",
        need: Need::Posix,
        reason: "a killed child's exit frame: on Windows a kill, whatever the signal, ends the Job Object and the child exits with code 1 and no signal (Go's Windows WaitStatus is never signaled); the Linux transcript says -1 and the signal",
    },
    Rule {
        names: "process-cwd",
        need: Need::WindowsText,
        reason: "runs pwd: a Windows process names its directory `Z:\\…` under Wine (`C:\\…` on Windows), not the Linux path of the transcript; no stand-in can print both",
    },
    Rule {
        names: "process-cwd-default",
        need: Need::WindowsText,
        reason: "runs pwd: a Windows process names its directory `Z:\\…` under Wine (`C:\\…` on Windows), not the Linux path of the transcript; no stand-in can print both",
    },
    Rule {
        names: "process-not-in-path",
        need: Need::WindowsText,
        reason: "Go's Windows exec.ErrNotFound says `executable file not found in %PATH%`, the Unix one `$PATH`",
    },
    Rule {
        names: "files-stat-under-file",
        need: Need::WindowsText,
        reason: "Windows path rules: a path under a file is ERROR_PATH_NOT_FOUND (not there), Linux says ENOTDIR",
    },
    Rule {
        names: "ref-socket-stat-error-propagation",
        need: Need::WindowsText,
        reason: "Windows path rules: `a.txt/../a.txt` resolves by name, a path under a file is not there (no ENOTDIR); NUL's text is the OS's",
    },
    Rule {
        names: "files-stat-long-path",
        need: Need::WindowsText,
        reason: "Windows path rules: a 300-byte name is not there under Wine, Linux says ENAMETOOLONG",
    },
    Rule {
        names: "tar-a*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-b*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-d*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-e*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-f*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-g*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-missing-archive",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-t*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-w*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "tar-z*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
    Rule {
        names: "record-files-extract-tar*",
        need: Need::WindowsAnswer,
        reason: TAR_UNIX_DEST,
    },
];

/// What a fixture kind needs of the daemon's platform: links, fifos and
/// POSIX modes are made on the Linux side, and a Windows daemon under
/// Wine sees them through Wine's `Z:` drive, not as Windows would.
fn fixture_need(f: &Fixture) -> Option<(Need, &'static str)> {
    match f {
        Fixture::Symlink { .. } => Some((Need::Posix, "a symlink fixture (POSIX links as Wine shows them)")),
        Fixture::Hardlink { .. } => Some((Need::Posix, "a hardlink fixture")),
        Fixture::Fifo { .. } => Some((Need::Posix, "a fifo fixture (no FIFOs on Windows)")),
        Fixture::Chmod { .. } => Some((Need::Posix, "a chmod fixture (POSIX permission bits)")),
        _ => None,
    }
}

/// Commands the probes run by name that a Windows host (and the Wine
/// prefix) does not have; a `process.spawn` of one cannot start there.
pub(crate) const POSIX_TOOLS: &[&str] = &[
    "sh", "bash", "printf", "true", "false", "sleep", "cat", "head", "tail", "seq", "wc", "pwd", "echo", "env", "yes",
    "tr", "dd",
];

/// The first POSIX tool a `process.spawn` step of `probe` runs that
/// `provided` lacks, and its line.
fn posix_tool(probe: &Probe, provided: &[String]) -> Option<(&'static str, usize)> {
    probe.steps.iter().find_map(|s| match &s.kind {
        StepKind::Call {
            method,
            params: Some(params),
            ..
        } if method == "process.spawn" => {
            let text: Vec<u8> = params
                .0
                .iter()
                .filter_map(|p| match p {
                    crate::probe::Piece::Lit(b) => Some(b.as_slice()),
                    _ => None,
                })
                .flatten()
                .copied()
                .collect();
            let text = String::from_utf8_lossy(&text);
            let command = text.split(r#""command":""#).nth(1)?.split('"').next()?;
            POSIX_TOOLS
                .iter()
                .find(|t| **t == command && !provided.iter().any(|p| p == command))
                .map(|t| (*t, s.line))
        }
        _ => None,
    })
}

/// Why `probe` cannot run on `transport`, or `None` when it can, with
/// the stand-in tools [`crate::dut::transport::wine_tools`] finds.
pub(crate) fn reason(probe: &Probe, transport: Transport) -> Option<String> {
    reason_with(probe, transport, &crate::dut::transport::wine_tools())
}

/// [`reason`], with the tools `provided` under Wine.
pub(crate) fn reason_with(probe: &Probe, transport: Transport, provided: &[String]) -> Option<String> {
    if let Some(rule) = RULES
        .iter()
        .find(|r| r.need.lacking_on(transport) && crate::probe::glob_match(r.names, &probe.name))
    {
        return Some(format!("{:?}: {}", rule.need, rule.reason));
    }
    if let Some((tool, line)) = posix_tool(probe, provided).filter(|_| Need::WineTools.lacking_on(transport)) {
        return Some(format!(
            "WineTools: process.spawn runs `{tool}` (line {line}), a POSIX tool Windows and the Wine prefix do not have (ci/wine/posixtools has no stand-in for it)"
        ));
    }
    probe.steps.iter().find_map(|s| match &s.kind {
        StepKind::Fixture(f) => fixture_need(f)
            .filter(|(need, _)| need.lacking_on(transport))
            .map(|(need, why)| format!("{need:?}: {why} (line {})", s.line)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(name: &str, text: &str) -> Probe {
        crate::probe::parse(std::path::Path::new(&format!("{name}.probe")), text).unwrap()
    }

    #[test]
    fn the_socket_transport_skips_nothing() {
        for name in ["kill-term", "git-status", "install-x", "bridge-dial-failure"] {
            assert_eq!(reason(&probe(name, "call c1 1 server.ping\n"), Transport::Socket), None);
        }
        let linked = probe("files-link", "symlink l target\ncall c1 1 server.ping\n");
        assert_eq!(reason(&linked, Transport::Socket), None);
        assert_eq!(
            reason(&linked, Transport::Bridge),
            None,
            "a bridge reaches the same Linux daemon"
        );
    }

    #[test]
    fn a_bridged_transport_skips_what_needs_a_socket_of_its_own() {
        let p = probe("server-shutdown-reconnect-fails", "call c1 1 server.ping\n");
        assert_eq!(reason(&p, Transport::Socket), None);
        for t in [Transport::Bridge, Transport::Wine] {
            assert!(reason(&p, t).unwrap().starts_with("DirectSocket: "));
        }
    }

    #[test]
    fn wine_skips_by_name_and_by_fixture_with_the_reason() {
        let kill = reason(&probe("kill-signal-int", "call c1 1 server.ping\n"), Transport::Wine).unwrap();
        assert!(kill.starts_with("Posix: a killed child's exit frame"), "{kill}");
        let git = reason(
            &probe("record-git-list-branches", "call c1 1 server.ping\n"),
            Transport::Wine,
        )
        .unwrap();
        assert!(git.starts_with("WineTools:"), "{git}");
        let fifo = reason(
            &probe("files-read-x", "fifo f\ncall c1 1 server.ping\n"),
            Transport::Wine,
        )
        .unwrap();
        assert_eq!(fifo, "Posix: a fifo fixture (no FIFOs on Windows) (line 1)");
        assert_eq!(
            reason(&probe("server-ping", "call c1 1 server.ping\n"), Transport::Wine),
            None,
            "server.*, files.* and process.* probes run under Wine"
        );
        assert_eq!(
            reason(&probe("files-read", "file a 0644 \"x\"\n"), Transport::Wine),
            None
        );
    }

    #[test]
    fn extraction_probes_run_under_wine_unless_their_dest_dir_is_a_unix_path() {
        let call = "call c1 1 server.ping\n";
        for name in [
            "tar-relative-dest",
            "tar-root-dest",
            "tar-missing-params",
            "plugins-prune-params",
        ] {
            assert_eq!(reason(&probe(name, call), Transport::Wine), None, "{name}");
        }
        for name in ["tar-basic", "tar-zip-slip", "record-files-extract-tar-5fd08069"] {
            let why = reason(&probe(name, call), Transport::Wine).unwrap();
            assert!(
                why.starts_with("WindowsAnswer: its destDir is a Unix path"),
                "{name}: {why}"
            );
        }
        let entry = reason(&probe("tar-symlink-entry", call), Transport::Wine).unwrap();
        assert!(entry.starts_with("Posix: "), "{entry}");
    }

    #[test]
    fn a_spawn_of_a_posix_tool_is_skipped_under_wine_only() {
        let text = "desc x\ncall c1 1 process.spawn {\"id\":\"p1\",\"command\":\"sh\",\"args\":[\"-c\",\"exit 3\"]}\n";
        let p = probe("process-exit-code-x", text);
        assert_eq!(reason(&p, Transport::Socket), None);
        assert_eq!(reason(&p, Transport::Bridge), None);
        assert_eq!(
            reason(&p, Transport::Wine).unwrap(),
            "WineTools: process.spawn runs `sh` (line 2), a POSIX tool Windows and the Wine prefix do not have (ci/wine/posixtools has no stand-in for it)"
        );
        // A stand-in for the first tool, not for the second: the second
        // still skips, naming its line.
        let two = "call c1 1 process.spawn {\"id\":\"a\",\"command\":\"printf\"}\ncall c1 2 process.spawn {\"id\":\"b\",\"command\":\"sh\"}\n";
        let two = probe("process-two-x", two);
        let provided = ["printf".to_string(), "head".to_string()];
        assert_eq!(
            reason_with(&two, Transport::Wine, &provided).unwrap(),
            "WineTools: process.spawn runs `sh` (line 2), a POSIX tool Windows and the Wine prefix do not have (ci/wine/posixtools has no stand-in for it)"
        );
        assert_eq!(reason_with(&p, Transport::Wine, &["sh".to_string()]), None);
        let absent = probe(
            "process-not-in-path-x",
            "call c1 1 process.spawn {\"id\":\"p1\",\"command\":\"no-such-tool\"}\n",
        );
        assert_eq!(
            reason(&absent, Transport::Wine),
            None,
            "a name that is absent everywhere runs"
        );
    }

    #[test]
    fn every_rule_matches_a_probe_of_the_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../probes");
        let names: Vec<String> = crate::probe::load_dir(&dir)
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        for r in RULES {
            assert!(
                names.iter().any(|n| crate::probe::glob_match(r.names, n)),
                "rule {} matches no probe: a renamed probe escaped the list",
                r.names
            );
            assert!(!r.reason.is_empty());
        }
    }
}
