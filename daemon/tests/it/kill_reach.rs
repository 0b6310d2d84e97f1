//! `process.kill` / `process.killAndWait` as the pinned builds do them,
//! against real children: the four signal names (case-sensitive, anything
//! else is SIGTERM), SIGKILL to the group and every other signal to the
//! direct child only, and the 30 s clamp on the grace (shortened here by
//! the test hook so the clamp shows without waiting).

use crate::common::frames::{frames_until_exit, next_line, parse_frame, stdout_of};
use crate::common::proven::Proc;
use crate::common::{wait_until, Client, TestDaemon};
use std::time::Duration;

/// Spawns `sh` that starts a background sleeper, prints its pid, and
/// waits; returns the sleeper, held while known alive (it sleeps 40 s).
fn spawn_with_sleeper(c: &mut Client, id: &str) -> Proc {
    let params = format!(r#"{{"id":"{id}","command":"sh","args":["-c","sleep 40 >/dev/null 2>&1 & echo $!; wait"]}}"#);
    let reply = c.call(1, "process.spawn", &params);
    assert!(reply.contains(r#""success":true"#), "{reply}");
    let mut out = Vec::new();
    while !out.ends_with(b"\n") {
        let (_, frame) = parse_frame(&next_line(c)).expect("frame");
        out.extend(stdout_of(&[frame]));
    }
    let pid = String::from_utf8(out).unwrap().trim().parse().unwrap();
    Proc::open(pid).expect("a hold on the sleeper")
}

#[test]
fn term_reaches_the_direct_child_only() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let sleeper = spawn_with_sleeper(&mut c, "p1");
    c.call(2, "process.kill", r#"{"id":"p1","signal":"TERM"}"#);
    let frames = frames_until_exit(&mut c, "p1");
    let exit = &frames.last().unwrap().raw;
    assert!(exit.contains(r#""signal":"SIGTERM""#), "{exit}");
    // The sleeper in the same group did not get the signal.
    assert!(!sleeper.gone(), "TERM reached the group");
    sleeper.signal(libc::SIGKILL);
}

#[test]
fn kill_reaches_the_whole_group() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let sleeper = spawn_with_sleeper(&mut c, "p1");
    c.call(2, "process.kill", r#"{"id":"p1","signal":"SIGKILL"}"#);
    frames_until_exit(&mut c, "p1");
    let gone = wait_until(Duration::from_secs(10), || sleeper.gone());
    if !gone {
        sleeper.signal(libc::SIGKILL);
    }
    assert!(gone, "SIGKILL did not reach the group");
}

#[test]
fn signal_names_are_case_sensitive_and_unknown_means_term() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    for (i, (name, want)) in [
        ("kill", "SIGTERM"),
        ("QUIT", "SIGTERM"),
        ("9", "SIGTERM"),
        ("HUP", "SIGHUP"),
        ("SIGINT", "SIGINT"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("s{i}");
        let reply = c.call(
            10 + i,
            "process.spawn",
            &format!(r#"{{"id":"{id}","command":"sleep","args":["30"]}}"#),
        );
        assert!(reply.contains("success"), "{reply}");
        c.call(20 + i, "process.kill", &format!(r#"{{"id":"{id}","signal":"{name}"}}"#));
        let frames = frames_until_exit(&mut c, &id);
        let exit = &frames.last().unwrap().raw;
        assert!(exit.contains(&format!(r#""signal":"{want}""#)), "{name}: {exit}");
    }
}

#[test]
fn killandwait_grace_is_clamped() {
    // The clamp is 30000 ms; the hook lowers it to 200 ms. A child that
    // ignores TERM with timeoutMs 120000 is escalated after the clamp, so
    // the reply comes well inside the client's 20 s read timeout (without
    // the clamp it would not).
    let d = TestDaemon::start_with(&[], &[("REMORA_TEST_KILL_GRACE_CAP_MS", "200")]);
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.spawn",
        r#"{"id":"p1","command":"sh","args":["-c","trap '' TERM; echo ready; while :; do sleep 0.05; done"]}"#,
    );
    assert!(reply.contains("success"), "{reply}");
    let (_, frame) = parse_frame(&next_line(&mut c)).expect("ready frame");
    assert_eq!(stdout_of(&[frame]), b"ready\n");
    let reply = c.call(2, "process.killAndWait", r#"{"id":"p1","timeoutMs":120000}"#);
    assert_eq!(
        reply,
        r#"{"jsonrpc":"2.0","id":2,"result":{"found":true,"died":true,"escalated":true}}"#
    );
    // The hook is not passed on to children.
    let reply = c.call(
        3,
        "process.spawn",
        r#"{"id":"env","command":"sh","args":["-c","echo ${REMORA_TEST_KILL_GRACE_CAP_MS-unset}"]}"#,
    );
    assert!(reply.contains("success"), "{reply}");
    let frames = frames_until_exit(&mut c, "env");
    assert_eq!(stdout_of(&frames), b"unset\n");
}

/// Spawns `sh` that starts a background sleeper (its output on the
/// process's pipes when `holds_pipes`, else on `/dev/null`), prints the
/// sleeper's pid and then becomes a `sleep` that dies on SIGTERM; returns
/// the sleeper, held while known alive.
fn spawn_dying_leader(c: &mut Client, id: &str, holds_pipes: bool) -> Proc {
    let redirect = if holds_pipes { "" } else { " >/dev/null 2>&1" };
    let params =
        format!(r#"{{"id":"{id}","command":"sh","args":["-c","sleep 100{redirect} & echo $!; exec sleep 200"]}}"#);
    let reply = c.call(1, "process.spawn", &params);
    assert!(reply.contains(r#""success":true"#), "{reply}");
    let mut out = Vec::new();
    while !out.ends_with(b"\n") {
        let (_, frame) = parse_frame(&next_line(c)).expect("frame");
        out.extend(stdout_of(&[frame]));
    }
    let pid = String::from_utf8(out).unwrap().trim().parse().unwrap();
    Proc::open(pid).expect("a hold on the sleeper")
}

#[test]
fn a_group_member_holding_the_pipes_gets_sigkill_at_the_end_of_the_grace() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let sleeper = spawn_dying_leader(&mut c, "p1", true);
    // The leader dies on SIGTERM at once; the sleeper keeps its stdout
    // open, so the exit frame is pending when the grace runs out.
    let reply = c.call(2, "process.killAndWait", r#"{"id":"p1","timeoutMs":300}"#);
    let gone = wait_until(Duration::from_secs(10), || sleeper.gone());
    if !gone {
        sleeper.signal(libc::SIGKILL);
    }
    assert_eq!(
        reply,
        r#"{"jsonrpc":"2.0","id":2,"result":{"found":true,"died":true,"escalated":true}}"#
    );
    assert!(gone, "the pipe holder outlived the group SIGKILL");
    let frames = frames_until_exit(&mut c, "p1");
    let exit = &frames.last().unwrap().raw;
    assert!(exit.contains(r#""signal":"SIGTERM","killedBy":"client""#), "{exit}");
}

#[test]
fn a_leader_that_dies_with_its_output_complete_spares_its_group() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let sleeper = spawn_dying_leader(&mut c, "p1", false);
    let reply = c.call(2, "process.killAndWait", r#"{"id":"p1","timeoutMs":5000}"#);
    let alive = !sleeper.gone();
    sleeper.signal(libc::SIGKILL);
    assert_eq!(reply, r#"{"jsonrpc":"2.0","id":2,"result":{"found":true,"died":true}}"#);
    assert!(alive, "a kid with its own stdio got a signal");
}
