//! The replay directory holds the output of the owner's processes, so no
//! other local user may be able to read or swap it. A replay dir with a
//! level another user owns, a level others can write without the sticky
//! bit, or a symlinked level is refused, and the daemon keeps replay logs
//! in RAM with a warning; a stale directory's planted `node` FIFO never
//! stalls start-up.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::TestDaemon;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn serves_replay_from_ram(d: &TestDaemon) {
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.spawn",
        r#"{"id":"p","command":"sh","args":["-c","seq 1 2000"]}"#,
    );
    assert!(reply.contains(r#""result":"#), "{reply}");
    let live = frames_until_exit(&mut c, "p");
    let mut r = d.connect();
    r.send(2, "process.reattach", r#"{"id":"p","fromSeq":0}"#);
    let replayed = frames_until_exit(&mut r, "p");
    assert_eq!(stdout_of(&replayed), stdout_of(&live));
    let want: String = (1..=2000).map(|i| format!("{i}\n")).collect();
    assert_eq!(stdout_of(&live), want.as_bytes());
}

fn refused(replay: &Path, why: &str) {
    let d = TestDaemon::start_with(&["-replay-dir", replay.to_str().unwrap()], &[]);
    assert!(
        d.log().contains("WARN  [replay] cannot use"),
        "{why}: not refused; log: {}",
        d.log()
    );
    assert!(
        !replay.exists() || std::fs::read_dir(replay).unwrap().next().is_none(),
        "{why}: wrote into it"
    );
    serves_replay_from_ram(&d);
}

#[test]
fn a_level_others_can_write_without_the_sticky_bit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&open.join("replay"), "world-writable parent");
    // The same level with the sticky bit (as /tmp) is fine.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let d = TestDaemon::start_with(&["-replay-dir", open.join("replay").to_str().unwrap()], &[]);
    assert!(!d.log().contains("cannot use"), "{}", d.log());
    let mode = std::fs::metadata(open.join("replay")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn a_symlinked_level_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
    refused(&tmp.path().join("link").join("replay"), "symlinked parent");
    assert!(!real.join("replay").exists(), "created through the link");
    std::os::unix::fs::symlink(&real, tmp.path().join("last")).unwrap();
    refused(&tmp.path().join("last"), "symlinked last level");
}

#[test]
fn a_level_owned_by_another_user_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: making a directory owned by another user needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    refused(&theirs.join("replay"), "parent of another user");
    // Pre-created by another user as the replay dir itself (the
    // `/var/tmp/remora-<uid>` fallback a stranger got to first).
    let planted = tmp.path().join("planted");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    refused(&planted, "replay dir of another user");
}

#[test]
fn a_fifo_planted_as_a_stale_record_never_stalls_start_up() {
    let replay = tempfile::tempdir().unwrap();
    let stale = replay.path().join("daemon-999999-0");
    std::fs::create_dir(&stale).unwrap();
    let fifo = std::ffi::CString::new(stale.join("node").to_str().unwrap()).unwrap();
    // SAFETY: NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let d = TestDaemon::start_with(&["-replay-dir", replay.path().to_str().unwrap()], &[]);
    assert!(d.call("server.ping", "{}").contains("pong"));
    assert!(stale.exists(), "a directory without a readable record is left alone");
}
