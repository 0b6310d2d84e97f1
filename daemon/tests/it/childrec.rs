//! Child records and the orphan reap with real processes: a
//! daemon is SIGKILLed with children running (one with a grandchild, one
//! ignoring SIGTERM); the next daemon on the same socket ends them all,
//! and drops, without signalling, records that do not verify.

use crate::common;
use crate::common::proven::Proc;
use crate::common::{pid_gone, wait_until, Client, TestDaemon};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Spawns `sh -c 'echo $$; <script>'` as process `id`; returns its pid
/// (the first line it prints).
fn spawn_sh(c: &mut Client, rid: u64, id: &str, script: &str) -> i32 {
    let script = format!("echo $$; {script}");
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", script]}).to_string();
    let reply = c.call(rid, "process.spawn", &params);
    assert!(reply.contains("\"success\":true"), "{reply}");
    first_output(c, id).trim().parse().unwrap()
}

/// The first stdout frame of process `id`, decoded.
fn first_output(c: &mut Client, id: &str) -> String {
    loop {
        let line = common::frames::next_line(c);
        if let Some((pid, frame)) = common::frames::parse_frame(&line) {
            if pid == id && frame.stream == "stdout" {
                return String::from_utf8(frame.data).unwrap();
            }
        }
    }
}

fn alive(pid: i32) -> bool {
    !pid_gone(pid)
}

/// SIGKILLs the daemon named in `root`'s lock record (held while it is
/// known to be alive: it serves the test's connection) and waits until it
/// is gone; returns its pid.
fn kill_daemon(root: &Path) -> i32 {
    let daemon = read_json(&root.join("daemon.lock"))["pid"].as_i64().unwrap() as i32;
    let held = Proc::open(daemon).expect("a pidfd on the daemon");
    assert!(held.signal(libc::SIGKILL));
    assert!(wait_until(Duration::from_secs(10), || held.gone()));
    daemon
}

#[test]
fn a_killed_daemons_children_are_ended_by_the_next_daemon() {
    let mut first = TestDaemon::start();
    let root = first.root().to_path_buf();
    let socket = first.socket.clone();
    let children = root.join("children");
    let mut c = first.connect();
    let plain = spawn_sh(&mut c, 1, "plain", "sleep 300; :");
    let parent = spawn_sh(&mut c, 2, "tree", "sleep 300 & sleep 0.1; echo $!; wait");
    let grandchild: i32 = first_output(&mut c, "tree").trim().parse().unwrap();
    let stubborn = spawn_sh(&mut c, 3, "stubborn", "trap '' TERM; sleep 300; :");
    // One record per child, in the reference's member order.
    for pid in [plain, parent, stubborn] {
        let rec = std::fs::read_to_string(children.join(format!("{pid}.json"))).unwrap();
        assert!(rec.starts_with(&format!("{{\"pid\":{pid},\"node\":\"")), "{rec}");
        assert!(rec.contains("\"argv0\":\"sh\",\"start\":\""), "{rec}");
    }
    // Their environment names the run dir.
    let environ = std::fs::read(format!("/proc/{plain}/environ")).unwrap();
    let marker = format!("CLAUDE_SSH_RUN_DIR={}\0", root.display());
    assert!(environ.windows(marker.len()).any(|w| w == marker.as_bytes()));

    // Two records that must not be acted on: a process this test started
    // itself (right program, own group, no run-dir marker), and the same
    // pid with a start time it does not have (a reused pid).
    let mut outsider = Command::new("sleep").arg("300").process_group(0).spawn().unwrap();
    let outsider_pid = outsider.id() as i32;
    let template = read_json(&children.join(format!("{plain}.json")));
    let stat = std::fs::read_to_string(format!("/proc/{outsider_pid}/stat")).unwrap();
    let start = stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .nth(19)
        .unwrap()
        .to_string();
    let mut planted = template.clone();
    planted["pid"] = outsider_pid.into();
    planted["argv0"] = "sleep".into();
    planted["start"] = start.into();
    std::fs::write(children.join(format!("{outsider_pid}.json")), planted.to_string()).unwrap();
    let mut reused = planted.clone();
    reused["start"] = "1".into();
    // Same pid, another file name: records are judged one by one.
    std::fs::write(children.join("reused.json"), reused.to_string()).unwrap();
    // Junk is removed silently.
    std::fs::write(children.join("junk.json"), "not json").unwrap();

    // SIGKILL the daemon: nothing of it can clean up.
    let daemon = kill_daemon(&root);
    for pid in [plain, parent, grandchild, stubborn] {
        assert!(alive(pid), "{pid} should outlive the SIGKILLed daemon");
    }

    // The next daemon on the same socket.
    let text = common::serve_next(&socket, &root, &[]);
    // Reaped before the socket was bound, so before the banner.
    for pid in [plain, parent, grandchild, stubborn] {
        assert!(
            pid_gone(pid),
            "{pid} should have been ended ({plain} {parent} {grandchild} {stubborn}): {}",
            text
        );
    }
    assert!(alive(outsider_pid), "an unverified record must not be signalled");
    for want in [
        format!("[process.Registry] ending orphaned process group {plain} recorded by daemon instance \""),
        format!("(pid {daemon}): SIGTERM\n"),
        format!("[process.Registry] group {stubborn} outlived SIGTERM for 2s: SIGKILL\n"),
        format!("[process.Registry] record {outsider_pid}.json: pid {outsider_pid} is not a child to end (it was not started by a daemon of this run dir: no CLAUDE_SSH_RUN_DIR names it); dropping the record, signalling nothing\n"),
        format!("[process.Registry] record reused.json: pid {outsider_pid} is not a child to end (it did not start at the recorded \"1\": the pid has been reused); dropping the record, signalling nothing\n"),
        "[daemon] serve: predecessor's children \u{2014} 3 orphaned group(s): 2 ended on SIGTERM, 1 on SIGKILL, 0 survived; 2 stale record(s) dropped, 0 kept\n".to_string(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in\n{text}");
    }
    // Every old record is gone.
    let left: Vec<_> = std::fs::read_dir(&children)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = outsider.kill();
    let _ = outsider.wait();
    // `first` stops the second daemon on drop (same socket, same token).
    first.stop();
}

#[test]
fn a_graceful_stop_leaves_no_records() {
    let mut d = TestDaemon::start();
    let mut c = d.connect();
    let pid = spawn_sh(&mut c, 1, "s", "sleep 300; :");
    assert!(d.root().join(format!("children/{pid}.json")).exists());
    d.stop();
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)));
    let left: Vec<_> = std::fs::read_dir(d.root().join("children"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The start time of `pid` in clock ticks (`/proc/<pid>/stat` field 22).
fn start_of(pid: i32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .nth(19)
        .unwrap()
        .to_string()
}

#[test]
fn children_name_themselves_and_what_they_start_is_never_reaped() {
    let mut first = TestDaemon::start();
    let root = first.root().to_path_buf();
    let socket = first.socket.clone();
    let mut c = first.connect();
    // A caller's own values for the two markers never reach the program.
    let params = serde_json::json!({
        "id": "stamped",
        "command": "sh",
        "args": ["-c", "echo $$; env | grep -E '^CLAUDE_SSH_(RUN_DIR|CHILD)='; setsid sleep 300 & echo $!; wait"],
        "env": {"CLAUDE_SSH_CHILD": "1:1", "CLAUDE_SSH_RUN_DIR": "/elsewhere"},
    })
    .to_string();
    assert!(c.call(1, "process.spawn", &params).contains("\"success\":true"));
    let mut out = String::new();
    while out.lines().count() < 4 {
        out.push_str(&first_output(&mut c, "stamped"));
    }
    let lines: Vec<&str> = out.lines().collect();
    let child: i32 = lines[0].parse().unwrap();
    // (`sh` hands its own environment on in an order of its own.)
    let mut markers = lines[1..3].to_vec();
    markers.sort_unstable();
    assert_eq!(
        markers,
        [
            format!("CLAUDE_SSH_CHILD={child}:{}", start_of(child)),
            format!("CLAUDE_SSH_RUN_DIR={}", root.display()),
        ]
    );
    // The last two entries of the environment, in that order.
    let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap();
    let entries: Vec<&[u8]> = environ.split(|b| *b == 0).filter(|e| !e.is_empty()).collect();
    let tail: Vec<String> = entries[entries.len() - 2..]
        .iter()
        .map(|e| String::from_utf8_lossy(e).split('=').next().unwrap().to_string())
        .collect();
    assert_eq!(tail, ["CLAUDE_SSH_RUN_DIR", "CLAUDE_SSH_CHILD"]);

    // A grandchild that leads its own group, runs `sleep` and carries the
    // run dir (inherited), planted as if it were a recorded child.
    let grandchild: i32 = lines[3].parse().unwrap();
    let children = root.join("children");
    let mut planted = read_json(&children.join(format!("{child}.json")));
    planted["pid"] = grandchild.into();
    planted["argv0"] = "sleep".into();
    planted["start"] = start_of(grandchild).into();
    std::fs::write(children.join(format!("{grandchild}.json")), planted.to_string()).unwrap();

    // Held while it is known alive (it printed its pid, and holds its
    // parent's wait).
    let grandchild_held = Proc::open(grandchild).expect("a pidfd on the grandchild");
    kill_daemon(&root);
    // The next daemon on the same socket.
    let text = common::serve_next(&socket, &root, &[]);
    let spared = !grandchild_held.gone();
    grandchild_held.signal(libc::SIGKILL);
    assert!(pid_gone(child), "the stamped child was not reaped: {text}");
    assert!(spared, "something a child started was signalled: {text}");
    let want = format!("[process.Registry] record {grandchild}.json: pid {grandchild} is not a child to end (it was not started by a daemon itself: its CLAUDE_SSH_CHILD does not name its own pid and start (something a child started)); dropping the record, signalling nothing\n");
    assert!(text.contains(&want), "missing {want:?} in\n{text}");
    first.stop();
}

/// Spawns, as process `id`, a group leader that prints its pid, starts two
/// members (one inheriting its environment, one clearing it), and waits
/// for its stdin to close (it does with its daemon). Returns (leader,
/// stamped member, cleared member), each held while known alive.
fn leader_with_members(c: &mut Client, rid: u64, id: &str) -> (Proc, Proc, Proc) {
    let script = "echo $$; sh -c 'echo stamped $$; exec sleep 300' </dev/null & \
                  env -i sh -c 'echo cleared $$; exec sleep 300' </dev/null & read -r x; :";
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", script]}).to_string();
    assert!(c.call(rid, "process.spawn", &params).contains("\"success\":true"));
    // The lines may come in one frame or several; the members' in either
    // order, each once its environment is final.
    let mut out = String::new();
    while out.lines().count() < 3 {
        out.push_str(&first_output(c, id));
    }
    let mut lines = out.lines();
    let leader: i32 = lines.next().unwrap().parse().unwrap();
    let (mut stamped, mut cleared) = (0, 0);
    for line in lines {
        match line.split_once(' ') {
            Some(("stamped", pid)) => stamped = pid.parse().unwrap(),
            Some(("cleared", pid)) => cleared = pid.parse().unwrap(),
            _ => panic!("{out}"),
        }
    }
    for member in [stamped, cleared] {
        // SAFETY: getpgid only reads.
        let pgid = unsafe { libc::getpgid(member) };
        assert_eq!(pgid, leader, "a member of the leader's group");
    }
    let hold = |pid: i32| Proc::open(pid).expect("a hold on a process that just printed its pid");
    (hold(leader), hold(stamped), hold(cleared))
}

/// Issue 44 (item 8): no group kill after its leader is reaped unless the
/// group is proven to still be the recorded one. Two recorded children
/// lead a group each, with a member that inherited their environment and
/// one that cleared it; their daemon is SIGKILLed, the leaders then exit
/// (their stdin closes with the daemon) and someone else reaps them,
/// leaving the members under the leaders' ids. The group id proves
/// nothing now (a new daemon cannot tell it from a group that took the
/// number over), so each member must prove itself: in the group, with
/// the recorded child's stamp (its pid and recorded start time). The
/// first record's stamped member is ended; the second record's start
/// time was changed (as if the group were another child's), so its
/// member proves nothing and lives; no cleared member is signalled.
#[test]
fn a_group_whose_recorded_leader_was_reaped_is_ended_only_through_members_that_prove_it() {
    let mut first = TestDaemon::start();
    let root = first.root().to_path_buf();
    let socket = first.socket.clone();
    let mut c = first.connect();
    let (leader, stamped, cleared) = leader_with_members(&mut c, 1, "a");
    let (other_leader, other_stamped, other_cleared) = leader_with_members(&mut c, 2, "b");
    let record = root.join(format!("children/{}.json", other_leader.pid()));
    let mut changed = read_json(&record);
    changed["start"] = "1".into();
    std::fs::write(&record, changed.to_string()).unwrap();
    kill_daemon(&root);
    assert!(
        wait_until(Duration::from_secs(10), || !leader.present() && !other_leader.present()),
        "the leaders were never reaped"
    );
    let text = common::serve_next(&socket, &root, &[]);
    let verdicts = [&stamped, &cleared, &other_stamped, &other_cleared].map(|p| p.gone());
    for p in [&stamped, &cleared, &other_stamped, &other_cleared] {
        p.signal(libc::SIGKILL);
    }
    assert_eq!(
        verdicts,
        [true, false, false, false],
        "ended: the stamped member of the first group only\n{text}"
    );
    let (a, b) = (leader.pid(), other_leader.pid());
    for want in [
        format!("[process.Registry] ending orphaned process group {a} recorded by daemon instance \""),
        format!("[process.Registry] group {a}: its leader is gone and no pidfd names the group, so its members are signalled one by one: 1 that carry the recorded child's stamp, 1 other(s) left alone\n"),
        format!("[process.Registry] record {b}.json: pid {b} is gone, and no member of its group {b} proves itself the recorded child's ("),
        "; dropping the record, signalling nothing\n".to_string(),
        "[daemon] serve: predecessor's children \u{2014} 1 orphaned group(s): 1 ended on SIGTERM, 0 on SIGKILL, 0 survived; 1 stale record(s) dropped, 0 kept\n".to_string(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in\n{text}");
    }
    assert!(!text.contains(&format!("ending orphaned process group {b} ")), "{text}");
    for pid in [a, b] {
        assert!(
            !root.join(format!("children/{pid}.json")).exists(),
            "the record of {pid} stays"
        );
    }
    first.stop();
}

/// One `-serve` on `<dir>/rpc.sock` with its log in `<dir>/daemon.log`,
/// stopped again at once; returns the log.
fn serve_once_in(dir: &Path) -> String {
    use std::io::{Read, Write};
    let socket = dir.join("rpc.sock");
    let token = dir.join("token");
    std::fs::write(&token, format!("{}\n", common::TOKEN)).unwrap();
    let log = dir.join("daemon.log");
    let mut command = common::serve_command(&socket, &token);
    command.stdin(std::process::Stdio::null());
    common::launch_to_banner(command, &log);
    let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let pid = common::peer_pid(&s);
    s.write_all(common::request_line("9", "server.shutdown", None, common::TOKEN).as_bytes())
        .unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    if let Some(pid) = pid {
        assert!(common::wait_until(std::time::Duration::from_secs(10), || pid_gone(pid)));
    }
    std::fs::read_to_string(&log).unwrap()
}

/// An odd result of the second audit: another user who pre-creates
/// `children/` in a shared run dir switches child records off (as it
/// should), and the log line said "not a directory". It says what is
/// there.
#[test]
fn a_children_dir_that_is_not_ours_is_named_for_what_it_is() {
    let scratch = tempfile::tempdir().unwrap();
    // A plain file in its place, then (as root) another user's directory.
    std::fs::write(scratch.path().join("children"), "").unwrap();
    let log = serve_once_in(scratch.path());
    assert!(log.contains("children is not a directory; recording nothing"), "{log}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // only root can make a directory another user's
    }
    std::fs::remove_file(scratch.path().join("children")).unwrap();
    std::fs::create_dir(scratch.path().join("children")).unwrap();
    std::os::unix::fs::chown(scratch.path().join("children"), Some(65534), None).unwrap();
    let log = serve_once_in(scratch.path());
    assert!(
        log.contains("children belongs to uid 65534, not to this daemon's user; recording nothing"),
        "{log}"
    );
    assert!(!log.contains("is not a directory"), "{log}");
}
