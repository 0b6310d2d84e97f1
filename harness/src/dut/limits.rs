//! What the machine lets one daemon hold at once, for the runs that put
//! thousands of processes in it (`stress`'s `live-processes`, `bench
//! --scale`): the descriptor limit a daemon needs for N live processes,
//! raised past this process's hard limit where it may be (as root, with
//! `CAP_SYS_RESOURCE`, up to `/proc/sys/fs/nr_open`), and otherwise the N
//! that fits, named with the limit that bounded it (descriptors,
//! `pid_max`, `threads-max`, `RLIMIT_NPROC`). A run never shrinks its N
//! silently: [`Room::bound`] says why and the callers print it.

/// Descriptors the daemon holds per live process: its three pipe ends
/// and the pidfd or child-record descriptor (`ARCHITECTURE.md`,
/// `process/`); four is the bound the daemon documents.
pub(crate) const FDS_PER_PROCESS: u64 = 4;
/// Descriptors the daemon may hold beside its processes: its own files,
/// the spawner helper's socket, the harness's connections.
const RESERVE_FDS: u64 = 1024;
/// Tasks (pids) left to the rest of the machine.
const RESERVE_TASKS: u64 = 1024;

/// The limits that bound how many processes one daemon can hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Machine {
    /// This process's hard `RLIMIT_NOFILE` (what a daemon inherits).
    pub(crate) nofile_hard: u64,
    /// `/proc/sys/fs/nr_open`: no descriptor limit may pass it.
    pub(crate) nr_open: u64,
    /// Whether this process may raise a hard limit (`CAP_SYS_RESOURCE`).
    pub(crate) can_raise: bool,
    /// `pid_max` less the tasks running now.
    pub(crate) pid_room: u64,
    /// `threads-max` less the tasks running now.
    pub(crate) thread_room: u64,
    /// `RLIMIT_NPROC` less the tasks running now, where it applies (not
    /// to root or a holder of `CAP_SYS_RESOURCE`/`CAP_SYS_ADMIN`).
    pub(crate) nproc_room: Option<u64>,
}

/// How many processes a daemon gets, and the limit to start it with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Room {
    /// The processes it gets: what was asked, or fewer.
    pub(crate) n: usize,
    /// The descriptor limit (soft and hard) to start the daemon with;
    /// `None`: the inherited one suffices.
    pub(crate) fd_limit: Option<u64>,
    /// Why `n` is below what was asked (`None` when it is not).
    pub(crate) bound: Option<String>,
}

/// The room for `asked` processes of `per` descriptors each on `m`.
pub(crate) fn plan(asked: usize, per: u64, m: &Machine) -> Room {
    let need = asked as u64 * per + RESERVE_FDS;
    let (fd_limit, fd_room, fd_why) = if need <= m.nofile_hard {
        (None, asked as u64, String::new())
    } else if m.can_raise {
        let limit = need.min(m.nr_open);
        let why = format!("descriptors: /proc/sys/fs/nr_open is {}", m.nr_open);
        (Some(limit), limit.saturating_sub(RESERVE_FDS) / per, why)
    } else {
        let why = format!(
            "descriptors: the hard RLIMIT_NOFILE is {} and this process may not raise it (no CAP_SYS_RESOURCE)",
            m.nofile_hard
        );
        (None, m.nofile_hard.saturating_sub(RESERVE_FDS) / per, why)
    };
    let mut n = asked as u64;
    let mut bound = None;
    let mut cap = |room: u64, why: String| {
        if room < n {
            n = room;
            bound = Some(why);
        }
    };
    cap(fd_room, fd_why);
    cap(m.pid_room, format!("pids: {} free under pid_max", m.pid_room));
    cap(
        m.thread_room,
        format!("tasks: {} free under threads-max", m.thread_room),
    );
    if let Some(r) = m.nproc_room {
        cap(r, format!("processes: {r} free under RLIMIT_NPROC"));
    }
    Room {
        n: n as usize,
        fd_limit,
        bound,
    }
}

impl Room {
    /// `N = n` or `N = n of asked (bounded by …)`: the line a run prints.
    pub(crate) fn describe(&self, asked: usize) -> String {
        match &self.bound {
            None => format!("N = {}", self.n),
            Some(why) => format!("N = {} of {asked} asked (bounded by {why})", self.n),
        }
    }
}

/// A number from a file of `/proc/sys` (0 when it cannot be read).
fn proc_number(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Tasks (processes and threads) running now: `/proc/loadavg`'s
/// `running/total` field.
fn tasks_now() -> u64 {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    s.split_whitespace()
        .nth(3)
        .and_then(|f| f.split_once('/'))
        .and_then(|(_, total)| total.parse().ok())
        .unwrap_or(0)
}

/// Whether this process holds capability `bit` (its effective set,
/// `CapEff` of `/proc/self/status`).
fn has_capability(bit: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_RESOURCE: u32 = 24;

/// Which limit [`getrlimit`] reads (the libc type of a resource differs
/// between platforms).
#[derive(Clone, Copy)]
enum Limit {
    Files,
    Processes,
}

fn getrlimit(which: Limit) -> Option<libc::rlimit> {
    let resource = match which {
        Limit::Files => libc::RLIMIT_NOFILE,
        Limit::Processes => libc::RLIMIT_NPROC,
    };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    (unsafe { libc::getrlimit(resource, &mut lim) } == 0).then_some(lim)
}

/// This machine's limits, read now.
pub(crate) fn machine() -> Machine {
    let tasks = tasks_now();
    let room = |max: u64| max.saturating_sub(tasks + RESERVE_TASKS);
    let privileged = has_capability(CAP_SYS_RESOURCE) || has_capability(CAP_SYS_ADMIN);
    let nproc_room = getrlimit(Limit::Processes)
        .filter(|l| l.rlim_cur != libc::RLIM_INFINITY && !privileged)
        .map(|l| room(l.rlim_cur));
    Machine {
        nofile_hard: getrlimit(Limit::Files).map_or(1024, |l| l.rlim_max),
        nr_open: proc_number("/proc/sys/fs/nr_open").max(1024),
        can_raise: has_capability(CAP_SYS_RESOURCE),
        pid_room: room(proc_number("/proc/sys/kernel/pid_max")),
        thread_room: room(proc_number("/proc/sys/kernel/threads-max")),
        nproc_room,
    }
}

/// The room for `asked` processes of `per` descriptors each here.
pub(crate) fn room_for(asked: usize, per: u64) -> Room {
    plan(asked, per, &machine())
}

/// Raises this process's own descriptor limit to `want` (soft, and hard
/// where it may: up to `nr_open`), as far as it goes; returns the soft
/// limit it has afterwards. For a run that itself holds thousands of
/// children (the bench's fork/exec floor: three pipe ends each).
pub(crate) fn raise_own(want: u64) -> u64 {
    let Some(mut lim) = getrlimit(Limit::Files) else {
        return 0;
    };
    if lim.rlim_cur >= want {
        return lim.rlim_cur;
    }
    let m = machine();
    if want > lim.rlim_max && m.can_raise {
        lim.rlim_max = want.min(m.nr_open);
    }
    lim.rlim_cur = want.min(lim.rlim_max);
    // SAFETY: setrlimit reads the struct; a refusal leaves the limit as it was.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return getrlimit(Limit::Files).map_or(0, |l| l.rlim_cur);
    }
    lim.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roomy() -> Machine {
        Machine {
            nofile_hard: 20_000,
            nr_open: 1 << 20,
            can_raise: true,
            pid_room: 30_000,
            thread_room: 190_000,
            nproc_room: None,
        }
    }

    #[test]
    fn a_privileged_run_raises_the_limit_and_keeps_its_n() {
        let r = plan(10_000, 4, &roomy());
        assert_eq!(r.n, 10_000);
        assert_eq!(r.fd_limit, Some(41_024));
        assert_eq!(r.bound, None);
        assert_eq!(r.describe(10_000), "N = 10000");
        // Within the inherited limit nothing is changed.
        assert_eq!(plan(1000, 4, &roomy()).fd_limit, None);
    }

    #[test]
    fn an_unprivileged_run_shrinks_n_and_says_why() {
        let m = Machine {
            can_raise: false,
            ..roomy()
        };
        let r = plan(10_000, 4, &m);
        assert_eq!(r.n, (20_000 - 1024) / 4);
        assert_eq!(r.fd_limit, None);
        let line = r.describe(10_000);
        assert!(
            line.starts_with("N = 4744 of 10000 asked (bounded by descriptors: the hard RLIMIT_NOFILE is 20000"),
            "{line}"
        );
    }

    #[test]
    fn nr_open_pids_and_nproc_bound_n_too() {
        let capped = Machine {
            nr_open: 9_024,
            ..roomy()
        };
        let r = plan(10_000, 4, &capped);
        assert_eq!((r.n, r.fd_limit), (2_000, Some(9_024)));
        assert!(r.bound.unwrap().contains("nr_open is 9024"));
        let pids = Machine {
            pid_room: 3_000,
            ..roomy()
        };
        let r = plan(10_000, 4, &pids);
        assert_eq!(r.n, 3_000);
        assert!(r.bound.unwrap().contains("pid_max"));
        let nproc = Machine {
            nproc_room: Some(500),
            ..roomy()
        };
        assert!(plan(10_000, 4, &nproc).bound.unwrap().contains("RLIMIT_NPROC"));
    }
}
