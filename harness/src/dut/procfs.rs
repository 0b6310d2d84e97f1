//! What the kernel says about a daemon's processes: memory, CPU, state,
//! descriptors and environment from `/proc` (and the machine's load), the peer of a socket, the
//! processes whose command line names a path, and signals to processes
//! found by pid.
//!
//! Every reader answers `None` (or nothing) where there is no `/proc`
//! (macOS), so a figure is missing there rather than wrong; finding
//! processes by command line falls back to `ps`.
//!
//! A process found by its number is signalled only through a hold on it
//! (remora's own `PidRef`: a pidfd on Linux, the start time on macOS),
//! taken before the check that made it ours (its command line, its
//! environment tag) and kept after it: a number reused since the scan,
//! by anything (a thread of the harness itself included), is never
//! signalled (issue 44, item 8).

use remora::sys::process::PidRef;
use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`).
pub(crate) fn status_kib(pid: i32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `VmRSS`: the resident set now.
pub(crate) fn rss_kib(pid: i32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// `VmHWM`: the peak resident set so far.
pub(crate) fn hwm_kib(pid: i32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// CPU seconds process `pid` has used so far, all its threads (those that
/// ended too), user and system, from `/proc/<pid>/stat` (clock-tick
/// resolution, 10 ms on Linux). Its children are not counted.
pub(crate) fn cpu_seconds_of(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // anything: the 14th and 15th of the line (utime, stime) are the 12th
    // and 13th after it.
    let mut after = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let utime: u64 = after.nth(11)?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// The machine's 1-minute load average, from `/proc/loadavg`.
pub(crate) fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The state letter of a `stat` file (`R`, `S`, `T`, `Z`, ...).
fn state_of(stat_path: &str) -> Option<char> {
    let s = std::fs::read_to_string(stat_path).ok()?;
    s.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next())
}

/// The state letter of `pid`.
pub(crate) fn state(pid: i32) -> Option<char> {
    state_of(&format!("/proc/{pid}/stat"))
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    !matches!(state(pid), Some('Z') | Some('X') | None)
}

/// The parent of `pid` when `pid` is a zombie (exited, not yet reaped).
pub(crate) fn zombie_parent(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut f = s.rsplit_once(')')?.1.split_whitespace();
    (f.next()? == "Z").then_some(())?;
    f.next()?.parse().ok()
}

/// Every process as `(pid, parent, state letter)`, from one scan of
/// `/proc/*/stat`; empty without `/proc`.
pub(crate) fn process_table() -> Vec<(i32, i32, char)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter_map(|pid| {
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut f = s.rsplit_once(')')?.1.split_whitespace();
            let state = f.next()?.chars().next()?;
            Some((pid, f.next()?.parse().ok()?, state))
        })
        .collect()
}

/// The zombies (exited, not reaped) among the children of `parents` and
/// their children's children: `(pid, parent)` each.
pub(crate) fn zombies_below(parents: &[i32]) -> Vec<(i32, i32)> {
    let table = process_table();
    let children: std::collections::HashSet<i32> = table
        .iter()
        .filter(|(_, ppid, _)| parents.contains(ppid))
        .map(|(pid, _, _)| *pid)
        .collect();
    table
        .iter()
        .filter(|(_, ppid, st)| *st == 'Z' && (parents.contains(ppid) || children.contains(ppid)))
        .map(|(pid, ppid, _)| (*pid, *ppid))
        .collect()
}

/// Whether every thread of `pid` has stopped (state `T`): a SIGSTOP is
/// delivered asynchronously, and a thread still running on another core
/// can write one more reply.
pub(crate) fn all_threads_stopped(pid: i32) -> bool {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    rd.flatten()
        .all(|t| state_of(&format!("{}/stat", t.path().display())) == Some('T'))
}

/// How many descriptors `pid` holds.
pub(crate) fn fd_count(pid: i32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// What `pid`'s descriptors point at, by kind (`socket`, `pipe`,
/// `anon_inode:[eventpoll]`, a path): the detail a leak report needs.
pub(crate) fn fd_kinds(pid: i32) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    for e in rd.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        // `socket:[12345]` and `pipe:[678]` differ per object; the kind is what matters.
        let kind = match t.split_once(":[") {
            Some((k, _)) if k == "socket" || k == "pipe" => k.to_string(),
            _ => t.into_owned(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// Whether `pid`'s environment holds the `KEY=value` entry `entry`.
pub(crate) fn environ_has(pid: i32, entry: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|c| *c == 0).any(|kv| kv == entry))
        .unwrap_or(false)
}

/// Whether one of `pid`'s arguments is exactly one of `any`.
pub(crate) fn has_arg(pid: i32, any: &[&[u8]]) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|b| *b == 0).any(|a| any.contains(&a)))
        .unwrap_or(false)
}

/// Every pid in `/proc` but this process's; empty without `/proc`.
fn other_pids() -> Option<Vec<i32>> {
    let me = std::process::id() as i32;
    let rd = std::fs::read_dir("/proc").ok()?;
    Some(
        rd.flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
            .filter(|pid| *pid != me)
            .collect(),
    )
}

/// Live processes whose environment holds `entry` (a `KEY=value` entry).
pub(crate) fn pids_with_env(entry: &[u8]) -> Vec<i32> {
    other_pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|pid| environ_has(*pid, entry) && alive(*pid))
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Pids of processes whose command line contains `needle`: from
/// `/proc/<pid>/cmdline` where there is a `/proc`, else (macOS) from `ps`,
/// so the clean-up after each probe still finds what a run left behind.
pub(crate) fn pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let Some(pids) = other_pids() else {
        let me = std::process::id() as i32;
        return ps_pids_mentioning(needle).into_iter().filter(|p| *p != me).collect();
    };
    pids.into_iter()
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| contains(&cmd, needle)))
        .collect()
}

/// `ps` lists every process with its arguments joined by spaces (`ww`: not
/// cut to a terminal's width), which still contains a path that one
/// argument held. Empty when `ps` cannot run.
fn ps_pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let Ok(out) = Command::new("ps").args(["-axww", "-o", "pid=,command="]).output() else {
        return Vec::new();
    };
    out.stdout
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let line = line.trim_ascii_start();
            let end = line.iter().position(|b| !b.is_ascii_digit())?;
            let pid = std::str::from_utf8(&line[..end]).ok()?.parse().ok()?;
            contains(&line[end..], needle).then_some(pid)
        })
        .collect()
}

/// A hold on the process now at `pid`, if `is_it` (which reads it by its
/// number) holds while that process is present before and after the
/// check: what `is_it` read was this process. Signals sent through the
/// hold reach it or nobody.
pub(crate) fn hold_if(pid: i32, is_it: impl FnOnce(i32) -> bool) -> Option<PidRef> {
    let hold = PidRef::open(pid)?;
    hold.confirm(|pid| if is_it(pid) { Ok(()) } else { Err(String::new()) })
        .ok()?;
    Some(hold)
}

/// Sends `sig` to the process at `pid` only if `is_it` proves it the one
/// meant ([`hold_if`]); whether it was sent.
pub(crate) fn signal_if(pid: i32, sig: i32, is_it: impl FnOnce(i32) -> bool) -> bool {
    hold_if(pid, is_it).is_some_and(|hold| hold.signal(sig).is_ok())
}

/// Whether process `pid`'s command line contains `needle` (`ps` where
/// there is no `/proc`).
pub(crate) fn mentions(pid: i32, needle: &[u8]) -> bool {
    if std::path::Path::new("/proc/self").exists() {
        return std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| contains(&cmd, needle));
    }
    Command::new("ps")
        .args(["-ww", "-o", "command=", "-p", &pid.to_string()])
        .output()
        .is_ok_and(|out| contains(&out.stdout, needle))
}

/// SIGKILLs every process whose command line mentions `dir`, each proven
/// to mention it just before its signal.
pub(crate) fn kill_mentioning(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    for pid in pids_mentioning(needle) {
        signal_if(pid, libc::SIGKILL, |pid| mentions(pid, needle));
    }
}

/// SIGKILLs every live process whose environment holds `entry`, each
/// proven to hold it just before its signal; returns the ones found.
pub(crate) fn kill_with_env(entry: &[u8]) -> Vec<i32> {
    let found = pids_with_env(entry);
    for &pid in &found {
        signal_if(pid, libc::SIGKILL, |pid| environ_has(pid, entry));
    }
    found
}

/// The pid of the process at the other end of a Unix socket (Linux).
pub(crate) fn peer_pid(s: &UnixStream) -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `cred`, which
        // is a live, properly sized ucred.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        (rc == 0 && cred.pid > 0).then_some(cred.pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = s;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ps` fallback that macOS relies on, run where it can be: on a
    /// machine without `ps` there is nothing to compare with.
    #[test]
    fn ps_finds_a_process_by_an_argument() {
        if Command::new("ps").arg("-o").arg("pid=").output().is_err() {
            eprintln!("skipping: no ps here");
            return;
        }
        let needle = format!("remora-ps-needle-{}", std::process::id());
        // `read` keeps the shell itself waiting, with no child of its own
        // left behind once it is killed.
        let mut child = Command::new("sh")
            .args(["-c", "read line", &needle])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let found = ps_pids_mentioning(needle.as_bytes());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, [child.id() as i32]);
    }

    /// Issue 44 (item 8): the harness found processes by their tag and
    /// killed the numbers later, whatever held them by then. A process is
    /// found carrying the tag, then becomes another program without it
    /// (the same number, as a reused pid would be): the kill by that
    /// number sends nothing. One still carrying the tag is killed.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_number_found_by_its_tag_is_signalled_only_while_it_still_carries_it() {
        use std::io::Write;
        let tag = format!("HARNESS_PROCFS_KILL_TAG={}", std::process::id());
        let (key, value) = tag.split_once('=').unwrap();
        let spawn = |script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .env(key, value)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        // The first turns into a program without the tag on a line in.
        let mut changed = spawn("read line; exec env -u HARNESS_PROCFS_KILL_TAG sleep 60");
        let mut tagged = spawn("read line");
        let wait_for = |pids: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !pids() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            pids()
        };
        let (a, b) = (changed.id() as i32, tagged.id() as i32);
        assert!(wait_for(&|| {
            let found = pids_with_env(tag.as_bytes());
            found.contains(&a) && found.contains(&b)
        }));
        let found = pids_with_env(tag.as_bytes());
        writeln!(changed.stdin.take().unwrap(), "go").unwrap();
        // It has become `sleep`, without the tag.
        assert!(wait_for(&|| mentions(a, b"sleep") && !environ_has(a, tag.as_bytes())));
        let sent: Vec<bool> = found
            .iter()
            .filter(|p| [a, b].contains(p))
            .map(|&p| signal_if(p, libc::SIGKILL, |p| environ_has(p, tag.as_bytes())))
            .collect();
        let spared = matches!(changed.try_wait(), Ok(None));
        let _ = changed.kill();
        let _ = changed.wait();
        // Its stdin closing ends it, had the kill not.
        drop(tagged.stdin.take());
        let tagged_status = tagged.wait().unwrap();
        assert_eq!(sent.len(), 2, "{found:?}");
        assert!(spared, "the process that no longer carries the tag was signalled");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&tagged_status),
            Some(libc::SIGKILL),
            "the tagged process was not killed"
        );
        assert_eq!(sent.iter().filter(|s| **s).count(), 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn own_figures_are_read_and_a_child_is_found_by_its_arguments() {
        let me = std::process::id() as i32;
        let rss = rss_kib(me);
        assert!(rss.is_some_and(|k| k > 0));
        // Read after the RSS: the peak only grows, so it is at least that.
        assert!(hwm_kib(me) >= rss);
        assert!(fd_count(me).is_some_and(|n| n >= 3));
        assert!(alive(me));
        let needle = format!("dut-procfs-needle-{me}");
        let mut child = Command::new("sh")
            .args(["-c", "read line", &needle])
            .env("DUT_PROCFS_TAG", &needle)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // The shell may not have exec'd yet: wait for its arguments.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !pids_mentioning(needle.as_bytes()).contains(&pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let tag = format!("DUT_PROCFS_TAG={needle}");
        let (mentioning, tagged) = (pids_mentioning(needle.as_bytes()), pids_with_env(tag.as_bytes()));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(mentioning, [pid]);
        assert_eq!(tagged, [pid]);
        assert!(!alive(pid), "reaped");
    }
}
