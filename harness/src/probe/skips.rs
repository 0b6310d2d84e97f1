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
//!   [`Need::NotPorted`]: a Windows daemon under Wine (`--wine`).

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
}

impl Need {
    /// Whether `transport` lacks this.
    fn lacking_on(self, transport: Transport) -> bool {
        match self {
            Need::DirectSocket => transport.bridged(),
            Need::AfUnix | Need::Posix | Need::WineTools | Need::NotPorted => transport.platform() == Platform::Wine,
        }
    }
}

/// One row: probes whose name matches `names` (a glob) need `need`.
pub(crate) struct Rule {
    pub(crate) names: &'static str,
    pub(crate) need: Need,
    pub(crate) reason: &'static str,
}

/// The skip list, by probe name.
pub(crate) const RULES: &[Rule] = &[
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
        names: "kill-*",
        need: Need::Posix,
        reason: "POSIX signals and process groups; on Windows a kill ends the Job Object",
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
        need: Need::NotPorted,
        reason: "-install is not ported to Windows yet (issue 43)",
    },
    Rule {
        names: "cli-probe-cli*",
        need: Need::NotPorted,
        reason: "-probe-cli is not ported to Windows yet (issue 43)",
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

/// Why `probe` cannot run on `transport`, or `None` when it can.
pub(crate) fn reason(probe: &Probe, transport: Transport) -> Option<String> {
    if let Some(rule) = RULES
        .iter()
        .find(|r| r.need.lacking_on(transport) && crate::probe::glob_match(r.names, &probe.name))
    {
        return Some(format!("{:?}: {}", rule.need, rule.reason));
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
        let kill = reason(&probe("kill-term", "call c1 1 server.ping\n"), Transport::Wine).unwrap();
        assert!(kill.starts_with("Posix: POSIX signals"), "{kill}");
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
