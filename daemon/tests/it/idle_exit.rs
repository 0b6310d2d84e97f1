//! `idle-exit-min`: a daemon with no client and nothing in its process
//! table for that long stops by itself, gracefully and with one log line,
//! and not while a client is connected or a process lives or is kept.
//! Fractions of a minute keep the tests short (0.01 min = 0.6 s).

use crate::common::{recorded_daemon, wait_until, TestDaemon};
use std::time::Duration;

/// How long a test watches a daemon that must stay: several idle periods.
const STAYS_FOR: Duration = Duration::from_millis(2500);
/// How long a daemon that must go may take.
const GOES_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn an_idle_daemon_stops_by_itself() {
    let d = TestDaemon::start_with(&["-idle-exit-min", "0.01"], &[]);
    let daemon = recorded_daemon(&d.socket).expect("daemon");
    assert!(wait_until(GOES_WITHIN, || daemon.gone()), "{}", d.log());
    let log = d.log();
    assert!(
        log.contains(
            "Idle for 0.01 min (no client connected, no process running or kept): shutting down (idle-exit-min)"
        ),
        "{log}"
    );
    // The graceful path: the socket is removed and the shutdown completes.
    assert!(log.contains("[Server] Shutdown complete"), "{log}");
    assert!(!d.socket.exists());
}

#[test]
fn it_is_off_by_default() {
    let d = TestDaemon::start();
    let daemon = recorded_daemon(&d.socket).expect("daemon");
    assert!(!wait_until(STAYS_FOR, || daemon.gone()));
    assert!(d.log().contains("idle-exit-min=0 (default)"), "{}", d.log());
}

#[test]
fn a_connected_client_keeps_it() {
    let d = TestDaemon::start_with(&["-idle-exit-min", "0.005"], &[]);
    let daemon = recorded_daemon(&d.socket).expect("daemon");
    let mut client = d.connect();
    assert!(client.call(1, "server.ping", "{}").contains("pong"));
    assert!(!wait_until(STAYS_FOR, || daemon.gone()), "{}", d.log());
    drop(client);
    assert!(wait_until(GOES_WITHIN, || daemon.gone()), "{}", d.log());
}

#[test]
fn a_live_or_kept_process_keeps_it() {
    // Retention 0: an exited process is dropped at the next sweep, which
    // then restarts the idle clock.
    let d = TestDaemon::start_with(&["-idle-exit-min", "0.005", "-exited-retention-min", "0"], &[]);
    let daemon = recorded_daemon(&d.socket).expect("daemon");
    let mut client = d.connect();
    let spawned = client.call(1, "process.spawn", r#"{"id":"s","command":"sleep","args":["30"]}"#);
    assert!(spawned.contains("\"result\""), "{spawned}");
    drop(client);
    assert!(!wait_until(STAYS_FOR, || daemon.gone()), "{}", d.log());
    let mut client = d.connect();
    assert!(client
        .call(2, "process.kill", r#"{"id":"s","signal":"KILL"}"#)
        .contains("\"result\""));
    drop(client);
    assert!(wait_until(GOES_WITHIN, || daemon.gone()), "{}", d.log());
    assert!(d.log().contains("Dropped 1 exited process(es)"), "{}", d.log());
}

#[test]
fn a_kept_process_holds_it_for_its_retention() {
    // Default retention: the exited process stays answerable, so the
    // daemon stays with it.
    let d = TestDaemon::start_with(&["-idle-exit-min", "0.005"], &[]);
    let daemon = recorded_daemon(&d.socket).expect("daemon");
    let mut client = d.connect();
    let spawned = client.call(1, "process.spawn", r#"{"id":"e","command":"true"}"#);
    assert!(spawned.contains("\"result\""), "{spawned}");
    drop(client);
    assert!(!wait_until(STAYS_FOR, || daemon.gone()), "{}", d.log());
}
