//! A child of a `-keep-children` daemon is never reaped as an orphan: not
//! after a graceful stop, not after `kill -9` of its daemon, whatever the
//! next daemon's flags. (Without `-keep-children` a SIGKILLed daemon's
//! children are still ended by the next one: `tests/it/childrec.rs`, and the
//! last test here.) Linux only: elsewhere nothing is recorded or reaped.

use crate::common;
use crate::common::proven::Proc;
use crate::common::{wait_until, Client, TestDaemon};
use std::path::Path;
use std::time::Duration;

/// Spawns `sh -c 'echo $$; sleep 300; :'` as `id`; returns its pid, held
/// while it is known to be alive (it just printed it).
fn spawn_sleeper(c: &mut Client, id: &str) -> (i32, Proc) {
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", "echo $$; sleep 300; :"]});
    let reply = c.call(1, "process.spawn", &params.to_string());
    assert!(reply.contains("\"success\":true"), "{reply}");
    loop {
        let line = common::frames::next_line(c);
        if let Some((pid, frame)) = common::frames::parse_frame(&line) {
            if pid == id && frame.stream == "stdout" {
                let pid = String::from_utf8(frame.data).unwrap().trim().parse().unwrap();
                return (pid, Proc::open(pid).expect("a pidfd on the sleeper"));
            }
        }
    }
}

fn daemon_pid(root: &Path) -> i32 {
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("daemon.lock")).unwrap()).unwrap();
    lock["pid"].as_i64().unwrap() as i32
}

/// Starts another `-serve` on `first`'s socket (with `args`); returns its
/// log once it listens: a predecessor's orphans are ended before that.
fn next_daemon(first: &TestDaemon, args: &[&str]) -> String {
    common::serve_next(&first.socket, first.root(), args)
}

fn records(root: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(root.join("children"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

fn end_group(child: &Proc) {
    // Through the hold: the group of the sleeper this test had spawned,
    // or nothing.
    child.signal_group(libc::SIGKILL);
    assert!(wait_until(Duration::from_secs(10), || child.gone()));
}

/// SIGKILL to the daemon named in `root`'s lock record, held while it is
/// known to be alive (it serves the test's connection).
fn kill_daemon(root: &Path) -> i32 {
    let daemon = daemon_pid(root);
    let held = Proc::open(daemon).expect("a pidfd on the daemon");
    assert!(held.signal(libc::SIGKILL));
    assert!(wait_until(Duration::from_secs(10), || held.gone()));
    daemon
}

#[test]
fn a_kept_child_outlives_kill_9_of_its_daemon_and_the_next_daemon() {
    let mut first = TestDaemon::start_with(&["-keep-children"], &[]);
    let root = first.root().to_path_buf();
    let mut c = first.connect();
    let (child, held) = spawn_sleeper(&mut c, "kept");
    // Marked as the daemon's child, but not recorded.
    let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap();
    let marker = format!("CLAUDE_SSH_RUN_DIR={}\0", root.display());
    assert!(environ.windows(marker.len()).any(|w| w == marker.as_bytes()));
    assert!(records(&root).is_empty(), "{:?}", records(&root));
    assert!(first.log().contains(
        "[process.Registry] -keep-children: no child is recorded, so no later daemon of this run dir ends one"
    ));

    kill_daemon(&root);
    // The next daemon has no -keep-children of its own: what counts is the
    // promise the dead one made.
    let log = next_daemon(&first, &[]);
    assert!(!held.gone(), "the kept child was ended:\n{log}");
    assert!(!log.contains("ending orphaned process group"), "{log}");
    end_group(&held);
    first.stop();
}

#[test]
fn a_kept_child_outlives_a_graceful_restart() {
    let mut first = TestDaemon::start_with(&["-keep-children"], &[]);
    let root = first.root().to_path_buf();
    let mut c = first.connect();
    let (_, held) = spawn_sleeper(&mut c, "kept");
    first.stop();
    assert!(first
        .log()
        .contains("-keep-children: leaving 1 running child process(es) alive across shutdown"));
    let log = next_daemon(&first, &["-keep-children"]);
    assert!(!held.gone(), "the kept child was ended:\n{log}");
    assert!(records(&root).is_empty(), "{:?}", records(&root));
    end_group(&held);
    first.stop();
}

#[test]
fn without_keep_children_a_killed_daemons_child_is_still_ended() {
    let mut first = TestDaemon::start();
    let root = first.root().to_path_buf();
    let mut c = first.connect();
    let (child, held) = spawn_sleeper(&mut c, "plain");
    assert_eq!(records(&root), [std::ffi::OsString::from(format!("{child}.json"))]);
    kill_daemon(&root);
    // Even a next daemon with -keep-children ends what the dead one
    // recorded: that one promised nothing.
    let log = next_daemon(&first, &["-keep-children"]);
    assert!(held.gone(), "{log}");
    assert!(
        log.contains(&format!(
            "[process.Registry] ending orphaned process group {child} recorded by daemon instance"
        )),
        "{log}"
    );
    first.stop();
}
