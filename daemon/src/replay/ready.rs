//! One connection's ready list: which of the logs it follows have
//! something new (a frame, an exit, a detach) since it last looked.
//!
//! A log wakes its followers on every append ([`super::followers`]). Waking
//! only a connection's writer made it walk every log it follows to find
//! the one that moved, so a connection following N processes paid O(N)
//! per frame, and N² to spawn and kill N of them. With a ready list the
//! writer visits only the logs that were woken.
//!
//! Each follow registration holds a [`ReadyWake`]: the connection's list,
//! the log's key and one flag saying "this key is already queued". A wake
//! queues the key only when the flag was clear, so a log that appends a
//! million frames before the writer looks is queued once. The writer
//! clears the flag *before* it reads the log ([`ReadyWake::take`] order in
//! `serve/connection.rs`): a frame appended after the clear queues the key
//! again, and one appended before it is seen by the read, so no frame is
//! left waiting for a wake that already happened.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The keys of one connection's followed logs that were woken, and the
/// signal its writer waits on.
#[derive(Default)]
pub(crate) struct ReadyList {
    queue: Mutex<Vec<u64>>,
    notify: Notify,
}

impl ReadyList {
    pub(crate) fn new() -> Arc<ReadyList> {
        Arc::new(ReadyList::default())
    }

    /// Resolves once a key was queued since the last wait (a queued key
    /// before the wait started counts: `Notify` keeps one permit).
    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }

    /// Moves every queued key into `into` (appended in wake order) and
    /// leaves the list empty. Both vectors keep their capacity, so a
    /// steady stream allocates nothing here.
    pub(crate) fn drain_into(&self, into: &mut Vec<u64>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        into.append(&mut queue);
    }

    fn push(&self, key: u64) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push(key);
        self.notify.notify_one();
    }
}

/// How a log wakes one follower: its connection's [`ReadyList`], the
/// log's key there, and whether that key is queued already.
#[derive(Clone)]
pub(crate) struct ReadyWake {
    list: Arc<ReadyList>,
    key: u64,
    queued: Arc<AtomicBool>,
}

impl ReadyWake {
    /// The wake for log `key` on `list`, not queued yet.
    pub(crate) fn new(list: &Arc<ReadyList>, key: u64) -> ReadyWake {
        ReadyWake {
            list: list.clone(),
            key,
            queued: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Queues the log's key unless it is queued already.
    pub(crate) fn wake(&self) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.list.push(self.key);
        }
    }

    /// Marks the key as no longer queued: called by the writer just
    /// before it reads the log, so a later append queues it again.
    pub(crate) fn take(&self) {
        self.queued.store(false, Ordering::Release);
    }

    /// Marks the key as queued without putting it on the list, for a
    /// writer that queues it itself (a log it must visit again). False if
    /// it was queued already, by a wake since [`ReadyWake::take`].
    pub(crate) fn claim(&self) -> bool {
        !self.queued.swap(true, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_woken_many_times_is_queued_once_until_taken() {
        let list = ReadyList::new();
        let a = ReadyWake::new(&list, 1);
        let b = ReadyWake::new(&list, 2);
        for _ in 0..1000 {
            a.wake();
        }
        b.wake();
        let mut keys = Vec::new();
        list.drain_into(&mut keys);
        assert_eq!(keys, [1, 2]);
        a.wake();
        list.drain_into(&mut keys);
        assert_eq!(keys, [1, 2], "still queued: not taken yet");
        a.take();
        a.wake();
        list.drain_into(&mut keys);
        assert_eq!(keys, [1, 2, 1]);
        // Claimed by the writer: a wake does not queue it twice.
        a.take();
        assert!(a.claim());
        a.wake();
        assert!(!a.claim(), "claimed already");
        list.drain_into(&mut keys);
        assert_eq!(keys, [1, 2, 1]);
    }

    #[tokio::test]
    async fn a_wake_before_the_wait_is_not_lost() {
        let list = ReadyList::new();
        ReadyWake::new(&list, 7).wake();
        // Would hang if the permit were lost.
        list.notified().await;
        let mut keys = Vec::new();
        list.drain_into(&mut keys);
        assert_eq!(keys, [7]);
    }
}
