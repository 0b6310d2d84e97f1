//! Scenario "fresh-clients-under-flood" (audit N6): same-uid processes
//! without the token open connections as fast as they can, and a client
//! that connects afresh and pings with the token at once must still be
//! served. The eviction at the connection cap used to take the oldest
//! connection without the token, which could be that new client before
//! its first line was read: 15–30% of fresh pings failed under 1–4
//! flooders at nofile 1024.
//!
//! The daemon runs at nofile 1024 (connection cap 768). Four `stress-client
//! --mode flood` processes connect 1 ms apart each, holding up to 2000
//! connections. Once the table is full, this process pings N times (100 ×
//! scale, at least 30), each on a new connection whose first line follows
//! its connect by 300 ms (an SSH hop's worth), with a 10 s bound from
//! connect to reply. Invariants: the flood fills the
//! table (768 daemon descriptors); the daemon lives; at least 99% of the
//! fresh pings are answered. Figures: that share, the fresh ping's
//! p50/p99 (connect to reply), the round's duration.

use super::daemon::Daemon;
use super::streams::spawn_client;
use super::wire::Client;
use super::Error;
use super::{Ctx, Obs};
use crate::base::stats::percentile;
use std::path::Path;
use std::time::{Duration, Instant};

/// The daemon's descriptor limit here (soft and hard).
const DAEMON_FD_LIMIT: u64 = 1024;
/// remora's connection cap at that limit (`serve/admission.rs`).
const CONNECTION_CAP: u64 = 768;
/// Flooding processes.
const FLOODERS: usize = 4;
/// Connections each flooder holds at most.
const HOLD: &str = "2000";
/// The pause between two connects of one flooder: four of them make up
/// to 4000 connections a second, a flood a release build accepts as it
/// comes, so the listen backlog stays short and a fresh client is
/// accepted at once. (Behind a full backlog its first line would be in
/// before its turn came, and any eviction rule would look fine.)
const PACE_US: &str = "1000";
/// The share of fresh pings that must be answered.
const PASS_SHARE: f64 = 0.99;
/// The pause between a fresh client's connect and its first line.
const FIRST_LINE_AFTER: Duration = Duration::from_millis(300);
/// How long one fresh ping may take, connect to reply.
const PING_BOUND: Duration = Duration::from_secs(10);

/// One fresh client: connect, send its first request [`FIRST_LINE_AFTER`]
/// later (the way through an SSH hop), read the reply. The time is from
/// the connect to the reply.
fn fresh_ping(socket: &Path) -> Result<Duration, Error> {
    let t = Instant::now();
    let mut c = Client::connect(socket)?;
    c.set_timeout(PING_BOUND);
    std::thread::sleep(FIRST_LINE_AFTER);
    c.call("1", "server.ping", "{}")?;
    Ok(t.elapsed())
}

/// The scenario.
pub fn fresh_clients_under_flood(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let mut d = Daemon::start_with_fd_limit(bin, DAEMON_FD_LIMIT)?;
    let socket = d.socket.clone();
    for _ in 0..FLOODERS {
        spawn_client(
            ctx,
            &socket,
            &["--mode", "flood", "--hold", HOLD, "--pace-us", PACE_US],
            |c| d.clients.push(c),
        )?;
    }
    // The pings start once the flood holds the table full: the daemon's
    // descriptors reach its connection cap (for remora; a binary without
    // one reaches its limit).
    let full = Daemon::wait_for(Duration::from_secs(20), || d.fds() >= CONNECTION_CAP);
    o.check(
        "the flood fills the connection table",
        full,
        format!("{} descriptors", d.fds()),
    );
    let tries = ctx.n(100, 30) as usize;
    let t = Instant::now();
    let mut latencies = Vec::with_capacity(tries);
    let mut failures: Vec<String> = Vec::new();
    for _ in 0..tries {
        match fresh_ping(&socket) {
            Ok(took) if took <= PING_BOUND => latencies.push(took.as_secs_f64() * 1e3),
            Ok(took) => failures.push(format!("answered after {} ms", took.as_millis())),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let took = t.elapsed();
    o.check_alive(&d);
    let share = latencies.len() as f64 / tries as f64;
    o.check(
        "at least 99% of fresh pings are answered under the flood",
        share >= PASS_SHARE,
        format!(
            "{} of {tries} answered within {} s{}",
            latencies.len(),
            PING_BOUND.as_secs(),
            failures
                .first()
                .map(|f| format!("; first failure: {f}"))
                .unwrap_or_default()
        ),
    );
    o.figure("fresh pings answered", "%", true, share * 100.0);
    o.figure("fresh ping p50 under flood", "ms", false, percentile(&latencies, 0.5));
    o.figure("fresh ping p99 under flood", "ms", false, percentile(&latencies, 0.99));
    o.figure("fresh-ping round", "ms", false, took.as_secs_f64() * 1e3);
    Ok(())
}
