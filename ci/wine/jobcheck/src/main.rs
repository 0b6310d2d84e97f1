//! The Job Object test (issue 43), under Wine: `daemon/src/sys/windows/
//! process/`, compiled as it is, starts this same executable as the
//! child, which starts a second copy as a long-sleeping grandchild.
//! Checked: the pipes, exit code and environment order; a tree kill
//! ends the grandchild; a direct kill leaves it in the job; dropping the
//! job handle ends the tree; and a daemon that dies (its handles closed
//! by the system) takes the tree with it. Exits non-zero on any failure.
//! `jobcheck rpc <rpc.pipe> <token> kill|shutdown` is the same test
//! through the protocol, against a running `remora.exe -serve
//! -listen-pipe`: `process.spawn` of `jobcheck child tree`, then
//! `process.kill` `KILL` (or `server.shutdown`), and the grandchild must
//! be gone. Run by `ci/wine-smoke`.

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
        Some("rpc") if args.len() == 5 => rpc(&args[2], &args[3], &args[4]),
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

// ------------------------------------------------------------ through remora.exe

/// `rpc <rpc.pipe> <token> kill|shutdown`: over the daemon's pipe,
/// `process.spawn` `jobcheck child tree` (with `wantPid`), read the
/// grandchild's pid from its stdout frames, then end the tree with
/// `process.kill` `KILL` or with `server.shutdown`, and check the child
/// and the grandchild both end.
fn rpc(pipe_file: &str, token: &str, how: &str) {
    assert!(matches!(how, "kill" | "shutdown"), "rpc: kill or shutdown, not {how}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let name = std::fs::read_to_string(pipe_file).expect("read rpc.pipe");
        let client = tokio::net::windows::named_pipe::ClientOptions::new()
            .open(name.trim())
            .expect("open the daemon's pipe");
        let (read, mut write) = tokio::io::split(client);
        let mut lines = BufReader::new(read).lines();
        let exe = std::env::current_exe().expect("own path");
        let exe = exe.to_str().expect("a UTF-8 path").replace('\\', "\\\\");
        let spawn = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":{{"id":"tree","command":"{exe}","args":["child","tree"],"wantPid":true}},"auth":"{token}"}}"#
        );
        write.write_all(format!("{spawn}\n").as_bytes()).await.expect("send spawn");
        let mut child_pid = None;
        let mut out = Vec::new();
        let grandchild_pid = loop {
            let line = tokio::time::timeout(LIMIT, lines.next_line())
                .await
                .expect("the daemon answered in time")
                .expect("read the pipe")
                .expect("the pipe stayed open");
            if line.starts_with(r#"{"jsonrpc":"2.0","id":1,"#) {
                assert!(line.contains(r#""success":true"#), "process.spawn answered {line}");
                child_pid = Some(number_after(&line, r#""pid":"#).expect("a pid in the answer"));
            } else if line.contains(r#""processId":"tree","stream":"stdout""#) {
                let data = line.split(r#""data":""#).nth(1).and_then(|d| d.split('"').next()).unwrap_or("");
                out.extend(base64(data));
                let text = String::from_utf8_lossy(&out);
                if let Some(pid) = text.lines().next().filter(|_| text.contains('\n')).and_then(|l| number_after(l, "grandchild ")) {
                    break pid;
                }
            } else {
                panic!("unexpected before the grandchild's pid: {line}");
            }
        };
        let child_pid = child_pid.expect("process.spawn answered before the child's output");
        let child = Watch::open(child_pid);
        let grandchild = Watch::open(grandchild_pid);
        assert!(child.alive() && grandchild.alive(), "the tree runs");
        say(&format!("rpc: process.spawn started child {child_pid} (jobcheck child tree), its grandchild {grandchild_pid} runs"));
        if how == "kill" {
            let kill = format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"process.kill","params":{{"id":"tree","signal":"KILL"}},"auth":"{token}"}}"#
            );
            write.write_all(format!("{kill}\n").as_bytes()).await.expect("send kill");
            let (mut answered, mut exit) = (None, None);
            while answered.is_none() || exit.is_none() {
                let line = tokio::time::timeout(LIMIT, lines.next_line())
                    .await
                    .expect("the kill's answer and the exit frame in time")
                    .expect("read the pipe")
                    .expect("the pipe stayed open");
                if line.starts_with(r#"{"jsonrpc":"2.0","id":2,"#) {
                    answered = Some(line);
                } else if line.contains(r#""processId":"tree","stream":"exit""#) {
                    exit = Some(line);
                }
            }
            let (answered, exit) = (answered.unwrap(), exit.unwrap());
            assert_eq!(answered, r#"{"jsonrpc":"2.0","id":2,"result":{"success":true}}"#);
            say(&format!("rpc: process.kill KILL answered {answered}"));
            say(&format!("rpc: exit frame {exit}"));
        } else {
            let shutdown = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"server.shutdown","auth":"{token}"}}"#);
            write.write_all(format!("{shutdown}\n").as_bytes()).await.expect("send shutdown");
            loop {
                let line = tokio::time::timeout(LIMIT, lines.next_line())
                    .await
                    .expect("the pipe closed in time")
                    .expect("read the pipe");
                match line {
                    None => break,
                    Some(l) => say(&format!("rpc: after server.shutdown: {l}")),
                }
            }
            say("rpc: server.shutdown: the daemon closed the pipe");
        }
        let child_code = child.ends().expect("the child ended");
        let grandchild_code = grandchild.ends().expect("the grandchild ended with its tree");
        say(&format!(
            "rpc: after {}: child {child_pid} gone (exit code {child_code}), grandchild {grandchild_pid} gone (exit code {grandchild_code})",
            if how == "kill" { "process.kill KILL" } else { "server.shutdown" }
        ));
    });
}

/// The decimal number right after `key` in `s`.
fn number_after(s: &str, key: &str) -> Option<u32> {
    let rest = &s[s.find(key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Standard base64 (the frames' `data`), padding ignored.
fn base64(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for v in s.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
