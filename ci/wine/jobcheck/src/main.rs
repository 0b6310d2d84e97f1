//! The Job Object test (issue 43), under Wine: `daemon/src/sys/windows/
//! process/`, compiled as it is, starts this same executable as the
//! child, which starts a second copy as a long-sleeping grandchild.
//! Checked: the pipes, exit code and environment order; a tree kill
//! ends the grandchild; a direct kill leaves it in the job; dropping the
//! job handle ends the tree; and a daemon that dies (its handles closed
//! by the system) takes the tree with it. Exits non-zero on any failure.
//! Run by `ci/wine-smoke`.

#[allow(dead_code, unused_imports)]
#[path = "../../../../daemon/src/sys/windows/process/mod.rs"]
mod process;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Write};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, WaitForSingleObject, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
};

/// Every wait of the test is bounded by this.
const LIMIT: Duration = Duration::from_secs(20);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        None => driver(),
        Some("child") => child(args.get(2).map(String::as_str)),
        Some("sleep") => std::thread::sleep(Duration::from_secs(100)),
        Some("daemon") => daemon(),
        Some(other) => panic!("unknown mode {other}"),
    }
}

// ------------------------------------------------------------ the children

/// `child echo`: a line from stdin back on stdout, a line on stderr, the
/// order of its `JOBCHECK_*` variables and its arguments, exit 7.
/// `child tree`: starts a sleeping grandchild (stdio not inherited, so
/// only the job can end it), says its pid, sleeps.
fn child(mode: Option<&str>) {
    match mode {
        Some("echo") => {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).expect("stdin");
            let names: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .filter(|k| k.starts_with("JOBCHECK_"))
                .collect();
            let args: Vec<String> = std::env::args().skip(3).collect();
            let mut out = std::io::stdout().lock();
            write!(out, "echo {line}env {}\nargs {args:?}\n", names.join(",")).expect("stdout");
            out.flush().expect("flush");
            eprintln!("to stderr");
            std::process::exit(7);
        }
        Some("tree") => {
            let exe = std::env::current_exe().expect("own path");
            // Never waited for: only the job ends it, which is the test.
            #[allow(clippy::zombie_processes)]
            let grandchild = std::process::Command::new(exe)
                .arg("sleep")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("start the grandchild");
            println!("grandchild {}", grandchild.id());
            std::io::stdout().flush().expect("flush");
            std::thread::sleep(Duration::from_secs(100));
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

/// `daemon`: what the daemon does, in a process of its own: starts
/// `child tree` in a job, says both pids, and waits to be killed.
fn daemon() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (started, grandchild) = start_tree().await;
        println!("child {} grandchild {grandchild}", started.child.pid());
        std::io::stdout().flush().expect("flush");
        tokio::time::sleep(Duration::from_secs(100)).await;
        drop(started);
    });
}

// ------------------------------------------------------------ helpers

fn os(s: &str) -> OsString {
    OsString::from(s)
}

/// A request for `jobcheck.exe child <mode> <extra...>` with `env`.
fn run_child<'a>(exe: &'a OsStr, argv: &'a [&'a OsStr], env: &'a [(OsString, OsString)]) -> process::SpawnRequest<'a> {
    process::SpawnRequest {
        program: exe,
        cwd: OsStr::new(""),
        argv,
        env,
    }
}

/// The environment a child needs to start at all (Windows and Wine look
/// up system DLLs through these).
fn base_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            let k = k.to_string_lossy().to_ascii_uppercase();
            matches!(k.as_str(), "SYSTEMROOT" | "WINDIR" | "PATH" | "TEMP" | "TMP")
        })
        .collect()
}

/// Starts `child tree` through the handle API and reads the grandchild's
/// pid from its stdout pipe.
async fn start_tree() -> (process::Spawned, u32) {
    let exe = std::env::current_exe().expect("own path");
    let argv = [OsStr::new("jobcheck"), OsStr::new("child"), OsStr::new("tree")];
    let env = base_env();
    let mut started = process::spawn(&run_child(exe.as_os_str(), &argv, &env)).expect("spawn child tree");
    let pid = read_grandchild(&mut started.stdout).await;
    (started, pid)
}

async fn read_grandchild(stdout: &mut tokio::net::windows::named_pipe::NamedPipeServer) -> u32 {
    let mut line = String::new();
    tokio::time::timeout(LIMIT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("the child said its grandchild in time")
        .expect("read the child's stdout");
    line.trim()
        .strip_prefix("grandchild ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a grandchild line: {line:?}"))
}

/// A handle to watch process `pid` by (synchronize and query only).
struct Watch(HANDLE);

impl Watch {
    fn open(pid: u32) -> Watch {
        // SAFETY: plain call; the handle is checked and closed on drop.
        let h = unsafe { OpenProcess(PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        assert!(!h.is_null(), "open process {pid}: {}", std::io::Error::last_os_error());
        Watch(h)
    }

    fn alive(&self) -> bool {
        // SAFETY: a live handle.
        unsafe { WaitForSingleObject(self.0, 0) == WAIT_TIMEOUT }
    }

    /// Whether it ends within the test's limit; its exit code if so.
    fn ends(&self) -> Option<u32> {
        // SAFETY: a live handle.
        if unsafe { WaitForSingleObject(self.0, LIMIT.as_millis() as u32) } != WAIT_OBJECT_0 {
            return None;
        }
        let mut code = 0;
        // SAFETY: writes one u32.
        unsafe { GetExitCodeProcess(self.0, &mut code) };
        Some(code)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: a handle we own.
        unsafe { CloseHandle(self.0) };
    }
}

fn say(line: &str) {
    println!("jobcheck: {line}");
}

// ------------------------------------------------------------ the cases

fn driver() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        pipes_exit_code_and_environment().await;
        tree_kill().await;
        direct_kill().await;
        dropped_job().await;
    });
    daemon_exit();
    say("all cases passed");
}

/// stdin, stdout and stderr through the pipes, the exit code, the
/// environment block in the given order (D23), a quoted argument.
async fn pipes_exit_code_and_environment() {
    let exe = std::env::current_exe().expect("own path");
    let argv = [
        OsStr::new("jobcheck"),
        OsStr::new("child"),
        OsStr::new("echo"),
        OsStr::new("two words"),
        OsStr::new(r#"a "quote""#),
    ];
    let mut env = vec![(os("JOBCHECK_ZULU"), os("1"))];
    env.extend(base_env());
    env.push((os("JOBCHECK_ALPHA"), os("2")));
    env.push((os("JOBCHECK_MIKE"), os("3")));
    let mut started = process::start_child(&run_child(exe.as_os_str(), &argv, &env)).expect("spawn child echo");
    started.stdin.write_all(b"hello\n").await.expect("write stdin");
    let mut out = String::new();
    let mut err = String::new();
    tokio::time::timeout(LIMIT, async {
        started.stdout.read_to_string(&mut out).await.expect("read stdout");
        started.stderr.read_to_string(&mut err).await.expect("read stderr");
    })
    .await
    .expect("stdout and stderr reached EOF");
    let status = tokio::time::timeout(LIMIT, process::wait_exit(started.pid))
        .await
        .expect("exit in time")
        .expect("wait");
    let out = out.replace('\r', "");
    assert_eq!(
        out,
        "echo hello\nenv JOBCHECK_ZULU,JOBCHECK_ALPHA,JOBCHECK_MIKE\nargs [\"two words\", \"a \\\"quote\\\"\"]\n"
    );
    assert_eq!(err.trim_end(), "to stderr");
    assert_eq!(status, process::ExitStatus { code: 7, signal: None });
    assert!(process::reap(started.pid), "an exited child is forgotten");
    assert!(process::active_processes(started.pid).is_none());
    say(&format!(
        "pipes: stdin echoed, stderr read, exit code {}, environment order kept (ZULU,ALPHA,MIKE), arguments quoted",
        status.code
    ));
}

/// `signal_group` (a tree kill) ends the child and its grandchild.
async fn tree_kill() {
    let exe = std::env::current_exe().expect("own path");
    let argv = [OsStr::new("jobcheck"), OsStr::new("child"), OsStr::new("tree")];
    let env = base_env();
    let mut started = process::start_child(&run_child(exe.as_os_str(), &argv, &env)).expect("spawn child tree");
    let pid = started.pid;
    let grandchild_pid = read_grandchild(&mut started.stdout).await;
    let grandchild = Watch::open(grandchild_pid);
    assert!(grandchild.alive(), "the grandchild runs");
    // The child, its grandchild, and the console host the system starts
    // for a console child without a window, which joins the job too.
    let active = process::active_processes(pid).expect("query the job");
    assert!(active >= 2, "child and grandchild in the job: {active}");
    say(&format!(
        "tree kill: child {pid}, grandchild {grandchild_pid} running, job holds {active} processes (with the console host)"
    ));
    process::signal_group(pid, process::SIGKILL);
    let status = tokio::time::timeout(LIMIT, process::wait_exit(pid))
        .await
        .expect("exit in time")
        .expect("wait");
    assert_eq!(status, process::ExitStatus { code: 1, signal: None });
    assert_eq!(grandchild.ends(), Some(1), "the grandchild ended with the tree");
    assert_eq!(process::active_processes(pid), Some(0));
    let mut rest = Vec::new();
    let eof = tokio::time::timeout(LIMIT, started.stdout.read_to_end(&mut rest)).await;
    assert!(matches!(eof, Ok(Ok(0))), "stdout reached EOF: {eof:?}");
    assert!(process::reap(pid));
    say(&format!(
        "tree kill: child exit code {}, grandchild {grandchild_pid} gone (exit code 1), job active 0, stdout EOF",
        status.code
    ));
}

/// `signal_child` ends the child only; the grandchild stays in the job
/// until the tree is killed.
async fn direct_kill() {
    let (started, grandchild_pid) = start_tree().await;
    let grandchild = Watch::open(grandchild_pid);
    started.child.kill_child().expect("kill the child");
    let status = tokio::time::timeout(LIMIT, started.child.wait())
        .await
        .expect("exit in time")
        .expect("wait");
    assert_eq!(status.code, 1);
    assert!(grandchild.alive(), "a direct kill leaves the grandchild");
    let active = started.child.active_processes().expect("query");
    assert!(active >= 1, "the grandchild is still in the job");
    started.child.kill_tree().expect("kill the tree");
    assert_eq!(grandchild.ends(), Some(1));
    say(&format!(
        "direct kill: child exit code {}, grandchild {grandchild_pid} left running ({active} in the job), then ended by the tree kill",
        status.code
    ));
}

/// Dropping the only job handle ends the whole tree (KILL_ON_JOB_CLOSE).
async fn dropped_job() {
    let (started, grandchild_pid) = start_tree().await;
    let child = Watch::open(started.child.pid());
    let grandchild = Watch::open(grandchild_pid);
    assert!(child.alive() && grandchild.alive());
    let child_pid = started.child.pid();
    drop(started);
    assert!(child.ends().is_some(), "the child ended with its job handle");
    assert!(grandchild.ends().is_some(), "the grandchild ended with its job handle");
    say(&format!(
        "job handle dropped: child {child_pid} and grandchild {grandchild_pid} gone"
    ));
}

/// A daemon process that dies (here by `TerminateProcess`, as a crash)
/// takes its children's trees: the system closes its job handles.
fn daemon_exit() {
    let exe = std::env::current_exe().expect("own path");
    let mut daemon = std::process::Command::new(exe)
        .arg("daemon")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the daemon copy");
    let mut line = String::new();
    let stdout = daemon.stdout.take().expect("piped");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the daemon's line");
    let pids: Vec<u32> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [child_pid, grandchild_pid] = pids[..] else {
        panic!("not a daemon line: {line:?}");
    };
    let child = Watch::open(child_pid);
    let grandchild = Watch::open(grandchild_pid);
    assert!(child.alive() && grandchild.alive(), "the tree runs under the daemon");
    daemon.kill().expect("kill the daemon");
    daemon.wait().expect("reap the daemon");
    assert!(child.ends().is_some(), "the child ended with the daemon");
    assert!(grandchild.ends().is_some(), "the grandchild ended with the daemon");
    say(&format!(
        "daemon exit: daemon {} killed; its child {child_pid} and grandchild {grandchild_pid} gone",
        daemon.id()
    ));
}
