//! Agent CLI sessions: a `process.spawn` whose
//! arguments name a stream-json CLI session supersedes — terminates, by
//! the kill path a client would use — every other running process of the
//! same session, so two CLIs never write one session at once.
//!
//! This module owns the session key (what in the arguments names a
//! session) and the per-key lock that serializes spawns of one session;
//! [`super::ProcessManager::spawn`] runs the supersede under that lock
//! before it forks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The arguments that mark a stream-json CLI. `--output-format
/// stream-json` as two arguments matches through its bare value.
const STREAM_JSON_MARKERS: [&str; 3] = [
    "--input-format=stream-json",
    "--output-format=stream-json",
    "stream-json",
];

/// The session a spawn's arguments name, if they name one:
///
/// * only a stream-json CLI has sessions: some argument must be one of
///   [`STREAM_JSON_MARKERS`];
/// * `--session-id <v>` / `--session-id=<v>` names session `v`;
/// * without it, `--resume <v>` / `--resume=<v>` names session `v`, unless
///   `--fork-session` is present (a fork starts a new session, so the
///   resumed one is left alone);
/// * a value is valid when it is non-empty and does not start with `-`
///   (`--resume --verbose` names nothing). The first occurrence counts.
pub(crate) fn key_of(args: &[String]) -> Option<String> {
    if !args.iter().any(|a| STREAM_JSON_MARKERS.contains(&a.as_str())) {
        return None;
    }
    if let Some(id) = flag_value(args, "--session-id") {
        return Some(id);
    }
    if args.iter().any(|a| a == "--fork-session") {
        return None;
    }
    flag_value(args, "--resume")
}

/// The value of the first `flag` occurrence, as `flag v` or `flag=v`,
/// when it is valid.
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == flag {
            iter.next().map(String::as_str)
        } else if let Some(v) = arg.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            Some(v)
        } else {
            continue;
        };
        return value
            .filter(|v| !v.is_empty() && !v.starts_with('-'))
            .map(str::to_string);
    }
    None
}

/// One async lock per live session key, so concurrent spawns of one
/// session supersede one after the other. An entry lives only while a
/// spawn holds or waits for it: at most one per in-flight spawn.
#[derive(Default)]
pub(crate) struct SessionLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holds a session's lock; dropping it releases the lock and forgets the
/// key once nobody else waits for it.
pub(crate) struct SessionGuard<'a> {
    owner: &'a SessionLocks,
    key: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl SessionLocks {
    pub(crate) async fn lock(&self, key: &str) -> SessionGuard<'_> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(key.to_string()).or_default().clone()
        };
        let held = lock.clone().lock_owned().await;
        SessionGuard {
            owner: self,
            key: key.to_string(),
            lock,
            held: Some(held),
        }
    }
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        // Release first: the guard holds a reference of its own.
        self.held = None;
        let mut locks = self.owner.locks.lock().unwrap_or_else(|p| p.into_inner());
        // The map's reference and ours: nobody else holds or waits.
        if Arc::strong_count(&self.lock) == 2 {
            locks.remove(&self.key);
            if locks.capacity() > 2 * locks.len() + 64 {
                locks.shrink_to_fit();
            }
        }
    }
}

#[cfg(test)]
impl SessionLocks {
    /// Number of keys with a holder or waiter (for tests).
    pub(crate) fn len(&self) -> usize {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(args: &[&str]) -> Option<String> {
        key_of(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn session_keys() {
        let sj = "--output-format=stream-json";
        assert_eq!(key(&[sj, "--session-id", "s1"]), Some("s1".into()));
        assert_eq!(key(&[sj, "--session-id=s1"]), Some("s1".into()));
        assert_eq!(
            key(&["--input-format=stream-json", "--resume", "r1"]),
            Some("r1".into())
        );
        assert_eq!(
            key(&["--output-format", "stream-json", "--resume=r1"]),
            Some("r1".into())
        );
        // --session-id wins over --resume, even with --fork-session.
        assert_eq!(
            key(&[sj, "--resume", "r1", "--fork-session", "--session-id", "s1"]),
            Some("s1".into())
        );
        assert_eq!(key(&[sj, "--resume", "r1", "--fork-session"]), None);
        // Not a stream-json CLI, or no valid session value.
        assert_eq!(key(&["--session-id", "s1"]), None);
        assert_eq!(key(&["--output-format=json", "--session-id", "s1"]), None);
        assert_eq!(key(&[sj]), None);
        assert_eq!(key(&[sj, "--session-id"]), None);
        assert_eq!(key(&[sj, "--session-id="]), None);
        assert_eq!(key(&[sj, "--resume", "--verbose"]), None);
        assert_eq!(key(&[sj, "--session-idx", "s1"]), None);
        // The first occurrence counts.
        assert_eq!(key(&[sj, "--session-id", "a", "--session-id", "b"]), Some("a".into()));
        assert_eq!(key(&[sj, "--session-id", "-x", "--session-id", "b"]), None);
    }

    #[tokio::test]
    async fn locks_serialize_one_key_and_are_forgotten() {
        let locks = SessionLocks::default();
        let a = locks.lock("k").await;
        let other = locks.lock("other").await;
        assert_eq!(locks.len(), 2);
        drop(other);
        assert_eq!(locks.len(), 1);
        let waiter = locks.lock("k");
        tokio::pin!(waiter);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(30), &mut waiter)
                .await
                .is_err(),
            "a second spawn of the session waits"
        );
        drop(a);
        let b = waiter.await;
        drop(b);
        assert!(locks.is_empty());
    }
}
