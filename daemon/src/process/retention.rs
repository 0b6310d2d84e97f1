//! How long an exited process stays answerable, and the sweeper that
//! drops it afterwards.
//!
//! The reference forgets an exited process 15 minutes after its exit frame:
//! its frames sit in a RAM ring of up to 16 MiB per process, so keeping it
//! costs memory. remora keeps an exited process's frames on disk (under the
//! replay budget) and a few KiB of RAM (6.2 KiB of RSS each, measured over
//! 3,000 exited `echo`s in a debug build), so it can answer much longer:
//! a client that was away (a laptop asleep, clauster restarting) then finds
//! the exit frame instead of `found:false`. So an exited process stays for
//! the `-exited-retention-min` setting ([`DEFAULT_MINUTES`]), with two
//! limits that start at the reference's 15 minutes:
//!
//! - once any frame of its log is gone (the disk budget evicted it, or the
//!   log fell back to a RAM ring), it is dropped: what it could replay is no
//!   longer the whole story, and a ring's frames cost RAM;
//! - past [`MAX_KEPT_PAST_REFERENCE`] such processes, the oldest exits go
//!   first, so a client spawning many short processes cannot grow the
//!   table without bound.
//!
//! A dropped process answers `found:false` (`process.reattach`,
//! `killAndWait`) and "Process not found" (`stdin`, `kill`), as with the
//! reference. A running process is never dropped.

use super::managed::{lock, Table};
use crate::base::shutdown::ShutdownWatch;
use crate::replay::store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The setting's default: a day, so a client away overnight still finds
/// the processes that ended meanwhile (docs/UPSTREAM.md has the reasons).
pub(crate) const DEFAULT_MINUTES: u64 = 24 * 60;
/// Exited processes kept past the reference's 15 minutes at most (each
/// holds a few KiB of RAM and its segment file): about 6 MiB at most, and
/// far more than the handful of agent sessions a client leaves a day.
pub(crate) const MAX_KEPT_PAST_REFERENCE: usize = 1024;

/// The two durations the sweeper applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    /// The reference's 15 minutes, from which only whole logs stay.
    pub reference: Duration,
    /// The setting: no exited process stays longer.
    pub setting: Duration,
    /// Exited processes kept past `reference` at most
    /// ([`MAX_KEPT_PAST_REFERENCE`]).
    pub cap: usize,
}

impl Retention {
    /// The retention for a setting of `minutes`. Tests shorten time with
    /// `REMORA_TEST_RETENTION_MINUTE_MS` (the length of one minute, the
    /// reference's 15 included), or replace both durations with
    /// `REMORA_TEST_RETENTION_MS` (what `harness bench` sets, whatever the
    /// build).
    pub(crate) fn from_minutes(minutes: u64) -> Retention {
        if let Some(ms) = store::test_env("REMORA_TEST_RETENTION_MS") {
            let both = Duration::from_millis(ms);
            return Retention {
                reference: both,
                setting: both,
                cap: MAX_KEPT_PAST_REFERENCE,
            };
        }
        let minute_ms = store::test_env("REMORA_TEST_RETENTION_MINUTE_MS").unwrap_or(60_000);
        Retention {
            reference: Duration::from_millis(minute_ms.saturating_mul(store::RETENTION.as_secs() / 60)),
            setting: Duration::from_millis(minute_ms.saturating_mul(minutes)),
            cap: MAX_KEPT_PAST_REFERENCE,
        }
    }

    /// How often the sweeper looks: a fifteenth of the shorter duration,
    /// between 10 ms and a minute.
    fn period(&self) -> Duration {
        (self.reference.min(self.setting) / 15).clamp(Duration::from_millis(10), Duration::from_secs(60))
    }
}

/// What one sweep dropped, by rule.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Dropped {
    /// Exit older than the setting.
    pub by_age: usize,
    /// Past the reference's time with a log no longer whole.
    pub by_log: usize,
    /// Past the reference's time, the oldest beyond the cap.
    pub by_cap: usize,
}

/// Drops the exited processes of `table` that `retention` no longer keeps
/// (their logs are freed once no connection still holds them).
pub(super) fn drop_exited(table: &Table, retention: &Retention, now: Instant) -> Dropped {
    let mut dropped = Dropped::default();
    let mut table = lock(table);
    let mut past_reference: Vec<(Instant, String)> = Vec::new();
    table.retain(|id, p| {
        let Some(at) = p.finished_at.get() else {
            return true;
        };
        let age = now.saturating_duration_since(*at);
        if age >= retention.setting {
            dropped.by_age += 1;
            return false;
        }
        if age >= retention.reference {
            if !p.log.kept_whole() {
                dropped.by_log += 1;
                return false;
            }
            past_reference.push((*at, id.clone()));
        }
        true
    });
    if past_reference.len() > retention.cap {
        past_reference.sort_unstable();
        let excess = past_reference.len() - retention.cap;
        for (_, id) in &past_reference[..excess] {
            table.remove(id);
        }
        dropped.by_cap = excess;
    }
    if table.capacity() > 2 * table.len() + 64 {
        table.shrink_to_fit();
    }
    dropped
}

/// The retention sweeper of one registry: not running until the first
/// spawn (a daemon that never spawns has nothing to sweep), then one task
/// until the registry is dropped or the daemon stops.
#[derive(Default)]
pub(super) struct Sweeper {
    started: AtomicBool,
}

impl Sweeper {
    /// Starts the sweeper over `table` unless it already runs. Must run
    /// inside the tokio runtime.
    pub(super) fn start_once(
        &self,
        table: &Arc<Table>,
        retention: Retention,
        shutdown: &ShutdownWatch,
        activity: &crate::base::activity::Activity,
    ) {
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep_exited(
                Arc::downgrade(table),
                retention,
                shutdown.clone(),
                activity.clone(),
            ));
        }
    }
}

/// The sweep: every [`Retention::period`], drops what [`drop_exited`]
/// drops (the idle exit hears of each drop through `activity`). Ends with
/// the registry or at shutdown.
async fn sweep_exited(
    table: Weak<Table>,
    retention: Retention,
    mut shutdown: ShutdownWatch,
    activity: crate::base::activity::Activity,
) {
    let period = retention.period();
    // A second trim once the blocking pool's idle threads (kept 10 s) are
    // gone, so what they freed is returned too.
    let mut trim_again: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = shutdown.wait() => return,
        }
        let Some(table) = table.upgrade() else { return };
        let dropped = drop_exited(&table, &retention, Instant::now());
        drop(table);
        log_dropped(&dropped, &retention);
        if dropped != Dropped::default() {
            activity.poke();
            // Give freed pages back to the system: a burst of short-lived
            // processes should not leave the daemon's RSS raised.
            crate::sys::os::trim_heap();
            trim_again = Some(Instant::now() + Duration::from_secs(11));
        } else if trim_again.is_some_and(|at| Instant::now() >= at) {
            crate::sys::os::trim_heap();
            trim_again = None;
        }
    }
}

fn log_dropped(dropped: &Dropped, retention: &Retention) {
    if dropped.by_age > 0 {
        // The reference's line (with its 900 s when the setting is 15 min).
        crate::log_info!(
            "[process.Manager] Dropped {} exited process(es) after {} s of retention",
            dropped.by_age,
            retention.setting.as_secs()
        );
    }
    if dropped.by_log > 0 {
        crate::log_info!(
            "[process.Manager] Dropped {} exited process(es) after {} s: part of their replay log was no longer kept",
            dropped.by_log,
            retention.reference.as_secs()
        );
    }
    if dropped.by_cap > 0 {
        crate::log_info!(
            "[process.Manager] Dropped {} exited process(es) after {} s: the oldest beyond the {} kept longer",
            dropped.by_cap,
            retention.reference.as_secs(),
            retention.cap
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ProcessManager, SpawnSpec, Supervision};
    use super::*;
    use crate::base::shutdown::Shutdown;
    use std::sync::Arc;

    #[test]
    fn the_flag_default_is_the_module_default() {
        assert_eq!(
            crate::base::flagtable::Flags::default().exited_retention_min,
            DEFAULT_MINUTES as i64
        );
        let r = Retention::from_minutes(DEFAULT_MINUTES);
        assert_eq!(r.reference, Duration::from_secs(15 * 60));
        assert_eq!(r.setting, Duration::from_secs(24 * 3600));
        assert_eq!(r.period(), Duration::from_secs(60));
    }

    /// Processes that exited, with their logs on disk under `dir`.
    async fn exited(dir: &std::path::Path, ids: &[&str]) -> (ProcessManager, Shutdown) {
        let stop = Shutdown::new();
        let store = store::StoreConfig {
            dir: Some(dir.to_path_buf()),
            ..Default::default()
        };
        let processes = ProcessManager::new(Supervision {
            replay: store::ReplayStore::open(store, Arc::default()),
            metrics: Arc::default(),
            shutdown: stop.subscribe(),
            retention: Retention::from_minutes(DEFAULT_MINUTES),
            kill_grace_cap: super::super::registry::MAX_KILL_GRACE,
            activity: Default::default(),
        });
        let args = ["x".to_string()];
        for id in ids {
            let spec = SpawnSpec {
                id,
                command: "echo",
                args: &args,
                cwd: "",
                env: &[],
                no_agent_socket: true,
                launcher: None,
                strip_env: &[],
            };
            let p = processes.spawn(&spec).await.unwrap();
            // Exited, and its output on disk.
            while p.finished_at.get().is_none() || p.log.footprint().1 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        (processes, stop)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_reference_only_whole_logs_stay_and_at_most_cap_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let (processes, _stop) = exited(dir.path(), &["a", "b", "c", "d"]).await;
        let now = Instant::now();
        let mut retention = Retention {
            reference: Duration::from_secs(3600),
            setting: Duration::from_secs(7200),
            cap: 2,
        };
        // Within the reference's time nothing goes, cap or not.
        assert_eq!(drop_exited(&processes.table, &retention, now), Dropped::default());
        retention.reference = Duration::ZERO;
        let dropped = drop_exited(&processes.table, &retention, now);
        assert_eq!(
            dropped,
            Dropped {
                by_age: 0,
                by_log: 0,
                by_cap: 2
            }
        );
        // The oldest exits went.
        assert!(processes.get("a").is_none() && processes.get("b").is_none());
        assert!(processes.get("c").is_some() && processes.get("d").is_some());
        // A log that lost frames goes at the reference's time.
        processes.get("c").unwrap().log.evict_whole_for_test();
        let dropped = drop_exited(&processes.table, &retention, now);
        assert_eq!(
            dropped,
            Dropped {
                by_age: 0,
                by_log: 1,
                by_cap: 0
            }
        );
        assert!(processes.get("c").is_none() && processes.get("d").is_some());
        // The setting ends the rest.
        let later = now + Duration::from_secs(7200);
        let dropped = drop_exited(&processes.table, &retention, later);
        assert_eq!(
            dropped,
            Dropped {
                by_age: 1,
                by_log: 0,
                by_cap: 0
            }
        );
    }
}
