//! The logs one connection follows, as its writer sees them: a cursor and
//! a pending reply per log, the connection's ready list, and the pass that
//! moves frames from woken logs into the writer's output.
//!
//! **Rule: a pass costs what moved, not what is followed.** The writer
//! visits only logs on its ready list ([`crate::replay::ready`]): woken by
//! an append, an exit or a detach, newly followed, or carried over from a
//! pass that stopped before their frames ran out. A connection following
//! 10 000 idle processes pays nothing for them when one of them prints,
//! and spawning then killing N of them costs O(N), not O(N²).
//!
//! Fairness: a pass takes at most [`FRAME_BUDGET`] raw bytes. Logs the
//! pass did not reach go first next time, then logs woken meanwhile, then
//! the logs it cut short, so one child writing faster than the client
//! reads never starves a later spawn's reply and frames.

use crate::methods::Follow;
use crate::replay::cursor::Cursor;
use crate::replay::followers::Handoff;
use crate::replay::ready::{ReadyList, ReadyWake};
use std::collections::HashMap;
use std::sync::Arc;

/// Raw stream bytes the writer takes per pass before it checks for replies.
const FRAME_BUDGET: usize = 256 * 1024;

/// One followed log.
struct Followed {
    cursor: Cursor,
    /// Puts this log on the connection's ready list; held so the writer can
    /// take it off ([`ReadyWake::take`]) and carry it over itself.
    wake: ReadyWake,
    /// The request's reply line, written once frames up to seq
    /// `reply_after` are out ([`Follow::reply_after`]); `None` once sent.
    reply: Option<Vec<u8>>,
    reply_after: u64,
}

/// Every log one connection follows.
pub(crate) struct Following {
    conn_id: u64,
    handoff: Handoff,
    ready: Arc<ReadyList>,
    logs: HashMap<u64, Followed>,
    /// Keys to visit in this pass, in order (kept between passes: its
    /// front is what the last pass did not reach).
    visit: Vec<u64>,
    /// Keys a pass cut short: visited again after everything else.
    carried: Vec<u64>,
    /// Logs the last pass read (what the tests check passes cost).
    #[cfg(test)]
    last_visits: usize,
}

impl Following {
    pub(crate) fn new(conn_id: u64, handoff: Handoff) -> Following {
        Following {
            conn_id,
            handoff,
            ready: ReadyList::new(),
            logs: HashMap::new(),
            visit: Vec::new(),
            carried: Vec::new(),
            #[cfg(test)]
            last_visits: 0,
        }
    }

    /// Resolves once a followed log was woken (or newly followed) since
    /// the last pass.
    pub(crate) async fn woken(&self) {
        self.ready.notified().await;
    }

    /// Whether a pass has work it knows of without a new wake.
    pub(crate) fn has_pending(&self) -> bool {
        !self.visit.is_empty() || !self.carried.is_empty()
    }

    /// Starts (or restarts) streaming `follow.log` to this connection, with
    /// `line` as the reply written at its place in the stream. A log whose
    /// process id was reused meanwhile delivers nothing: the reply goes
    /// out at once.
    pub(crate) fn follow(&mut self, follow: Follow, line: Vec<u8>, out: &mut Vec<u8>) {
        let Follow {
            log,
            after,
            reply_after,
        } = follow;
        let key = log.key();
        let wake = match self.logs.get(&key) {
            Some(followed) => followed.wake.clone(),
            None => ReadyWake::new(&self.ready, key),
        };
        // The process streams to this connection only from now on; any
        // other that followed it is closed (reattach transfers).
        if !log.follow_exclusively(self.conn_id, wake.clone(), self.handoff.clone()) {
            out.extend_from_slice(&line);
            return;
        }
        match self.logs.get_mut(&key) {
            Some(followed) => {
                // Replace any reply still waiting: it is written now, in
                // order, before the new replay starts.
                if let Some(pending) = followed.reply.take() {
                    out.extend_from_slice(&pending);
                }
                followed.cursor.restart(after);
                followed.reply = Some(line);
                followed.reply_after = reply_after;
            }
            None => {
                self.logs.insert(
                    key,
                    Followed {
                        cursor: Cursor::new(log, after),
                        wake: wake.clone(),
                        reply: Some(line),
                        reply_after,
                    },
                );
            }
        }
        // Frames already in the log (a reattach's replay) and the reply
        // need a visit that no append may ever trigger.
        wake.wake();
    }

    /// Moves frames from woken logs into `out`, one [`Cursor::fill`] per
    /// log (RAM, or a disk batch only this connection waits for), within
    /// [`FRAME_BUDGET`]. Returns true if a disk read came back empty (its
    /// segment was evicted): the cursor relocates on the next pass, which
    /// the caller should run without waiting.
    pub(crate) async fn pull_frames(&mut self, out: &mut Vec<u8>) -> bool {
        self.ready.drain_into(&mut self.visit);
        self.visit.append(&mut self.carried);
        let mut budget = FRAME_BUDGET;
        let mut behind = false;
        let mut visited = 0;
        #[cfg(test)]
        {
            self.last_visits = 0;
        }
        while visited < self.visit.len() && budget > 0 {
            let key = self.visit[visited];
            visited += 1;
            let Some(followed) = self.logs.get_mut(&key) else {
                continue;
            };
            // Off the ready list before reading: an append from here on
            // queues the log again.
            followed.wake.take();
            #[cfg(test)]
            {
                self.last_visits += 1;
            }
            // A cut (another connection reattached the process) caps what
            // this connection may still deliver.
            let cut = followed.cursor.log().limit_for(self.conn_id);
            let waiting = followed.reply.is_some();
            let upto = if waiting { followed.reply_after } else { u64::MAX }.min(cut);
            let before = out.len();
            let empty_read = followed.cursor.fill(upto, out, budget).await;
            behind |= empty_read;
            budget = budget.saturating_sub(out.len() - before);
            if waiting && (followed.cursor.position() >= followed.reply_after || followed.cursor.log().is_detached()) {
                if let Some(line) = followed.reply.take() {
                    out.extend_from_slice(&line);
                }
            }
            if followed.cursor.is_finished() && followed.reply.is_none() {
                // Detached, or exited and fully written: forget it.
                followed.cursor.log().unsubscribe(self.conn_id);
                self.logs.remove(&key);
                continue;
            }
            let upto = if followed.reply.is_some() {
                followed.reply_after
            } else {
                u64::MAX
            }
            .min(cut);
            // Still owed frames that were appended before the visit: no
            // wake will come for them, so the writer carries the log over
            // itself (unless a wake queued it meanwhile).
            if (empty_read || followed.cursor.has_more(upto)) && followed.wake.claim() {
                self.carried.push(key);
            }
        }
        self.visit.drain(..visited);
        behind
    }

    /// Stops following every log (the connection is closing).
    pub(crate) fn unsubscribe_all(&mut self) {
        for followed in self.logs.values() {
            followed.cursor.log().unsubscribe(self.conn_id);
        }
        self.logs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::followers::HandoffSlot;
    use crate::replay::frame::{ExitFrame, Stream};
    use crate::replay::log::ReplayLog;
    use crate::replay::store::ReplayStore;

    fn following() -> Following {
        Following::new(1, HandoffSlot::new("connection 1".to_string()))
    }

    /// Follows `n` fresh logs (spawn-style: reply before any frame) and
    /// writes their replies.
    async fn follow_fresh(following: &mut Following, n: usize) -> Vec<Arc<ReplayLog>> {
        let store = ReplayStore::in_memory();
        let logs: Vec<_> = (0..n).map(|i| ReplayLog::new(&format!("p{i}"), &store)).collect();
        let mut out = Vec::new();
        for log in &logs {
            let follow = Follow {
                log: log.clone(),
                after: 0,
                reply_after: 0,
            };
            following.follow(follow, b"reply\n".to_vec(), &mut out);
        }
        while following.has_pending() || out.is_empty() {
            following.pull_frames(&mut out).await;
        }
        assert_eq!(out, b"reply\n".repeat(n), "every reply, once");
        logs
    }

    #[tokio::test]
    async fn a_pass_reads_only_the_logs_that_moved() {
        let mut following = following();
        let logs = follow_fresh(&mut following, 1000).await;
        let mut out = Vec::new();
        following.pull_frames(&mut out).await;
        assert_eq!(following.last_visits, 0, "nothing moved: nothing read");
        logs[500].push_output(Stream::Stdout, b"hi");
        logs[7].push_output(Stream::Stdout, b"there");
        logs[500].push_output(Stream::Stdout, b"again");
        following.pull_frames(&mut out).await;
        assert_eq!(following.last_visits, 2, "two logs moved, each read once");
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!following.has_pending());
    }

    #[tokio::test]
    async fn exited_logs_are_forgotten_after_their_exit_frame() {
        let mut following = following();
        let logs = follow_fresh(&mut following, 100).await;
        for log in &logs {
            log.push_exit(ExitFrame::code(0));
        }
        let mut out = Vec::new();
        following.pull_frames(&mut out).await;
        assert_eq!(following.last_visits, 100);
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 100);
        assert!(following.logs.is_empty(), "every finished log forgotten");
        assert!(logs.iter().all(|log| log.follower_count() == 0));
    }

    #[tokio::test]
    async fn a_log_cut_short_by_the_budget_is_carried_over_after_the_others() {
        let mut following = following();
        let logs = follow_fresh(&mut following, 2).await;
        // More than one pass's budget from the first log, then one frame
        // from the second.
        let chunk = vec![b'x'; 32 * 1024];
        let frames = FRAME_BUDGET / chunk.len() * 3;
        for _ in 0..frames {
            logs[0].push_output(Stream::Stdout, &chunk);
        }
        logs[1].push_output(Stream::Stdout, b"late");
        let mut out = Vec::new();
        following.pull_frames(&mut out).await;
        assert!(following.has_pending(), "the first log still owes frames");
        let first_pass = out.len();
        // No new wake: the carried log is read again until it is done.
        let mut passes = 1;
        while following.has_pending() {
            following.pull_frames(&mut out).await;
            passes += 1;
            assert!(passes < 100, "no progress");
        }
        assert!(passes >= 3, "{passes} passes for 3 budgets' worth");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), frames + 1);
        let late = text
            .lines()
            .position(|l| l.contains("bGF0ZQ"))
            .expect("the second log's frame");
        assert!(
            late < frames,
            "the second log waited for the first to drain (at {late} of {})",
            frames + 1
        );
        assert!(first_pass > 0);
    }
}
