//! How many log lines connections without the token may cost (audit D9).
//!
//! Every connection logs `[Server] New connection from: @` when it opens
//! and `[Server] Connection closed` when it ends, as the reference does.
//! A same-uid process that only connects and closes made the log grow by
//! 2–3 MB/s, and wiped the capped `remote-server.log` in seconds. So the
//! opening lines go through a token bucket ([`BURST`] at once, then one
//! per [`REFILL`]):
//!
//! * a connection that gets a token logs as before, whatever it does;
//! * one that does not stays unlogged until it sends a request with the
//!   token: then its opening line is written (late) and it logs like any
//!   other from there on, so the owner's connections are always in the
//!   log;
//! * one that ends without ever authenticating is only counted, by how it
//!   ended ([`Ended`]: the warnings it would have logged), and the counts
//!   are written as one summary line at most every [`SUMMARY_EVERY`] and
//!   at shutdown; its `Unauthorized request` warnings are not logged.
//!
//! A churn of connections without the token thus costs at most
//! `BURST` pairs, then a pair per `REFILL`, plus a summary line a minute.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Opening lines that may be written at once.
pub(crate) const BURST: u32 = 20;
/// One more opening line may be written per this much time.
pub(crate) const REFILL: Duration = Duration::from_secs(2);
/// How often the summary of unlogged connections is written.
pub(crate) const SUMMARY_EVERY: Duration = Duration::from_secs(60);

struct Bucket {
    tokens: u32,
    /// When the last token was added (or the bucket made).
    refilled: Instant,
}

/// Why an unlogged connection ended (the summary counts each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The client closed it (or the daemon stopped).
    Closed,
    /// No request with the token within the grace.
    Grace,
    /// Evicted at the connection cap.
    Evicted,
    /// Its partial line passed the shared budget.
    OverBudget,
    /// A line over 1 MiB.
    TooLong,
    /// Its reply queue filled: it does not read what it is sent.
    NotReading,
    /// Its next reply passed the shared budget of unwritten replies.
    OverReplyBudget,
}

impl Ended {
    const ALL: [Ended; 7] = [
        Ended::Closed,
        Ended::Grace,
        Ended::Evicted,
        Ended::OverBudget,
        Ended::TooLong,
        Ended::NotReading,
        Ended::OverReplyBudget,
    ];

    fn words(self) -> &'static str {
        match self {
            Ended::Closed => "closed by the client",
            Ended::Grace => "closed at the end of the grace",
            Ended::Evicted => "evicted at the connection limit",
            Ended::OverBudget => "closed over the partial-line budget",
            Ended::TooLong => "closed for a line over 1 MiB",
            Ended::NotReading => "closed for not reading their replies",
            Ended::OverReplyBudget => "closed over the unread-reply budget",
        }
    }
}

/// The daemon-wide budget of connection lines.
pub(crate) struct ConnLog {
    bucket: Mutex<Bucket>,
    /// Connections that ended without the token and unlogged since the
    /// last summary, by [`Ended`] (in `Ended::ALL` order).
    unlogged: [AtomicU64; 7],
}

impl Default for ConnLog {
    fn default() -> Self {
        ConnLog {
            bucket: Mutex::new(Bucket {
                tokens: BURST,
                refilled: Instant::now(),
            }),
            unlogged: Default::default(),
        }
    }
}

impl ConnLog {
    /// A connection opened: whether its lines are logged from the start.
    pub(crate) fn admit(&self) -> bool {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let earned = b.refilled.elapsed().as_nanos() / REFILL.as_nanos().max(1);
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            b.tokens = b.tokens.saturating_add(earned).min(BURST);
            b.refilled = if b.tokens == BURST {
                Instant::now()
            } else {
                b.refilled + REFILL * earned
            };
        }
        if b.tokens == 0 {
            return false;
        }
        b.tokens -= 1;
        true
    }

    /// A connection without a line in the log ended without the token.
    pub(crate) fn count_unlogged(&self, why: Ended) {
        if let Some(at) = Ended::ALL.iter().position(|e| *e == why) {
            self.unlogged[at].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes the summary line if any connection went unlogged since the
    /// last one.
    pub(crate) fn summarize(&self) {
        let counts: Vec<(Ended, u64)> = Ended::ALL
            .iter()
            .zip(&self.unlogged)
            .map(|(why, n)| (*why, n.swap(0, Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return;
        }
        let parts: Vec<String> = counts.iter().map(|(why, n)| format!("{n} {}", why.words())).collect();
        crate::log_warn!(
            "[Server] {total} connection(s) without the token opened and ended unlogged: {} (at most {BURST} are logged at once, then one every {}s)",
            parts.join(", "),
            REFILL.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_nothing_until_the_bucket_refills() {
        let log = ConnLog::default();
        for _ in 0..BURST {
            assert!(log.admit());
        }
        assert!(!log.admit());
        assert!(!log.admit());
        // As if a refill period had passed.
        log.bucket.lock().unwrap().refilled -= REFILL;
        assert!(log.admit());
        assert!(!log.admit());
        log.count_unlogged(Ended::Closed);
        log.count_unlogged(Ended::Evicted);
        log.count_unlogged(Ended::Evicted);
        let total = |l: &ConnLog| l.unlogged.iter().map(|n| n.load(Ordering::Relaxed)).sum::<u64>();
        assert_eq!(total(&log), 3);
        log.summarize();
        assert_eq!(total(&log), 0);
    }
}
