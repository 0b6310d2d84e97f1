//! The reference builds remora answers as: one [`Build`] per recorded
//! build, chosen once at start from the `reference-build` stamp.
//!
//! Claude Desktop deploys the daemon at `srv/<sha>/server` and talks to it
//! as the build `<sha>` names; the pin moves every few weeks. Each build's
//! surface (its `server.capabilities` frame and every behaviour that
//! differs between builds) is one row of [`BUILDS`], and handlers ask the
//! row ([`Build::has`]) instead of comparing ids. A [`Switch`] names one
//! such behaviour; [`Switch::source`] names the record page it comes from.
//!
//! Choosing ([`Build::for_stamp`]): a stamp whose leading digits are a
//! row's id serves that row; no stamp, or a stamp no row records, serves
//! the newest row ([`NEWEST`]), and the caller logs which.

use crate::protocol::method::{LauncherMethod, Method, PluginsMethod, ALL};
use crate::sys::Host;

/// A behaviour that differs between reference builds. Every one is served
/// only to the builds whose row lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// The readiness banner ends `(pid <n>, instance <32hex>)`, the
    /// instance being `server.capabilities`' `instanceId`.
    BannerIds,
    /// `-install -cli-version` without `-cli-dir` installs into
    /// `<home>/.claude/remote/ccd-cli`.
    DefaultCliDir,
    /// `server.capabilities` ends with `peerCheck`; the daemon reads
    /// `CLAUDE_SSH_PEER_CHECK` once at start and no child inherits it.
    PeerCheck,
    /// `files.extract_tar` lands a file whose owner execute bit is set as
    /// `0700` (else `0600`), and refuses a name that leaves `destDir` and
    /// comes back (`../dest/x`), and words its entry and destDir failures
    /// relative to `destDir` (`mkdirat a: file exists`; one changeset).
    TarExecBit,
    /// `git.worktree_remove` and the create rollback delete a branch only
    /// when another local branch or a remote-tracking ref reaches its tip,
    /// and say `"branchKept":true` when they keep it (feature
    /// `git.worktree_remove.unpushedGuard`).
    UnpushedGuard,
    /// The managed launcher: `launcher.resolve`, `process.spawn`'s
    /// `launcher` param, and every child loses
    /// `CLAUDE_SSH_MANAGED_LAUNCHER` and `CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR`.
    ManagedLauncher,
    /// `git.worktree_create` drops a stale registration of the new path
    /// before the add, and after the add tests the registration git made
    /// (the leaf's `.git` file, the entry, its `commondir` and `gitdir`
    /// record, a stale entry that stayed) before the checkout, refusing
    /// with `unsafe_path` (Linux and macOS).
    WorktreeRegistration,
    /// The git-directory trust check trusts a stray `commondir` (one in a
    /// git directory that is not a linked worktree's entry) that reads `.`
    /// or `./` in a valid git directory, and refuses the rest with the
    /// S1 to S3 texts instead of M1 (with feature `git.info.discovered_root`).
    StrayCommondir,
    /// `-install`'s direct `<cli> --version` run is stopped (group SIGKILL)
    /// at 30 s on a cache hit and at 120 s right after an install; a stop
    /// is `cliError` `cli unresponsive: …` with `"cliUnresponsive":true`,
    /// installs nothing on a cache hit and keeps a new CLI.
    CliRunBounds,
    /// `-install` whose `-cli-dir` cannot be made answers an empty
    /// `cliPath`.
    EmptyPathWithoutCliDir,
}

impl Switch {
    /// Every switch, for the table test.
    pub const ALL: [Switch; 10] = [
        Switch::BannerIds,
        Switch::DefaultCliDir,
        Switch::PeerCheck,
        Switch::TarExecBit,
        Switch::UnpushedGuard,
        Switch::ManagedLauncher,
        Switch::WorktreeRegistration,
        Switch::StrayCommondir,
        Switch::CliRunBounds,
        Switch::EmptyPathWithoutCliDir,
    ];

    /// Where the behaviour and the builds that have it are recorded
    /// (`schubydoo/claustrum`; docs/UPSTREAM.md has the rows).
    pub const fn source(self) -> &'static str {
        match self {
            Switch::BannerIds => "docs/PROTOCOL.md, \"Daemon log\" (measured on f6010b97 and 89cb6289)",
            Switch::DefaultCliDir => "docs/PROTOCOL.md, \"-install\" (default CLI folder measured on 89cb6289; the no-home refusal on f6010b97 too)",
            Switch::PeerCheck => "docs/PROTOCOL.md, \"server.*\"; .changeset/capabilities-peer-check.md; docs/DIVERGENCES.md D25",
            Switch::TarExecBit => "docs/record/files-extract-tar.md (every table gives 5fd08069 beside 89cb6289); .changeset/extract-tar-exec-bit.md",
            Switch::UnpushedGuard => "docs/PROTOCOL.md, \"The branch step\" and \"git.worktree_remove\"; docs/protocol/git-worktree-create-evidence.md (\"Evidence: `branchKept` rows\")",
            Switch::ManagedLauncher => "docs/PROTOCOL.md, \"launcher.* (added 89cb6289)\"; .changeset/managed-launcher.md",
            Switch::StrayCommondir => "docs/PROTOCOL.md, \"Git-directory trust check\" (stray commondir, rows T00 to T11 of 89cb6289); the .changeset note on git.info.discovered_root",
            Switch::WorktreeRegistration => "docs/record/git-worktree-create.md (the stale-entry step before the add and the tests after it, A/S/P/D/T/U cells of 89cb6289); docs/protocol/git-worktree-create-steps.md, Steps 6 and 9",
            Switch::CliRunBounds => "docs/DIVERGENCES.md D11 (retired: the two bounds measured on f6010b97 and 89cb6289, the first build to have them not measured); .changeset/install-version-bound.md",
            Switch::EmptyPathWithoutCliDir => "docs/ARCHITECTURE.md \"__INSTALL_RESULT__ facts\" (cliPath \"\" when the cli-dir cannot be made); install_test.go row E10 (Linux VM, 89cb6289)",
        }
    }
}

/// One recorded reference build: what its `server.capabilities` lists and
/// which [`Switch`]es it has.
#[derive(Debug, PartialEq, Eq)]
pub struct Build {
    /// The id as the records name it (the leading hex digits of the commit).
    pub id: &'static str,
    /// The methods of [`ALL`] this build does not have.
    lacks: &'static [Method],
    /// `server.capabilities` `features`, in the build's order (Linux and
    /// macOS), less [`NOT_SERVED`].
    features: &'static [&'static str],
    switches: &'static [Switch],
}

/// Features a build's record lists that remora does not offer, with why
/// (docs/UPSTREAM.md and the closing notes keep the detail). They are left
/// out of every frame rather than advertised for a behaviour remora lacks.
/// Empty since `git.worktree.external_root` (`worktreeRoot`) is served.
pub const NOT_SERVED: &[(&str, &str)] = &[];

const PEER_CHECK: &str = "server.peer_check";
const GUARD: &str = "git.worktree_remove.unpushedGuard";
/// The feature whose changeset brings [`Switch::StrayCommondir`].
const DISCOVERED_ROOT: &str = "git.info.discovered_root";
/// `worktreeRoot` placement ([`crate::methods`] git `external_root`),
/// listed right before `server.instance_id` by every build since 7d193f89
/// on Linux and macOS; not on Windows ([`Build::features`]).
const EXTERNAL_ROOT: &str = "git.worktree.external_root";

/// `launcher.resolve`, which builds before 89cb6289 lack (they answer
/// `-32601 Unknown namespace: launcher`).
const RESOLVE: Method = Method::Launcher(LauncherMethod::Resolve);

/// Every recorded build remora can answer as, oldest first; the last is
/// [`NEWEST`]. Feature lists: docs/PROTOCOL.md "server.*" of each era and
/// `testdata/socket_responses.golden.json` (19f30c46/90fca6e6).
pub const BUILDS: &[Build] = &[
    Build {
        id: "4534d86",
        lacks: &[Method::Plugins(PluginsMethod::Prune), RESOLVE],
        features: &[
            "process.stdin.offset",
            "git.status.baseRepo",
            "git.worktree_create.timeoutMs",
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[],
    },
    Build {
        id: "19f30c46",
        lacks: &[RESOLVE],
        features: &[
            "process.stdin.offset",
            "git.status.baseRepo",
            "git.worktree_create.timeoutMs",
            "git.worktree_create.existingBranch",
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[],
    },
    Build {
        id: "90fca6e6",
        lacks: &[RESOLVE],
        features: &[
            "process.stdin.offset",
            "git.status.baseRepo",
            "git.worktree_create.timeoutMs",
            "git.worktree_create.existingBranch",
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[],
    },
    Build {
        id: "f6010b97",
        lacks: &[RESOLVE],
        features: &[
            "process.stdin.offset",
            "git.status.baseRepo",
            "git.worktree_create.timeoutMs",
            "git.worktree_create.existingBranch",
            "process.spawn.shellAgentSocket",
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[Switch::BannerIds, Switch::DefaultCliDir, Switch::CliRunBounds],
    },
    Build {
        id: "89cb6289",
        lacks: &[],
        features: &[
            "process.stdin.offset",
            "git.status.baseRepo",
            DISCOVERED_ROOT,
            "git.worktree_create.timeoutMs",
            "git.worktree_create.existingBranch",
            GUARD,
            "process.spawn.shellAgentSocket",
            "launcher.managed",
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[
            Switch::BannerIds,
            Switch::DefaultCliDir,
            Switch::UnpushedGuard,
            Switch::ManagedLauncher,
            Switch::WorktreeRegistration,
            Switch::StrayCommondir,
            Switch::CliRunBounds,
            Switch::EmptyPathWithoutCliDir,
        ],
    },
    Build {
        id: "5fd08069",
        lacks: &[],
        features: &[
            "process.stdin.offset",
            "files.extract_tar.execBit",
            "git.status.baseRepo",
            DISCOVERED_ROOT,
            "git.worktree_create.timeoutMs",
            "git.worktree_create.existingBranch",
            GUARD,
            "process.spawn.shellAgentSocket",
            "launcher.managed",
            PEER_CHECK,
            EXTERNAL_ROOT,
            "server.instance_id",
        ],
        switches: &[
            Switch::BannerIds,
            Switch::DefaultCliDir,
            Switch::PeerCheck,
            Switch::TarExecBit,
            Switch::UnpushedGuard,
            Switch::ManagedLauncher,
            // Inherited from 89cb6289: no record measures 5fd08069's
            // worktree_create, and no changeset takes the steps out.
            Switch::WorktreeRegistration,
            Switch::StrayCommondir,
            Switch::CliRunBounds,
            Switch::EmptyPathWithoutCliDir,
        ],
    },
];

/// The build served without a stamp, or for a stamp no row records.
pub const NEWEST: &Build = &BUILDS[BUILDS.len() - 1];

/// How a stamp was answered: the row served, and whether the stamp named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// No stamp: [`NEWEST`].
    Unstamped,
    /// The stamp names this recorded build.
    Recorded,
    /// The stamp names a build with no record: [`NEWEST`] is served.
    Unrecorded,
}

impl Build {
    /// The row a `reference-build` stamp (lower-case hex, or empty) selects.
    pub fn for_stamp(stamp: &str) -> (&'static Build, Choice) {
        if stamp.is_empty() {
            return (NEWEST, Choice::Unstamped);
        }
        match BUILDS.iter().find(|b| stamp.starts_with(b.id)) {
            Some(build) => (build, Choice::Recorded),
            None => (NEWEST, Choice::Unrecorded),
        }
    }

    /// Whether this build has the behaviour.
    pub fn has(&self, switch: Switch) -> bool {
        self.switches.contains(&switch)
    }

    /// Whether this build has the method (else it answers `-32601` as a
    /// build without it).
    pub fn serves(&self, method: Method) -> bool {
        !self.lacks.contains(&method)
    }

    /// The `server.capabilities` `methods`, in order.
    pub fn methods(&self) -> impl Iterator<Item = &'static str> + Clone + '_ {
        ALL.iter().filter(|m| self.serves(**m)).map(|m| m.name())
    }

    /// The `server.capabilities` `features`, in order, as a `host` lists
    /// them: the reference's Windows builds gate the `worktreeRoot`
    /// placement off and leave [`EXTERNAL_ROOT`] out (claustrum
    /// `docs/PROTOCOL.md` "server.*", measured against 7d193f89;
    /// `.changeset/fix-external-worktree-windows.md`); every other feature
    /// is listed on every host.
    pub fn features(&self, host: Host) -> impl Iterator<Item = &'static str> + Clone + '_ {
        self.features
            .iter()
            .copied()
            .filter(move |f| host == Host::Unix || *f != EXTERNAL_ROOT)
    }

    /// Resolves a request's `method` among this build's methods, or gives
    /// the -32601 message the build answers ([`crate::protocol::method::resolve`]).
    pub fn resolve(&self, name: &str) -> Result<Method, String> {
        crate::protocol::method::resolve(name, |m| self.serves(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_switch_names_its_record_and_a_build_that_has_it() {
        for switch in Switch::ALL {
            assert!(switch.source().starts_with("docs/") || switch.source().starts_with(".changeset/"));
            assert!(BUILDS.iter().any(|b| b.has(switch)), "{switch:?} is served to no build");
        }
    }

    #[test]
    fn a_stamp_selects_by_leading_digits_and_an_unknown_one_gets_the_newest() {
        let (b, c) = Build::for_stamp(&"89cb6289".repeat(5));
        assert_eq!((b.id, c), ("89cb6289", Choice::Recorded));
        let (b, c) = Build::for_stamp("4534d86000000000000000000000000000000000");
        assert_eq!((b.id, c), ("4534d86", Choice::Recorded));
        let (b, c) = Build::for_stamp("869762545054f8caf5b0e36192651744a2461d3b");
        assert_eq!((b, c), (NEWEST, Choice::Unrecorded));
        assert_eq!(Build::for_stamp(""), (NEWEST, Choice::Unstamped));
    }

    #[test]
    fn ids_are_unique_prefixes_and_features_keep_instance_id_last() {
        for (i, a) in BUILDS.iter().enumerate() {
            for b in &BUILDS[i + 1..] {
                assert!(!a.id.starts_with(b.id) && !b.id.starts_with(a.id), "{} {}", a.id, b.id);
            }
            assert_eq!(a.features.last(), Some(&"server.instance_id"), "{}", a.id);
            assert_eq!(a.features[a.features.len() - 2], EXTERNAL_ROOT, "{}", a.id);
            assert_eq!(a.has(Switch::PeerCheck), a.features.contains(&PEER_CHECK), "{}", a.id);
            assert_eq!(a.has(Switch::UnpushedGuard), a.features.contains(&GUARD), "{}", a.id);
            assert_eq!(
                a.has(Switch::StrayCommondir),
                a.features.contains(&DISCOVERED_ROOT),
                "{}",
                a.id
            );
            for (feature, _) in NOT_SERVED {
                assert!(!a.features.contains(feature), "{}: {feature}", a.id);
            }
        }
    }

    #[test]
    fn windows_lists_every_feature_but_external_root() {
        for b in BUILDS {
            let unix: Vec<_> = b.features(Host::Unix).collect();
            assert_eq!(unix, b.features, "{}", b.id);
            let windows: Vec<_> = b.features(Host::Windows).collect();
            let expected: Vec<_> = b.features.iter().copied().filter(|f| *f != EXTERNAL_ROOT).collect();
            assert_eq!(windows, expected, "{}", b.id);
            assert_eq!(windows.len() + 1, unix.len(), "{}", b.id);
            assert_eq!(windows.last(), Some(&"server.instance_id"), "{}", b.id);
        }
        // launcher.managed stays listed on Windows (every launcher is
        // refused there, but the feature is advertised).
        assert!(NEWEST.features(Host::Windows).any(|f| f == "launcher.managed"));
        assert!(NEWEST
            .features(Host::Windows)
            .any(|f| f == "git.worktree_create.timeoutMs"));
    }

    #[test]
    fn resolve_answers_as_the_build() {
        let newest = NEWEST;
        assert_eq!(newest.resolve("server.ping").map(|m| m.name()), Ok("server.ping"));
        assert_eq!(newest.resolve("ping"), Err("Invalid method format: ping".into()));
        assert_eq!(newest.resolve("server.nope"), Err("Unknown method: server.nope".into()));
        assert_eq!(newest.resolve("nope.x"), Err("Unknown namespace: nope".into()));
        let (old, _) = Build::for_stamp(&"4534d86".repeat(6)[..40]);
        assert_eq!(old.methods().count(), 18);
        assert_eq!(old.resolve("plugins.prune"), Err("Unknown namespace: plugins".into()));
        assert_eq!(
            old.resolve("launcher.resolve"),
            Err("Unknown namespace: launcher".into())
        );
        assert_eq!(
            newest.resolve("launcher.nope"),
            Err("Unknown method: launcher.nope".into())
        );
        for b in BUILDS {
            let managed = b.has(Switch::ManagedLauncher);
            assert_eq!(b.serves(RESOLVE), managed, "{}", b.id);
            assert_eq!(b.features.contains(&"launcher.managed"), managed, "{}", b.id);
        }
    }
}
