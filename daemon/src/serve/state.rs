//! The daemon-wide state every connection and handler shares: the token,
//! the per-boot identity, the counters, the stop signal, the process
//! registry and the replay store. Built once by [`crate::launch::cli`]; the
//! server's accept loop only hands it to connections, and the process
//! supervisor gets the few parts it needs ([`crate::process::Supervision`])
//! instead of this whole struct.

use crate::base::instance::Instance;
use crate::base::shutdown::Shutdown;
use crate::process::retention::Retention;
use crate::process::{ProcessManager, Supervision};
use crate::protocol::build::Build;
use crate::protocol::metrics::Metrics;
use crate::replay::store::{ReplayStore, StoreConfig};
use crate::serve::admission::Admission;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// Settings fixed when the daemon starts.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub socket_path: PathBuf,
    /// `-keep-children`: leave children running across a graceful shutdown.
    pub keep_children: bool,
    /// `-replay-dir` and `-replay-budget-mb`: where replay logs spill.
    pub replay: StoreConfig,
    /// `-exited-retention-min`: how long exited processes stay answerable.
    pub retention: Retention,
    /// How long a connection may stay without an authenticated request,
    /// and how long a new one cannot be evicted
    /// ([`crate::serve::admission::Graces`]; a test may change them).
    pub graces: crate::serve::admission::Graces,
    /// The reference build answered as (the `reference-build` stamp).
    pub build: &'static Build,
    /// `server.capabilities`' `peerCheck`, for a build that has the member
    /// ([`crate::serve::peercheck`]).
    pub peer_check: Option<&'static str>,
    /// `-wire-log`: where every frame is logged, when on
    /// ([`crate::serve::wirelog`]).
    pub wire_log: Option<Arc<crate::serve::wirelog::WireTap>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            socket_path: PathBuf::new(),
            keep_children: false,
            replay: StoreConfig::default(),
            retention: Retention::from_minutes(crate::process::retention::DEFAULT_MINUTES),
            graces: crate::serve::admission::Graces::default(),
            build: crate::protocol::build::NEWEST,
            peer_check: None,
            wire_log: None,
        }
    }
}

/// State shared by every connection and handler.
pub(crate) struct Daemon {
    pub token: Vec<u8>,
    /// Per-boot identity (`server.capabilities`, run-dir lock, orphan check).
    pub instance: Instance,
    /// Connections open right now (the orphan check needs "no client").
    pub clients: AtomicUsize,
    /// Poked when a connection opens or closes and when the process table
    /// grows or shrinks ([`crate::serve::idle`] waits on it).
    pub activity: crate::base::activity::Activity,
    pub options: Options,
    pub metrics: Arc<Metrics>,
    pub shutdown: Shutdown,
    pub processes: ProcessManager,
    /// Where replay logs keep their frames (RAM tails, disk segments).
    pub replay: Arc<ReplayStore>,
    /// The connection cap and the bounds on connections without the token.
    pub admission: Arc<Admission>,
    /// What `launcher.resolve` remembers for its log lines.
    pub launcher_log: crate::methods::launcher::LauncherLog,
}

impl Daemon {
    /// The daemon state, with an identity made earlier (the run-dir lock
    /// records it before the daemon state exists).
    pub(crate) fn with_instance(token: Vec<u8>, options: Options, instance: Instance) -> Arc<Daemon> {
        let metrics = Arc::new(Metrics::default());
        let replay = ReplayStore::open(options.replay.clone(), metrics.replay.clone());
        let shutdown = Shutdown::new();
        let activity = crate::base::activity::Activity::default();
        let processes = ProcessManager::new(Supervision {
            replay: replay.clone(),
            metrics: metrics.clone(),
            shutdown: shutdown.subscribe(),
            retention: options.retention,
            kill_grace_cap: crate::process::kill_grace_cap_from_env(),
            activity: activity.clone(),
        });
        Arc::new(Daemon {
            token,
            instance,
            clients: AtomicUsize::new(0),
            activity,
            metrics,
            shutdown,
            processes,
            replay,
            admission: Admission::from_fd_limit(options.graces),
            launcher_log: Default::default(),
            options,
        })
    }
}
