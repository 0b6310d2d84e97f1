//! Who follows one replay log: the followers a new frame wakes, how far
//! each may still deliver, and the hand-over of a process from one
//! connection to another.
//!
//! A log holds its [`Followers`] under the same lock as its frames
//! ([`super::log`]), so cutting the followers at the newest frame and
//! appending the next one never interleave: a replaced follower never sees
//! a frame past the seq it was cut at. Nothing here reads frames.

use super::ready::ReadyWake;
use std::sync::Arc;

/// Tells a connection that another connection reattached a process it
/// followed (reference `90fca6e6`: the replaced connection is closed).
pub(crate) type Handoff = Arc<HandoffSlot>;

/// One connection's [`Handoff`].
pub(crate) struct HandoffSlot {
    /// The connection as log lines name it.
    pub name: String,
    /// Set once another connection took over a process this one followed.
    pub replaced: tokio::sync::watch::Sender<Option<Replaced>>,
}

impl HandoffSlot {
    pub(crate) fn new(name: String) -> Handoff {
        Arc::new(HandoffSlot {
            name,
            replaced: tokio::sync::watch::channel(None).0,
        })
    }
}

/// What took a process from a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replaced {
    /// The process's id.
    pub process: String,
    /// The [`HandoffSlot::name`] of the connection that reattached it.
    pub by: String,
}

/// One follower's registration: who to wake on new frames.
struct Follower {
    /// The id its owner picked (a connection's id).
    id: u64,
    /// Queues the log on the follower's ready list ([`super::ready`]).
    wake: ReadyWake,
    /// The newest seq this follower may still deliver: `u64::MAX` while
    /// it owns the stream, the reattach's `lastSeq` once another
    /// connection took the process over ([`Followers::cut_at`]).
    limit: u64,
    /// How to tell the follower's connection it was replaced.
    handoff: Option<Handoff>,
}

/// The followers of one log, and whether the log still delivers at all.
#[derive(Default)]
pub(crate) struct Followers {
    list: Vec<Follower>,
    /// Set when the process id was reused: no more delivery from this log.
    detached: bool,
}

impl Followers {
    /// Wakes every follower (a frame was appended): the log goes on each
    /// follower's ready list, once however many frames come before it
    /// looks.
    pub(crate) fn wake_all(&self) {
        for f in &self.list {
            f.wake.wake();
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn is_detached(&self) -> bool {
        self.detached
    }

    /// Registers `follower` to be woken on new frames, with no cut and no
    /// handoff. Returns false if the log was detached.
    /// (Connections use [`Followers::follow_exclusively`]; this plain
    /// registration is for the log's own tests.)
    #[cfg(test)]
    pub(crate) fn subscribe(&mut self, follower: u64, wake: ReadyWake) -> bool {
        if self.detached {
            return false;
        }
        if !self.list.iter().any(|f| f.id == follower) {
            self.list.push(Follower {
                id: follower,
                wake,
                limit: u64::MAX,
                handoff: None,
            });
        }
        true
    }

    /// Cuts every current follower at seq `last` (the newest frame): frames
    /// after it go only to the connection that reattached, which lifts its
    /// own cut when it follows ([`Followers::follow_exclusively`]).
    pub(crate) fn cut_at(&mut self, last: u64) {
        for f in &mut self.list {
            f.limit = f.limit.min(last);
        }
    }

    /// The newest seq `follower` may deliver (`u64::MAX`: no cut).
    pub(crate) fn limit_for(&self, follower: u64) -> u64 {
        self.list
            .iter()
            .find(|f| f.id == follower)
            .map_or(u64::MAX, |f| f.limit)
    }

    /// Makes `follower` the one connection the process `process_id` streams
    /// to: it is registered (or its cut lifted), and every other follower
    /// is told through its [`Handoff`] that it was replaced. Returns false
    /// if the log was detached.
    pub(crate) fn follow_exclusively(
        &mut self,
        follower: u64,
        wake: ReadyWake,
        handoff: Handoff,
        process_id: &str,
    ) -> bool {
        if self.detached {
            return false;
        }
        let taker = handoff.name.clone();
        match self.list.iter_mut().find(|f| f.id == follower) {
            Some(f) => {
                f.limit = u64::MAX;
                f.wake = wake;
                f.handoff = Some(handoff);
            }
            None => self.list.push(Follower {
                id: follower,
                wake,
                limit: u64::MAX,
                handoff: Some(handoff),
            }),
        }
        for f in self.list.iter().filter(|f| f.id != follower) {
            if let Some(h) = &f.handoff {
                h.replaced.send_if_modified(|replaced| {
                    if replaced.is_none() {
                        *replaced = Some(Replaced {
                            process: process_id.to_string(),
                            by: taker.clone(),
                        });
                        true
                    } else {
                        false
                    }
                });
            }
        }
        true
    }

    pub(crate) fn unsubscribe(&mut self, follower: u64) {
        self.list.retain(|f| f.id != follower);
    }

    /// Drops every follower, waking each so it sees the log is gone, and
    /// stops all further delivery.
    pub(crate) fn detach_all(&mut self) {
        self.detached = true;
        for f in self.list.drain(..) {
            f.wake.wake();
        }
    }

    /// Number of registered followers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::ready::ReadyList;

    fn a_wake() -> ReadyWake {
        ReadyWake::new(&ReadyList::new(), 1)
    }

    fn handoff() -> Handoff {
        HandoffSlot::new("connection 2".to_string())
    }

    #[test]
    fn a_cut_holds_until_the_follower_takes_the_stream_back() {
        let mut followers = Followers::default();
        let wake = a_wake();
        assert!(followers.follow_exclusively(1, wake.clone(), handoff(), "p"));
        assert_eq!(followers.limit_for(1), u64::MAX);
        followers.cut_at(5);
        followers.cut_at(9);
        assert_eq!(followers.limit_for(1), 5, "a later cut never raises the limit");
        assert_eq!(followers.limit_for(2), u64::MAX, "not a follower: no cut");
        assert!(followers.follow_exclusively(1, wake, handoff(), "p"));
        assert_eq!(followers.limit_for(1), u64::MAX);
        assert_eq!(followers.len(), 1);
    }

    #[test]
    fn following_exclusively_tells_the_others_once() {
        let mut followers = Followers::default();
        let first = handoff();
        let mut replaced = first.replaced.subscribe();
        assert!(followers.follow_exclusively(1, a_wake(), first.clone(), "p<1>"));
        assert!(!replaced.has_changed().unwrap());
        assert!(followers.follow_exclusively(2, a_wake(), handoff(), "p<1>"));
        let taken = |process: &str| {
            Some(Replaced {
                process: process.to_string(),
                by: "connection 2".to_string(),
            })
        };
        assert_eq!(*replaced.borrow_and_update(), taken("p<1>"));
        assert!(followers.follow_exclusively(3, a_wake(), handoff(), "other"));
        assert!(!replaced.has_changed().unwrap(), "the first replacement is kept");
        assert_eq!(*first.replaced.borrow(), taken("p<1>"));
    }

    #[test]
    fn a_detached_log_takes_no_followers() {
        let mut followers = Followers::default();
        let wake = a_wake();
        assert!(followers.subscribe(7, wake.clone()));
        followers.detach_all();
        assert!(followers.is_detached() && followers.is_empty());
        assert!(!followers.subscribe(8, wake.clone()));
        assert!(!followers.follow_exclusively(8, wake, handoff(), "p"));
        assert!(followers.is_empty());
    }
}
