//! A hold on one process that its pid number cannot outlive: every signal
//! remora sends to a process it did not just spawn and still hold
//! unreaped (a predecessor daemon, a dead daemon's orphans, git's group
//! after a timeout) goes through a [`PidRef`], taken while the process is
//! known and checked (see [`PidRef::confirm`]), so it reaches that process
//! (or the group it leads) or nobody, never whatever holds the number
//! later. A number is reused by whatever the kernel hands it to next, a
//! thread included: `kill(2)` of a thread's id ends the whole process that
//! thread belongs to.
//!
//! - **Linux:** a pidfd (`pidfd_open`, 5.3). `pidfd_send_signal` reaches
//!   exactly its process; with `PIDFD_SIGNAL_PROCESS_GROUP` (6.9) exactly
//!   the group that process leads, by the leader's own `struct pid`, even
//!   after the leader was reaped. Where the kernel refuses that flag, the
//!   group is signalled by `kill(-pgid)` only while its leader is still
//!   present (running, or a zombie nobody reaped): a present leader holds
//!   the number, so no other group can bear it. Without `pidfd_open` (an
//!   older kernel, a seccomp filter) the start time stands in, as on macOS.
//! - **macOS:** no pidfd. The start time (`proc_pidinfo`) read when the
//!   hold is taken is compared again just before each signal.
//!
//! What is left, where no pidfd carries the signal: between that last
//! comparison and `kill(2)` the process would have to exit, be reaped,
//! and its number come round to a new process (and, for a group, a new
//! group leader) — a whole lap of the pid space in microseconds.
//!
//! A group whose leader is gone, where no pidfd names it (before Linux
//! 6.9, macOS), is [`GroupError::Unproven`]: the caller either never lets
//! it come to that (it kills its own child's group before reaping the
//! leader, whose zombie holds the id) or proves each member on its own
//! and signals it through a hold of its own (the orphan reap).
//!
//! Public (`remora::sys::process::PidRef`) for the test suite and the
//! harness, which signal processes they found by number the same way.

use super::platform;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// A hold on the process that had a given pid when it was taken.
pub struct PidRef {
    pid: i32,
    pin: Pin,
}

enum Pin {
    /// A pidfd (Linux).
    Fd(OwnedFd),
    /// The start time read when the hold was taken (macOS; Linux without
    /// `pidfd_open`).
    Start(u64),
}

/// Why a group signal was not sent.
#[derive(Debug)]
pub enum GroupError {
    /// The group has no member left (ESRCH).
    Empty,
    /// The leader is gone and this system cannot name the group by
    /// anything but its number, which may belong to another group by now.
    Unproven,
    /// Any other refusal (EPERM: a member of another user).
    Os(io::Error),
}

/// Cleared the first time the kernel refuses `PIDFD_SIGNAL_PROCESS_GROUP`
/// (before Linux 6.9), so that it is asked once per process.
static GROUP_BY_PIDFD: AtomicBool = AtomicBool::new(true);

#[cfg(test)]
thread_local! {
    /// Set by [`without_group_pidfd`]: this thread's group signals take
    /// the path of a kernel without `PIDFD_SIGNAL_PROCESS_GROUP`.
    static NO_GROUP_PIDFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` as if the kernel refused `PIDFD_SIGNAL_PROCESS_GROUP` (Linux
/// before 6.9), on this thread only: a test of a sender's fallback on a
/// kernel that has the flag.
#[cfg(test)]
pub(crate) fn without_group_pidfd<T>(f: impl FnOnce() -> T) -> T {
    NO_GROUP_PIDFD.with(|flag| flag.set(true));
    let out = f();
    NO_GROUP_PIDFD.with(|flag| flag.set(false));
    out
}

/// Whether group signals may go by pidfd (see [`GROUP_BY_PIDFD`]).
fn group_by_pidfd() -> bool {
    #[cfg(test)]
    if NO_GROUP_PIDFD.with(std::cell::Cell::get) {
        return false;
    }
    GROUP_BY_PIDFD.load(Ordering::Relaxed)
}

impl PidRef {
    /// A hold on the process that now has `pid`; `None` when there is
    /// none (or `pid` is 0, 1 or negative, which address groups or init).
    /// Take it while the caller knows the process is the one it means
    /// (its own unreaped child), or check it afterwards with
    /// [`PidRef::confirm`].
    pub fn open(pid: i32) -> Option<PidRef> {
        if pid < 2 {
            return None;
        }
        if let Some(fd) = platform::open_pidfd(pid) {
            return Some(PidRef { pid, pin: Pin::Fd(fd) });
        }
        Self::by_start_time(pid)
    }

    /// The start-time hold alone (the fallback; tests check it directly).
    fn by_start_time(pid: i32) -> Option<PidRef> {
        let start = platform::start_time(pid)?;
        Some(PidRef {
            pid,
            pin: Pin::Start(start),
        })
    }

    /// The number the process had when the hold was taken.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process still holds its number: running, or a zombie
    /// not reaped yet.
    pub fn present(&self) -> bool {
        match &self.pin {
            Pin::Fd(fd) => platform::pidfd_signal(fd, 0, false).is_ok(),
            Pin::Start(start) => platform::start_time(self.pid) == Some(*start),
        }
    }

    /// Whether the process has ended: a zombie not reaped yet, or gone.
    pub fn exited(&self) -> bool {
        match &self.pin {
            // A pidfd turns readable once its process has exited.
            Pin::Fd(fd) => {
                let mut pfd = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(fd),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, zero timeout: never blocks.
                unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
            }
            // Present before and after the state was read: the zombie
            // read was this process.
            Pin::Start(_) => !(self.present() && !platform::zombie(self.pid) && self.present()),
        }
    }

    /// Runs `check`, which inspects the process by its number (`/proc`,
    /// `/proc/locks`), and keeps its verdict only if the process was
    /// present before and after it: a present process holds its number,
    /// so what `check` read was this process and no other.
    pub fn confirm<T>(&self, check: impl FnOnce(i32) -> Result<T, String>) -> Result<T, String> {
        if !self.present() {
            return Err(format!("pid {} has ended", self.pid));
        }
        let verdict = check(self.pid)?;
        if !self.present() {
            return Err(format!("pid {} ended while it was being checked", self.pid));
        }
        Ok(verdict)
    }

    /// Sends `signal` to the process (not its group). ESRCH once it has
    /// been reaped.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        match &self.pin {
            Pin::Fd(fd) => platform::pidfd_signal(fd, signal, false),
            Pin::Start(_) if self.present() => kill(self.pid, signal),
            Pin::Start(_) => Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    }

    /// Sends `signal` to the process group this process leads (its pid
    /// is the group's id), see the module comment for how each system
    /// proves the group is still that one. Signal 0 asks whether the
    /// group still has a member.
    pub fn signal_group(&self, signal: i32) -> Result<(), GroupError> {
        if let Pin::Fd(fd) = &self.pin {
            if group_by_pidfd() {
                match platform::pidfd_signal(fd, signal, true) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        GROUP_BY_PIDFD.store(false, Ordering::Relaxed);
                    }
                    Err(e) => return Err(group_error(e)),
                }
            }
        }
        if !self.present() {
            return Err(GroupError::Unproven);
        }
        kill(-self.pid, signal).map_err(group_error)
    }
}

fn group_error(e: io::Error) -> GroupError {
    if e.raw_os_error() == Some(libc::ESRCH) {
        GroupError::Empty
    } else {
        GroupError::Os(e)
    }
}

fn kill(pid: i32, signal: i32) -> io::Result<()> {
    // SAFETY: plain syscall; the callers proved the target just before.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// `sleep 60` leading a process group of its own.
    fn leader() -> Child {
        Command::new("sleep").arg("60").process_group(0).spawn().unwrap()
    }

    /// Both kinds of hold on `pid` (just the start time where there is no
    /// pidfd).
    fn holds(pid: i32) -> Vec<PidRef> {
        let mut holds = vec![PidRef::by_start_time(pid).expect("start time")];
        holds.extend(PidRef::open(pid).filter(|r| matches!(r.pin, Pin::Fd(_))));
        holds
    }

    #[test]
    fn a_hold_signals_its_process_and_nothing_once_it_is_reaped() {
        let mut child = leader();
        let pid = child.id() as i32;
        let refs = holds(pid);
        for r in &refs {
            assert!(r.present());
            assert_eq!(r.confirm(Ok), Ok(pid));
            r.signal(0).unwrap();
            r.signal_group(0).unwrap();
        }
        assert!(PidRef::open(0).is_none() && PidRef::open(1).is_none() && PidRef::open(-pid).is_none());
        refs[0].signal(libc::SIGKILL).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        for r in &refs {
            assert!(!r.present());
            assert!(r.confirm(|_| Ok(())).unwrap_err().contains("has ended"));
            assert_eq!(r.signal(0).unwrap_err().raw_os_error(), Some(libc::ESRCH));
            assert!(matches!(
                r.signal_group(0),
                Err(GroupError::Empty | GroupError::Unproven)
            ));
        }
    }

    /// `exited` says a zombie has ended while `present` still says it
    /// holds its number, for both kinds of hold; after the reap, both.
    #[test]
    fn a_zombie_has_exited_yet_is_present_until_reaped() {
        let mut child = leader();
        let pid = child.id() as i32;
        let refs = holds(pid);
        for r in &refs {
            assert!(!r.exited() && r.present());
        }
        child.kill().unwrap();
        assert!(super::super::exited_within(pid, std::time::Duration::from_secs(10)));
        for r in &refs {
            assert!(r.exited() && r.present(), "a zombie");
        }
        child.wait().unwrap();
        for r in &refs {
            assert!(r.exited() && !r.present(), "reaped");
        }
    }

    /// A group outlives its reaped leader while a member is left: a
    /// pidfd still reaches it where the kernel names groups by pidfd;
    /// anywhere else the group is unproven and nothing is sent.
    #[test]
    fn a_group_whose_leader_was_reaped_is_reached_only_through_a_pidfd() {
        let mut shell = Command::new("sh")
            .args(["-c", "sleep 60 </dev/null >/dev/null 2>&1 & echo $!"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = shell.id() as i32;
        let refs = holds(pid);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(shell.stdout.take().unwrap()), &mut line).unwrap();
        let member: i32 = line.trim().parse().unwrap();
        assert!(shell.wait().unwrap().success());
        // SAFETY: getpgid only reads.
        let pgid = unsafe { libc::getpgid(member) };
        assert_eq!(pgid, pid, "the member is in the reaped leader's group");
        assert!(matches!(refs[0].signal_group(libc::SIGKILL), Err(GroupError::Unproven)));
        let by_pidfd = refs.get(1).map(|r| r.signal_group(libc::SIGKILL));
        match by_pidfd {
            Some(Ok(())) => {
                let gone = (0..1000).any(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    platform::start_time(member).is_none() || zombie(member)
                });
                assert!(gone, "the member got the group's SIGKILL");
            }
            Some(Err(GroupError::Unproven)) | None => {
                // SAFETY: the member is this test's own grandchild, alive.
                unsafe { libc::kill(member, libc::SIGKILL) };
            }
            Some(Err(e)) => panic!("{e:?}"),
        }
    }

    fn zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
    }

    /// A real reuse, planted: in a pid namespace of its own (where
    /// `ns_last_pid` says which number the next process gets), a process
    /// is held, killed and reaped, and a new group leader is made to get
    /// its number. No hold on the first may reach the second, by itself
    /// or by group. Skips where no pid namespace can be made.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_hold_never_signals_the_process_that_got_the_number_after_it() {
        pidns::run("sys::process::pidref::tests::planted_reuse_helper", &[]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "runs only inside the pid namespace its parent test makes"]
    fn planted_reuse_helper() {
        if !pidns::entered() {
            return;
        }
        let mut first = leader();
        let number = first.id() as i32;
        let refs = holds(number);
        assert_eq!(refs.len(), 2, "a pidfd and a start time");
        first.kill().unwrap();
        first.wait().unwrap();
        // A clock tick later than the first, so its start time differs too.
        let first_start = match refs[0].pin {
            Pin::Start(start) => Some(start),
            Pin::Fd(_) => None,
        };
        let mut planted = pidns::plant(number, || platform::start_time(number) != first_start);
        for r in &refs {
            assert!(!r.present());
            assert!(r.confirm(|_| Ok(())).is_err());
            assert!(r.signal(libc::SIGKILL).is_err());
            assert!(r.signal_group(libc::SIGKILL).is_err());
        }
        assert!(
            !pidns::got_sigkill(&mut planted),
            "the process now at {number} was signalled"
        );
        planted.kill().unwrap();
        planted.wait().unwrap();
    }
}

/// Test support: planting a reused pid for real. A test runs a helper
/// test of this same binary as the first process of a fresh pid
/// namespace ([`pidns::run`]); there the helper may choose the number the
/// next process gets (`/proc/sys/kernel/ns_last_pid`) and so hand a
/// reaped process's pid to a new one ([`pidns::plant`]).
#[cfg(test)]
#[cfg(target_os = "linux")]
pub(crate) mod pidns {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// Set in the copy of the test binary that [`run`] starts.
    const HELPER: &str = "REMORA_PIDNS_HELPER";
    /// Printed by [`entered`]: from there on a failure is the test's.
    const ENTERED: &str = "IN A PID NAMESPACE";

    /// Runs the (ignored) test `name` in a new pid namespace, with `env`,
    /// and fails unless it passed there having planted a pid. Skips,
    /// saying so, where no pid namespace can be made (unless
    /// `REMORA_REQUIRE_ALL_TOOLS` is set).
    pub(crate) fn run(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
        let exe = std::env::current_exe().unwrap();
        let mut failures = Vec::new();
        for prefix in [
            &["--pid", "--fork", "--mount-proc"][..],
            &["--pid", "--fork", "--mount-proc", "--map-root-user"][..],
        ] {
            let out = Command::new("unshare")
                .args(prefix)
                .arg(&exe)
                .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
                .env(HELPER, "1")
                .envs(env.iter().copied())
                .output();
            let out = match out {
                Ok(out) => out,
                Err(e) => {
                    failures.push(format!("cannot run unshare: {e}"));
                    break;
                }
            };
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if text.contains(ENTERED) {
                assert!(
                    out.status.success() && text.contains("PLANTED") && text.contains("1 passed"),
                    "{text}"
                );
                return;
            }
            failures.push(format!("unshare {}: {}", prefix.join(" "), text.trim()));
        }
        let why = failures.join("; ");
        assert!(
            std::env::var("REMORA_REQUIRE_ALL_TOOLS").map_or(true, |v| v.is_empty() || v == "0"),
            "REMORA_REQUIRE_ALL_TOOLS is set, and no pid namespace could be made: {why}"
        );
        eprintln!("SKIPPED {name}: {why}");
    }

    /// Whether this is the copy [`run`] started, as the first process of
    /// its own pid namespace, able to choose the next pid. The helper
    /// returns at once when not.
    pub(crate) fn entered() -> bool {
        if std::env::var_os(HELPER).is_none() {
            return false;
        }
        // Only a new namespace's init is pid 1, and only there may this
        // process steer the next pid.
        if std::process::id() != 1 || std::fs::write("/proc/sys/kernel/ns_last_pid", "1").is_err() {
            return false;
        }
        println!("{ENTERED}");
        true
    }

    /// Starts `sleep 60`, leading a group of its own, as pid `number`
    /// (free by now), such that `also` holds once it runs; prints
    /// `PLANTED`. Retries while another process takes the number first.
    pub(crate) fn plant(number: i32, also: impl FnMut() -> bool) -> Child {
        plant_with(number, &[], also)
    }

    /// [`plant`], with `env` added to the planted process's environment.
    pub(crate) fn plant_with(number: i32, env: &[(&str, &str)], mut also: impl FnMut() -> bool) -> Child {
        for tries in 1..1000 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (number - 1).to_string()).unwrap();
            let mut planted = Command::new("sleep")
                .arg("60")
                .envs(env.iter().copied())
                .process_group(0)
                .spawn()
                .unwrap();
            // The exec is done when spawn returns, but the kernel sets the
            // new image's environment bounds a moment later: until then
            // `/proc/<pid>/environ` reads empty, and a test reading the
            // plant's stamp would see none.
            if planted.id() as i32 == number && environ_is_set(number) && also() {
                // SAFETY: getpgid only reads.
                assert_eq!(unsafe { libc::getpgid(number) }, number, "it leads group {number}");
                println!("PLANTED pid {number} after {tries} tries");
                return planted;
            }
            planted.kill().unwrap();
            planted.wait().unwrap();
        }
        panic!("could not plant pid {number}");
    }

    /// Waits (a bounded poll of `/proc`, the only signal there is) for the
    /// freshly exec'd `pid` to show a non-empty environment.
    pub(crate) fn environ_is_set(pid: i32) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| !e.is_empty()) {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Whether `child` (never reaped by anyone but its holder) has been
    /// sent SIGKILL: dead, or dying with it pending. kill(2) marks it
    /// pending before returning, so right after a kill this is exact, with
    /// no wait for the death itself.
    pub(crate) fn got_sigkill(child: &mut Child) -> bool {
        if !matches!(child.try_wait(), Ok(None)) {
            return true;
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let kill_bit = 1u64 << (libc::SIGKILL - 1);
        status.lines().any(|line| match line.split_once(':') {
            Some(("State", v)) => matches!(v.trim_start().chars().next(), Some('Z' | 'X')),
            Some(("SigPnd" | "ShdPnd", v)) => u64::from_str_radix(v.trim(), 16).is_ok_and(|m| m & kill_bit != 0),
            _ => false,
        })
    }
}
