//! The orphan reap: at a daemon's start, the children a dead predecessor
//! of the same run directory recorded ([`super::childrec`]) are ended.
//!
//! Before binding and only as the lock holder, the records are read
//! (first 128 per start, regular files of at most 4096 bytes) and a
//! recorded child is signalled only when all of this holds: it was
//! recorded on this machine and boot (`node`), its daemon (`daemonPid` +
//! `daemonStart`) is gone, and the process with that pid now started at
//! the recorded clock tick, leads its own process group, runs the
//! recorded program, carries `CLAUDE_SSH_RUN_DIR` naming this run
//! directory, and carries `CLAUDE_SSH_CHILD` naming its own pid and start
//! (the exec-child trampoline's stamp, [`crate::agent::trampoline`]).
//! Anything else is dropped without a signal (logged when the pid exists
//! but does not verify) or, for another machine, kept. At most 64 groups
//! are ended per start: SIGTERM, up to 2 s, re-verified on every poll,
//! then SIGKILL.
//!
//! The checks are made through a hold on the recorded pid's process,
//! taken before them ([`crate::sys::process::PidRef`]: a pidfd on Linux),
//! and count only if that process was present before and after them; every
//! signal then goes through the hold, never by the number. The group is
//! reached by the leader's pidfd where the kernel allows it (Linux 6.9),
//! so it is the recorded group even once its leader was reaped; elsewhere
//! only while the leader is present (running or a zombie), which pins the
//! group id.
//!
//! A group whose leader is gone (before the start, or during the SIGTERM
//! grace) on a system where no pidfd names it, is ended member by member:
//! a process counts as the recorded group's member only when, checked
//! through a hold of its own, it is in the recorded group id, started no
//! earlier than the recorded child, names this run directory, and carries
//! the recorded child's own stamp (`CLAUDE_SSH_CHILD=<pid>:<start>`, the
//! record's pid and start time, which only that child's descendants
//! inherit). A member that does not prove itself (one that cleared its
//! environment) is left alone: the number alone cannot say whose it is.

use super::childrec::{
    boot_of, host_id, list_dir, open_children_dir, read_record, start_ticks, stat_fields, unlink_at, Record, CHILD_ENV,
    RUN_DIR_ENV,
};
use crate::sys::process::{GroupError, PidRef};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Records read per start; groups ended per start.
const MAX_RECORDS: usize = 128;
const MAX_GROUPS: usize = 64;
/// SIGTERM's grace, then how long SIGKILL is given to take effect.
const TERM_GRACE: Duration = Duration::from_secs(2);
const KILL_WAIT: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);

/// Counts for the summary line.
#[derive(Default)]
struct Tally {
    on_term: usize,
    on_kill: usize,
    survived: usize,
    dropped: usize,
    kept: usize,
}

/// A verified orphan group about to be ended.
struct Target {
    name: String,
    rec: Record,
    run_dir: PathBuf,
    /// The hold the verification was made through; it leads the group.
    /// `None` when the leader was gone already and members proved
    /// themselves ([`member_of`]).
    leader: Option<PidRef>,
}

/// Ends the orphaned children a dead predecessor recorded under `run_dir`.
/// Call before binding, only while holding the run-dir lock.
pub(crate) fn reap_orphans(run_dir: &Path) {
    let Ok(Some(dir)) = open_children_dir(run_dir, false) else {
        return;
    };
    let node = crate::rundir::runlock::node_id();
    let host = host_id();
    let mut names: Vec<String> = list_dir(&dir)
        .into_iter()
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    if names.len() > MAX_RECORDS {
        crate::log_warn!(
            "[process.Registry] more than {MAX_RECORDS} records in {}/children; leaving the rest for the next start",
            run_dir.display()
        );
        names.truncate(MAX_RECORDS);
    }
    let mut tally = Tally::default();
    let mut targets = Vec::new();
    for name in names {
        let Some(rec) = read_record(&dir, &name) else {
            // Not a regular file, or not one record: not ours to keep.
            let _ = unlink_at(&dir, &name);
            continue;
        };
        if rec.node != node {
            // Another boot of this machine: its processes are gone.
            // Another machine (or pid namespace) sharing the folder: not
            // ours to judge.
            let same_host = !host.is_empty() && rec.host == host;
            if same_host && boot_of(&rec.node) != boot_of(&node) {
                let _ = unlink_at(&dir, &name);
                tally.dropped += 1;
            } else {
                tally.kept += 1;
            }
            continue;
        }
        // A zombie daemon (killed, not yet reaped by its new parent) is gone.
        let daemon_alive = i32::try_from(rec.daemon_pid)
            .ok()
            .filter(|&pid| !process_is_zombie(pid))
            .and_then(start_ticks)
            .is_some_and(|t| t == rec.daemon_start);
        if daemon_alive {
            tally.kept += 1;
            continue;
        }
        let pid = i32::try_from(rec.pid).unwrap_or(0);
        let Some(leader) = PidRef::open(pid) else {
            // The leader is gone: what is left of its group, if anything,
            // is ended member by member.
            match proven_members(&rec, run_dir, 0) {
                Members {
                    sent: 0, first_refusal, ..
                } => {
                    if let Some(reason) = first_refusal {
                        crate::log_warn!(
                            "[process.Registry] record {name}: pid {pid} is gone, and no member of its group {pid} proves itself the recorded child's ({reason}); dropping the record, signalling nothing"
                        );
                    }
                    let _ = unlink_at(&dir, &name);
                    tally.dropped += 1;
                }
                _ => targets.push(Target {
                    name,
                    rec,
                    run_dir: run_dir.to_path_buf(),
                    leader: None,
                }),
            }
            continue;
        };
        if let Err(reason) = leader.confirm(|_| verify(&rec, run_dir)) {
            crate::log_warn!(
                "[process.Registry] record {name}: pid {pid} is not a child to end ({reason}); dropping the record, signalling nothing"
            );
            let _ = unlink_at(&dir, &name);
            tally.dropped += 1;
            continue;
        }
        targets.push(Target {
            name,
            rec,
            run_dir: run_dir.to_path_buf(),
            leader: Some(leader),
        });
    }
    if targets.len() > MAX_GROUPS {
        crate::log_warn!(
            "[process.Registry] {} more orphaned group(s) recorded in {}/children than the {MAX_GROUPS} one start ends; leaving those for the next start",
            targets.len() - MAX_GROUPS,
            run_dir.display()
        );
        targets.truncate(MAX_GROUPS);
    }
    let groups = targets.len();
    end_groups(&targets, &mut tally);
    for t in &targets {
        let _ = unlink_at(&dir, &t.name);
    }
    if groups > 0 || tally.kept > 0 {
        crate::log_info!(
            "[daemon] serve: predecessor's children \u{2014} {groups} orphaned group(s): {} ended on SIGTERM, {} on SIGKILL, {} survived; {} stale record(s) dropped, {} kept",
            tally.on_term,
            tally.on_kill,
            tally.survived,
            tally.dropped,
            tally.kept
        );
    }
}

/// SIGTERM to every group, 2 s with re-verification, SIGKILL to the rest.
fn end_groups(targets: &[Target], tally: &mut Tally) {
    // Per target: still to watch (and signal) or settled.
    let mut live: Vec<bool> = targets.iter().map(|_| true).collect();
    for (i, t) in targets.iter().enumerate() {
        crate::log_info!(
            "[process.Registry] ending orphaned process group {} recorded by daemon instance {} (pid {}): SIGTERM",
            t.rec.pid,
            crate::base::goerr::go_quote(t.rec.instance.as_bytes()),
            t.rec.daemon_pid
        );
        if let Err(e) = signal_target(t, libc::SIGTERM) {
            live[i] = false;
            settle_unsent(t, &e, tally);
        }
    }
    let deadline = Instant::now() + TERM_GRACE;
    loop {
        for (i, t) in targets.iter().enumerate() {
            if !live[i] {
                continue;
            }
            match group_left(t) {
                Ok(false) => {}
                Ok(true) => {
                    live[i] = false;
                    tally.on_term += 1;
                    continue;
                }
                Err(e) => {
                    live[i] = false;
                    settle_unsent(t, &e, tally);
                    continue;
                }
            }
            if let Err(reason) = still_ours(t) {
                crate::log_warn!(
                    "[process.Registry] group {} no longer verifies ({reason}); nothing more is sent to it",
                    t.rec.pid
                );
                live[i] = false;
                tally.survived += 1;
            }
        }
        if !live.contains(&true) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(POLL);
    }
    let mut killed = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        if live[i] {
            crate::log_warn!(
                "[process.Registry] group {} outlived SIGTERM for 2s: SIGKILL",
                t.rec.pid
            );
            match signal_target(t, libc::SIGKILL) {
                Ok(()) => killed.push(i),
                Err(e) => settle_unsent(t, &e, tally),
            }
        }
    }
    let deadline = Instant::now() + KILL_WAIT;
    let gone = |t: &Target| group_left(t).unwrap_or(true);
    while killed.iter().any(|&i| !gone(&targets[i])) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    for i in killed {
        if matches!(group_left(&targets[i]), Ok(true) | Err(GroupError::Empty)) {
            tally.on_kill += 1;
        } else {
            tally.survived += 1;
        }
    }
}

/// Counts a group whose signal was not sent: gone already (it ended
/// before the signal), or not provably the recorded group any more.
fn settle_unsent(t: &Target, e: &GroupError, tally: &mut Tally) {
    match e {
        GroupError::Empty => tally.on_term += 1,
        GroupError::Unproven => {
            crate::log_warn!(
                "[process.Registry] group {}: its leader is gone, and nothing on this system proves the id still names the recorded group; nothing more is sent to it",
                t.rec.pid
            );
            tally.survived += 1;
        }
        GroupError::Os(e) => {
            crate::log_warn!(
                "[process.Registry] group {}: the signal was refused ({}); nothing more is sent to it",
                t.rec.pid,
                crate::base::goerr::io_text(e)
            );
            tally.survived += 1;
        }
    }
}

/// Sends `signal` to the recorded group: through the leader's hold
/// while that proves the group, else to each member that proves itself
/// ([`proven_members`]); [`GroupError::Empty`] when no member was reached.
fn signal_target(t: &Target, signal: i32) -> Result<(), GroupError> {
    if let Some(leader) = &t.leader {
        match leader.signal_group(signal) {
            Err(GroupError::Unproven) => {}
            sent => return sent,
        }
    }
    let members = proven_members(&t.rec, &t.run_dir, signal);
    if signal != 0 {
        crate::log_info!(
            "[process.Registry] group {}: its leader is gone and no pidfd names the group, so its members are signalled one by one: {} that carry the recorded child's stamp, {} other(s) left alone",
            t.rec.pid,
            members.sent,
            members.refused
        );
    }
    if members.sent == 0 {
        return Err(GroupError::Empty);
    }
    Ok(())
}

/// What [`proven_members`] did.
struct Members {
    /// Members proven and signalled (signal 0: proven and running).
    sent: usize,
    /// Running processes in the group id that did not prove themselves.
    refused: usize,
    /// Why the first of those did not.
    first_refusal: Option<String>,
}

/// Signals, one by one, each running process of the group id `rec.pid`
/// that proves itself a member of the recorded child's group
/// ([`member_of`], checked through a hold taken first; the signal goes
/// through that hold). Signal 0 only counts them.
fn proven_members(rec: &Record, run_dir: &Path, signal: i32) -> Members {
    let mut members = Members {
        sent: 0,
        refused: 0,
        first_refusal: None,
    };
    let Ok(pgid) = i32::try_from(rec.pid) else {
        return members;
    };
    for pid in running_in_group(pgid) {
        let Some(hold) = PidRef::open(pid) else {
            continue;
        };
        match hold.confirm(|pid| member_of(pid, rec, run_dir)) {
            Ok(()) => {
                if hold.signal(signal).is_ok() {
                    members.sent += 1;
                }
            }
            Err(reason) => {
                members.refused += 1;
                members.first_refusal.get_or_insert(reason);
            }
        }
    }
    members
}

/// Whether process `pid` proves itself a member of the group `rec`'s
/// child led: in that group id, started no earlier than the child, naming
/// this run directory, and carrying the child's own stamp (see the module
/// docs); the reason when it does not.
fn member_of(pid: i32, rec: &Record, run_dir: &Path) -> Result<(), String> {
    let fields = stat_fields(pid).ok_or("it has ended")?;
    if fields.get(2).and_then(|g| g.parse::<i64>().ok()) != Some(rec.pid) {
        return Err("it left the group".to_string());
    }
    let started = fields.get(19).and_then(|t| t.parse::<u64>().ok());
    match (started, rec.start.parse::<u64>()) {
        (Some(started), Ok(recorded)) if started >= recorded => {}
        _ => {
            return Err(format!(
                "it started before the recorded child (at {}): the group id has been reused",
                crate::base::goerr::go_quote(rec.start.as_bytes())
            ))
        }
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let named = run_dir_named(&environ);
    if named != Some(run_dir.as_os_str().as_bytes()) {
        return Err("its CLAUDE_SSH_RUN_DIR does not name this run dir".to_string());
    }
    let stamp = format!("{CHILD_ENV}={}:{}", rec.pid, rec.start);
    if !environ.split(|b| *b == 0).any(|e| e == stamp.as_bytes()) {
        return Err(format!(
            "its CLAUDE_SSH_CHILD does not name the recorded child {}:{}",
            rec.pid, rec.start
        ));
    }
    Ok(())
}

/// The run dir an environment block (`/proc/<pid>/environ`) names in
/// `CLAUDE_SSH_RUN_DIR`: the last setting wins, as `getenv` reads it.
fn run_dir_named(environ: &[u8]) -> Option<&[u8]> {
    let prefix = format!("{RUN_DIR_ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|e| e.strip_prefix(prefix.as_bytes()))
        .next_back()
}

/// The running (not zombie) processes whose group id is `pgid`.
fn running_in_group(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|&pid| {
            stat_fields(pid).is_some_and(|f| f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) && f[0] != "Z")
        })
        .collect()
}

/// Re-verification while a group is being ended. The hold names the
/// leader whatever happens to its number, so only a present leader can
/// have changed (an exec); a zombie cannot. Members are proven again at
/// each signal ([`proven_members`]).
fn still_ours(t: &Target) -> Result<(), String> {
    let Some(leader) = t.leader.as_ref().filter(|l| l.present()) else {
        return Ok(());
    };
    leader
        .confirm(|pid| {
            if process_is_zombie(pid) {
                Ok(())
            } else {
                verify(&t.rec, &t.run_dir)
            }
        })
        // It ended during the check: nothing left to verify.
        .or_else(|e| if leader.present() { Err(e) } else { Ok(()) })
}

/// Whether the process `rec.pid` is the child `rec` describes (see the
/// module docs); the reason when it is not.
fn verify(rec: &Record, run_dir: &Path) -> Result<(), String> {
    let pid = i32::try_from(rec.pid).map_err(|_| "no usable pid".to_string())?;
    match start_ticks(pid) {
        Some(t) if t == rec.start => {}
        _ => {
            return Err(format!(
                "it did not start at the recorded {}: the pid has been reused",
                crate::base::goerr::go_quote(rec.start.as_bytes())
            ))
        }
    }
    // SAFETY: getpgid only reads.
    if unsafe { libc::getpgid(pid) } != pid {
        return Err("it does not lead its own process group".to_string());
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let base = |p: &[u8]| p.rsplit(|b| *b == b'/').next().unwrap_or(p).to_vec();
    let recorded = rec.argv0.as_bytes();
    if recorded.is_empty() || (argv0 != recorded && base(argv0) != base(recorded)) {
        return Err(format!(
            "it does not run the recorded program {}",
            crate::base::goerr::go_quote(recorded)
        ));
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let named = run_dir_named(&environ);
    match named {
        None => {
            return Err("it was not started by a daemon of this run dir: no CLAUDE_SSH_RUN_DIR names it".to_string())
        }
        Some(v) if v != run_dir.as_os_str().as_bytes() => {
            return Err(
                "it belongs to a daemon of another run dir: its CLAUDE_SSH_RUN_DIR names a different one".to_string(),
            )
        }
        Some(_) => {}
    }
    // The trampoline's stamp: only the process a daemon started names
    // itself; whatever a child started inherited its parent's stamp.
    let own = format!("{CHILD_ENV}={pid}:{}", rec.start);
    let stamped = environ.split(|b| *b == 0).any(|e| e == own.as_bytes());
    if !stamped {
        return Err("it was not started by a daemon itself: its CLAUDE_SSH_CHILD does not name its own pid and start (something a child started)".to_string());
    }
    Ok(())
}

/// Whether no member of the recorded group is left (zombies awaiting
/// their reaper do not count: they cannot act any more). Asked through
/// the leader's hold while it proves the group; else no member that
/// proves itself is left.
fn group_left(t: &Target) -> Result<bool, GroupError> {
    if let Some(leader) = &t.leader {
        match leader.signal_group(0) {
            // Members left, asked just now through the hold: all zombies?
            // The id names the recorded group at this moment, so the
            // members listed under it are that group's.
            Ok(()) => return Ok(running_in_group(leader.pid()).is_empty()),
            Err(GroupError::Empty) => return Ok(true),
            Err(GroupError::Unproven) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(proven_members(&t.rec, &t.run_dir, 0).sent == 0)
}

fn process_is_zombie(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f[0] == "Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44 (item 8): a recorded group whose leader ends on SIGTERM
    /// and is reaped during the grace, leaving members that ignore it.
    /// Where no pidfd names the group (before Linux 6.9, taken here on a
    /// newer kernel), its id alone proves nothing any more, and the
    /// SIGKILL went nowhere: the members lived on. Now each member is
    /// proven on its own: the one carrying the recorded child's stamp is
    /// killed, the one that cleared its environment is left alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn members_left_by_a_leader_reaped_mid_grace_are_ended_by_their_stamp() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let run_dir = tempfile::tempdir().unwrap();
        // The child stamps itself as the trampoline would (pid and start
        // from its own stat, kept across the exec), then starts a member
        // that inherits the stamp and one that clears its environment,
        // both ignoring SIGTERM, and waits, dying on SIGTERM itself.
        // Each member prints its own pid once its environment is final.
        let inner = "trap '' TERM; sh -c 'echo stamped $$; exec sleep 300' </dev/null & \
             env -i sh -c 'echo cleared $$; exec sleep 300' </dev/null & trap - TERM; echo ready; wait";
        // (The inner script comes in as `$0`, which `set --` leaves.)
        let script = format!(
            "set -- $(cat /proc/$$/stat); exec env {CHILD_ENV}=$$:${{22}} {RUN_DIR_ENV}='{}' sh -c \"$0\"",
            run_dir.path().display()
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script, inner])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let leader = child.id() as i32;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        // The three lines come in any order; `ready` once the leader dies
        // on SIGTERM again.
        let (mut stamped, mut cleared) = (0, 0);
        for _ in 0..3 {
            let line = lines.next().unwrap().unwrap();
            match line.split_once(' ') {
                Some(("stamped", pid)) => stamped = pid.parse().unwrap(),
                Some(("cleared", pid)) => cleared = pid.parse().unwrap(),
                _ => assert_eq!(line, "ready"),
            }
        }
        // Held while known alive: they just printed, and sleep 300 s.
        let (stamped, cleared) = (PidRef::open(stamped).unwrap(), PidRef::open(cleared).unwrap());
        let rec = Record {
            pid: i64::from(leader),
            argv0: "sh".into(),
            start: start_ticks(leader).unwrap(),
            ..Default::default()
        };
        let target = Target {
            name: "t.json".into(),
            rec,
            run_dir: run_dir.path().to_path_buf(),
            leader: PidRef::open(leader),
        };
        // It printed before its exec of sleep, whose environment the
        // kernel shows only once the new image is set up: wait for sleep.
        let execd = |pid: i32| {
            std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|c| c == b"sleep\n")
                && crate::sys::process::pidns::environ_is_set(pid)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !execd(stamped.pid()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the stamped member never ran sleep"
            );
            std::thread::yield_now();
        }
        assert_eq!(member_of(stamped.pid(), &target.rec, &target.run_dir), Ok(()));
        assert!(member_of(cleared.pid(), &target.rec, &target.run_dir)
            .unwrap_err()
            .contains("CLAUDE_SSH_RUN_DIR"));
        let reused = Record {
            start: "1".into(),
            ..target.rec.clone()
        };
        assert!(member_of(stamped.pid(), &reused, &target.run_dir)
            .unwrap_err()
            .contains("does not name the recorded child"));
        // Whoever inherits the leader reaps it the moment it exits.
        let reaper = std::thread::spawn(move || child.wait().unwrap());
        let mut tally = Tally::default();
        crate::sys::process::without_group_pidfd(|| end_groups(std::slice::from_ref(&target), &mut tally));
        let status = reaper.join().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM),
            "the leader ended on SIGTERM"
        );
        let killed = stamped.exited();
        let spared = !cleared.exited();
        let _ = stamped.signal(libc::SIGKILL);
        let _ = cleared.signal(libc::SIGKILL);
        assert!(killed, "the stamped member outlived the reap");
        assert!(spared, "a member that proves nothing was signalled");
        assert_eq!((tally.on_kill, tally.survived), (1, 0));
    }

    /// Issue 44 (item 8): a recorded group whose leader and members are
    /// all gone, its id taken over by a new group: a child another daemon
    /// of this run dir started, stamped with its own start. Planted for
    /// real in a pid namespace; the member-by-member path must send it
    /// nothing.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_group_that_took_a_recorded_id_over_proves_nothing() {
        crate::sys::process::pidns::run("rundir::orphanreap::tests::group_id_taken_over_helper", &[]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "runs only inside the pid namespace its parent test makes"]
    fn group_id_taken_over_helper() {
        use crate::sys::process::pidns;
        use std::os::unix::process::CommandExt;
        if !pidns::entered() {
            return;
        }
        let run_dir = tempfile::tempdir().unwrap();
        let mut first = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let number = first.id() as i32;
        let rec = Record {
            pid: i64::from(number),
            argv0: "sleep".into(),
            start: start_ticks(number).unwrap(),
            ..Default::default()
        };
        first.kill().unwrap();
        first.wait().unwrap();
        // The new child names this run dir and itself, started later.
        let later: u64 = rec.start.parse::<u64>().unwrap() + 1;
        let stamp = format!("{number}:{later}");
        let dir = run_dir.path().to_str().unwrap();
        let mut planted = pidns::plant_with(number, &[(RUN_DIR_ENV, dir), (CHILD_ENV, &stamp)], || {
            start_ticks(number) != Some(rec.start.clone())
        });
        assert_eq!(running_in_group(number), [number], "the group id is the planted one's");
        let members = proven_members(&rec, run_dir.path(), libc::SIGKILL);
        assert_eq!((members.sent, members.refused), (0, 1));
        let refusal = members.first_refusal.unwrap_or_default();
        assert!(refusal.contains("does not name the recorded child"), "{refusal}");
        assert!(
            !pidns::got_sigkill(&mut planted),
            "the group that took the recorded id was signalled"
        );
        planted.kill().unwrap();
        planted.wait().unwrap();
    }

    #[test]
    fn own_process_verifies_only_with_the_right_marker() {
        let me = std::process::id() as i32;
        let rec = Record {
            pid: i64::from(me),
            argv0: "x".into(),
            start: start_ticks(me).unwrap(),
            ..Default::default()
        };
        // The test binary is not "x" (or does not lead its group): refused.
        assert!(verify(&rec, Path::new("/nowhere")).is_err());
        let reused = Record {
            start: "1".into(),
            ..rec
        };
        assert!(verify(&reused, Path::new("/nowhere")).unwrap_err().contains("reused"));
    }
}
