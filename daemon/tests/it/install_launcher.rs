//! Build 89cb6289's managed launcher in `-install` and `-probe-cli`, with
//! real settings files and real shell-script launchers and CLIs that log
//! how they were run. `-install` goes through the library
//! (`remora::install::install_with`), whose `Limits` shorten the 33 s and
//! 123 s bounds; the gate, the build switch and the child env go through
//! the binary (`remora -install`, `remora -probe-cli`), which moves the
//! settings folder with `CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR` (applied only
//! while `/etc/claude-code` holds no policy). `-probe-cli`'s stopped run is
//! a unit test of `agent/probecli.rs` (its 33 s bound has no test knob).

use crate::common::http::read_request_head;
use remora::install::{install_with, InstallOptions, InstallResult, Limits};
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const VERSION: &str = "9.9.9";
const SETTINGS_DIR_ENV: &str = "CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR";
const GATE: &str = "CLAUDE_SSH_MANAGED_LAUNCHER";
const STOPPED_TEXT: &str = " and the run did not answer --version within 33s (123s for a first run), so it was stopped; the launcher or the host is not letting it finish";

/// A cli dir, a settings folder, a launcher `bin/wrap` and the logs the
/// CLI and the launcher append to.
struct Fixture {
    tmp: tempfile::TempDir,
    cli_dir: PathBuf,
    settings: PathBuf,
    wrap: String,
    cli_log: PathBuf,
    wrap_log: PathBuf,
}

/// Writes an executable `#!/bin/sh` script.
fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let f = Fixture {
            cli_dir: root.join("cli"),
            settings: root.join("settings"),
            wrap: root.join("bin/wrap").to_string_lossy().into_owned(),
            cli_log: root.join("cli.log"),
            wrap_log: root.join("wrap.log"),
            tmp,
        };
        std::fs::create_dir_all(&f.settings).unwrap();
        f
    }

    fn cli(&self) -> PathBuf {
        self.cli_dir.join(VERSION)
    }

    fn base(&self) -> String {
        self.settings
            .join("managed-settings.json")
            .to_string_lossy()
            .into_owned()
    }

    /// The CLI's text: it logs its args and whether the gate reached it.
    fn cli_script(&self) -> String {
        format!(
            "#!/bin/sh\necho \"CLI $* gate=${{{GATE}}}\" >> '{}'\nexit 0\n",
            self.cli_log.display()
        )
    }

    /// Puts the CLI at its final path (a cache hit).
    fn place_cli(&self) {
        std::fs::create_dir_all(&self.cli_dir).unwrap();
        std::fs::write(self.cli(), self.cli_script()).unwrap();
        std::fs::set_permissions(self.cli(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A `-cli-zst` upload of the CLI, outside the cli dir.
    fn upload(&self) -> String {
        let path = self.tmp.path().join("upload.zst");
        std::fs::write(&path, zstd::encode_all(self.cli_script().as_bytes(), 3).unwrap()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// The launcher: it logs its args, runs `body`, then execs them.
    fn launcher(&self, body: &str) {
        script(
            Path::new(&self.wrap),
            &format!(
                "echo \"LAUNCH $*\" >> '{}'\n{body}\nexec \"$@\"",
                self.wrap_log.display()
            ),
        );
    }

    /// The policy: `processWrapper` is `value`.
    fn policy(&self, value: &str) {
        let json = serde_json::json!({ "processWrapper": value }).to_string();
        std::fs::write(self.base(), json).unwrap();
    }

    fn options(&self) -> InstallOptions {
        InstallOptions {
            cli_dir: self.cli_dir.to_string_lossy().into_owned(),
            cli_version: VERSION.into(),
            cli_keep: 3,
            managed_launcher: Some(self.settings.clone()),
            ..InstallOptions::default()
        }
    }

    fn log(&self, which: &Path) -> String {
        std::fs::read_to_string(which).unwrap_or_default()
    }
}

/// The facts line from `"cliWasPresent"` on, where the launcher facts and
/// their order live.
fn tail(r: &InstallResult) -> String {
    let line = r.line();
    line[line.find("\"cliWasPresent\"").unwrap()..].to_string()
}

fn limits(cache_hit: Duration, first: Duration) -> Limits {
    Limits {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        launcher_timeout: cache_hit,
        launcher_first_timeout: first,
        ..Limits::default()
    }
}

fn install(o: &InstallOptions) -> InstallResult {
    install_with(o, &limits(Duration::from_secs(30), Duration::from_secs(30)))
}

/// Waits (bounded) for the pid a script wrote to `file`.
fn pid_in(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` stops running (gone, or a zombie its reaper has not
/// collected yet) within a few seconds.
fn ends(pid: i32) -> bool {
    let alive = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) if Path::new("/proc/self").exists() => false,
        // SAFETY: kill(2) with signal 0 sends nothing.
        Err(_) => unsafe { libc::kill(pid, 0) == 0 },
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn system_policy_absent() -> bool {
    let absent = !Path::new("/etc/claude-code").exists();
    if !absent {
        eprintln!("skipped: /etc/claude-code exists, the settings folder cannot be moved");
    }
    absent
}

// ------------------------------------------------------------- -install

#[test]
fn without_the_launcher_the_cli_runs_directly_and_no_launcher_fact_is_added() {
    let f = Fixture::new();
    f.place_cli();
    f.launcher("");
    f.policy(&f.wrap);
    let r = install(&InstallOptions {
        managed_launcher: None,
        ..f.options()
    });
    assert_eq!(tail(&r), r#""cliWasPresent":true}"#);
    assert_eq!(f.log(&f.cli_log), "CLI --version gate=\n");
    assert_eq!(f.log(&f.wrap_log), "", "the launcher ran without the gate");
}

#[test]
fn no_policy_is_none_and_the_cli_runs_directly() {
    let f = Fixture::new();
    f.place_cli();
    let r = install(&f.options());
    assert_eq!(tail(&r), r#""cliWasPresent":true,"launcherStatus":"none"}"#);
    assert_eq!(f.log(&f.cli_log), "CLI --version gate=\n");
}

#[test]
fn a_usable_launcher_runs_the_cli_once_on_the_final_path() {
    let f = Fixture::new();
    f.place_cli();
    f.launcher("");
    f.policy(&f.wrap);
    let cli = f.cli().display().to_string();
    let usable = format!(
        r#""launcherStatus":"usable","launcher":["{}"],"launcherSource":"{}"}}"#,
        f.wrap,
        f.base()
    );
    // A cache hit: one run through the launcher, no direct run.
    let r = install(&f.options());
    assert_eq!(tail(&r), format!(r#""cliWasPresent":true,{usable}"#));
    assert_eq!(f.log(&f.wrap_log), format!("LAUNCH {cli} --version\n"));
    assert_eq!(f.log(&f.cli_log), "CLI --version gate=\n");

    // A fresh install: the launcher gets the final path, after the rename.
    std::fs::remove_file(f.cli()).unwrap();
    let upload = f.upload();
    let r = install(&InstallOptions {
        cli_zst: upload.clone(),
        ..f.options()
    });
    assert_eq!(tail(&r), format!(r#""cliWasPresent":false,{usable}"#));
    assert_eq!(f.log(&f.wrap_log), format!("LAUNCH {cli} --version\n").repeat(2));
    assert!(f.cli().is_file(), "the CLI was not installed");
    assert!(!Path::new(&upload).exists(), "the upload was not consumed");
}

#[test]
fn a_refused_launcher_runs_nothing_and_the_cli_counts_as_present() {
    let f = Fixture::new();
    f.place_cli();
    f.launcher("");
    f.policy("wrap");
    let r = install(&f.options());
    assert_eq!(
        tail(&r),
        format!(
            r#""cliWasPresent":true,"launcherStatus":"unusable","launcherSource":"{}","launcherReason":"the launcher must be an absolute path, not a bare name resolved via PATH"}}"#,
            f.base()
        )
    );
    std::fs::write(f.base(), "{not json").unwrap();
    let r = install(&f.options());
    assert_eq!(
        tail(&r),
        format!(
            r#""cliWasPresent":true,"launcherStatus":"unreadable","launcherPath":"{}","launcherReason":"not valid JSON"}}"#,
            f.base()
        )
    );
    assert_eq!(
        f.log(&f.cli_log) + &f.log(&f.wrap_log),
        "",
        "a refused launcher ran something"
    );

    // Right after an install a refused launcher checks nothing either: the
    // new CLI (one that would fail its direct run) is installed.
    std::fs::remove_file(f.cli()).unwrap();
    let blob = f.tmp.path().join("failing.zst");
    std::fs::write(&blob, zstd::encode_all(&b"#!/bin/sh\nexit 1\n"[..], 3).unwrap()).unwrap();
    let r = install(&InstallOptions {
        cli_zst: blob.to_string_lossy().into_owned(),
        ..f.options()
    });
    assert!(
        tail(&r).starts_with(r#""cliWasPresent":false,"launcherStatus":"unreadable""#),
        "{}",
        r.line()
    );
    assert!(f.cli().is_file());
}

#[test]
fn a_failed_launcher_run_is_probe_failed_and_keeps_the_cli() {
    let f = Fixture::new();
    f.place_cli();
    f.policy(&f.wrap);
    let head = format!(
        r#""cliWasPresent":true,"launcherStatus":"probe_failed","launcher":["{}"],"launcherSource":"{}","#,
        f.wrap,
        f.base()
    );
    f.launcher("printf 'L5: to stderr\\n' >&2; exit 3");
    assert_eq!(
        tail(&install(&f.options())),
        format!(r#"{head}"launcherReason":"exit status 3","launcherStderr":"L5: to stderr\n"}}"#)
    );
    // 10000 bytes of stderr: 8192 kept, the rest counted.
    f.launcher("head -c 10000 /dev/zero | tr '\\0' E >&2; exit 1");
    assert_eq!(
        tail(&install(&f.options())),
        format!(
            "{head}\"launcherReason\":\"exit status 1\",\"launcherStderr\":\"{}\\n[\u{2026} 1808 more bytes]\"}}",
            "E".repeat(8192)
        )
    );
    // A signal, and no stderr: no launcherStderr.
    f.launcher("kill -TERM $$");
    assert_eq!(
        tail(&install(&f.options())),
        format!(r#"{head}"launcherReason":"terminated by SIGTERM"}}"#)
    );
    assert!(f.cli().is_file(), "the CLI must stay");
    assert_eq!(f.log(&f.cli_log), "", "the CLI ran directly");
}

/// A run that outlasts the cache-hit bound is stopped with its whole group
/// (a launcher ignoring SIGTERM, and its child): the CLI stays, nothing is
/// installed or pruned, and the facts say unresponsive.
#[test]
fn a_stopped_run_on_a_cache_hit_is_unresponsive_and_its_group_is_killed() {
    let f = Fixture::new();
    f.place_cli();
    for old in ["1.0", "2.0"] {
        std::fs::write(f.cli_dir.join(old), "old").unwrap();
    }
    f.policy(&f.wrap);
    let child_pid = f.tmp.path().join("child.pid");
    f.launcher(&format!(
        "trap '' TERM; sleep 60 & echo $! > '{}'; sleep 60",
        child_pid.display()
    ));
    let bound = Duration::from_millis(500);
    let start = Instant::now();
    let r = install_with(
        &InstallOptions {
            cli_keep: 1,
            cli_zst: f.upload(),
            ..f.options()
        },
        &limits(bound, Duration::from_secs(60)),
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the stop took {:?}",
        start.elapsed()
    );
    assert_eq!(
        tail(&r),
        format!(
            r#""cliWasPresent":false,"cliError":"cli unresponsive: the installed Claude Code binary was started through the host's managed launcher {w}{STOPPED_TEXT}","cliUnresponsive":true,"launcherStatus":"unresponsive","launcher":["{w}"],"launcherSource":"{}","launcherReason":"did not exit within 33s and was stopped"}}"#,
            f.base(),
            w = f.wrap,
        )
    );
    assert!(ends(pid_in(&child_pid)), "the launcher's child outlived the stop");
    assert!(f.cli().is_file(), "the CLI must stay");
    assert!(
        f.cli_dir.join("1.0").exists() && f.cli_dir.join("2.0").exists(),
        "pruned after a stop"
    );
    assert!(
        f.tmp.path().join("upload.zst").exists(),
        "a stop on a cache hit installs nothing"
    );
}

/// Right after an install the run has its own bound: a launcher slower
/// than the cache-hit bound passes; one stopped at the first-run bound
/// names 123s, and the new CLI is installed all the same.
#[test]
fn the_run_after_an_install_has_the_first_run_bound() {
    let f = Fixture::new();
    f.policy(&f.wrap);
    f.launcher("sleep 1");
    let upload = f.upload();
    let r = install_with(
        &InstallOptions {
            cli_zst: upload,
            ..f.options()
        },
        &limits(Duration::from_millis(200), Duration::from_secs(30)),
    );
    assert_eq!(
        tail(&r),
        format!(
            r#""cliWasPresent":false,"launcherStatus":"usable","launcher":["{}"],"launcherSource":"{}"}}"#,
            f.wrap,
            f.base()
        )
    );

    std::fs::remove_file(f.cli()).unwrap();
    f.launcher("sleep 60");
    let upload = f.upload();
    let r = install_with(
        &InstallOptions {
            cli_zst: upload.clone(),
            ..f.options()
        },
        &limits(Duration::from_secs(60), Duration::from_millis(300)),
    );
    assert_eq!(
        tail(&r),
        format!(
            r#""cliWasPresent":false,"cliError":"cli unresponsive: the installed Claude Code binary was started through the host's managed launcher {w}{STOPPED_TEXT}","cliUnresponsive":true,"launcherStatus":"unresponsive","launcher":["{w}"],"launcherSource":"{}","launcherReason":"did not exit within 123s and was stopped"}}"#,
            f.base(),
            w = f.wrap,
        )
    );
    assert!(f.cli().is_file(), "a stopped first run still installs the CLI");
    assert!(!Path::new(&upload).exists(), "the upload must be consumed");
}

/// One connection at a time on 127.0.0.1: `/cli.zst` is `body`, anything
/// else 404. Returns the base URL.
fn serve(body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let Some(head) = read_request_head(&mut stream) else {
                continue;
            };
            let found = String::from_utf8_lossy(&head).starts_with("GET /cli.zst ");
            let (status, payload) = if found {
                ("200 OK", &body[..])
            } else {
                ("404 Not Found", &b""[..])
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                payload.len()
            )
            .and_then(|()| stream.write_all(payload));
        }
    });
    base
}

/// `fetch` comes after `cliError` / `cliUnresponsive` and before the
/// launcher facts, which a failed download carries too.
#[test]
fn fetch_comes_before_the_launcher_facts() {
    use sha2::Digest;
    let f = Fixture::new();
    f.policy(&f.wrap);
    f.launcher("");
    let blob = zstd::encode_all(f.cli_script().as_bytes(), 3).unwrap();
    let sum: String = sha2::Sha256::digest(&blob).iter().map(|b| format!("{b:02x}")).collect();
    let base = serve(blob);
    let usable = format!(
        r#","launcherStatus":"usable","launcher":["{}"],"launcherSource":"{}"}}"#,
        f.wrap,
        f.base()
    );
    let fetched = |path: &str| {
        install(&InstallOptions {
            cli_url: format!("{base}{path}"),
            cli_checksum: sum.clone(),
            ..f.options()
        })
    };
    let r = fetched("/cli.zst");
    let t = tail(&r);
    assert!(
        t.starts_with(r#""cliWasPresent":false,"fetch":{"bytes":"#) && t.ends_with(&usable),
        "{t}"
    );
    std::fs::remove_file(f.cli()).unwrap();
    // (The 404's own text is the install's, not this test's concern.)
    let t = tail(&fetched("/missing"));
    let after_error = t.find(r#"","fetch":{"#).map(|i| &t[i..]);
    assert!(
        t.starts_with(r#""cliWasPresent":false,"cliError":"download failed"#)
            && after_error.is_some_and(|rest| rest.ends_with(&usable) && !rest.contains("cliError")),
        "{t}"
    );
}

/// No CLI path, or a cli dir that cannot be made: no launcher fact.
#[test]
fn an_install_without_a_cli_dir_to_use_carries_no_launcher_fact() {
    let f = Fixture::new();
    f.policy(&f.wrap);
    f.launcher("");
    let r = install(&InstallOptions {
        cli_version: String::new(),
        ..f.options()
    });
    assert!(!r.line().contains("launcher"), "{}", r.line());
    let file = f.tmp.path().join("p");
    std::fs::write(&file, "a regular file").unwrap();
    let r = install(&InstallOptions {
        cli_dir: file.join("cli").to_string_lossy().into_owned(),
        cli_zst: f.upload(),
        ..f.options()
    });
    assert!(
        r.cli_error.as_deref().is_some_and(|e| e.contains("not a directory")),
        "{r:?}"
    );
    assert!(!r.line().contains("launcher"), "{}", r.line());
    assert_eq!(f.log(&f.wrap_log), "");
}

// ------------------------------------------------- through the binary

/// `remora -reference-build <stamp> <args>` with the settings folder moved
/// and `env`: (stdout, stderr).
fn remora(f: &Fixture, stamp: &str, args: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> (String, String) {
    let mut command = crate::common::remora_command();
    command
        .args(["-reference-build", &format!("{stamp:0<40}")])
        .args(args)
        .env(SETTINGS_DIR_ENV, &f.settings)
        .env("CLAUDE_RPC_TOKEN", "secret-token")
        .env("CLAUDE_CODE_PROCESS_WRAPPER", "/opt/other-wrapper")
        .env_remove(GATE);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What reaches the launcher: it logs the variables it must not get.
const ENV_LOG: &str = r#"echo "ENV gate=${CLAUDE_SSH_MANAGED_LAUNCHER-unset} dir=${CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR-unset} wrapper=${CLAUDE_CODE_PROCESS_WRAPPER-unset} token=${CLAUDE_RPC_TOKEN-unset}" >> "$(dirname "$0")/../wrap.log""#;

/// Only `1` opens the gate, only for a build with the managed launcher,
/// and neither the gate, the settings override, the wrapper variable nor
/// the token reaches the launcher.
#[test]
fn install_uses_the_launcher_only_with_the_gate_and_the_build() {
    if !system_policy_absent() {
        return;
    }
    let f = Fixture::new();
    f.place_cli();
    f.launcher(ENV_LOG);
    f.policy(&f.wrap);
    let args: Vec<&std::ffi::OsStr> = ["-install", "-cli-dir"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([f.cli_dir.as_os_str(), "-cli-version".as_ref(), VERSION.as_ref()])
        .collect();
    let cli = f.cli().display().to_string();
    for gate in ["", "true", "1 "] {
        let (stdout, _) = remora(&f, "89cb6289", &args, &[(GATE, gate)]);
        assert!(stdout.ends_with("\"cliWasPresent\":true}\n"), "gate {gate:?}: {stdout}");
    }
    assert_eq!(f.log(&f.wrap_log), "", "the launcher ran without the gate");
    let (stdout, _) = remora(&f, "f6010b97", &args, &[(GATE, "1")]);
    assert!(
        stdout.ends_with("\"cliWasPresent\":true}\n"),
        "a build without the launcher: {stdout}"
    );
    assert_eq!(f.log(&f.wrap_log), "");

    for stamp in ["89cb6289", "5fd08069"] {
        let (stdout, _) = remora(&f, stamp, &args, &[(GATE, "1")]);
        assert!(stdout.contains("\"launcherStatus\":\"usable\""), "{stamp}: {stdout}");
    }
    let run = format!("LAUNCH {cli} --version\nENV gate=unset dir=unset wrapper=unset token=unset\n");
    assert_eq!(f.log(&f.wrap_log), run.repeat(2));
    // The direct runs kept the gate, as the reference's do; the launched
    // ones did not get it.
    assert_eq!(
        f.log(&f.cli_log),
        "CLI --version gate=\nCLI --version gate=true\nCLI --version gate=1 \nCLI --version gate=1\nCLI --version gate=\nCLI --version gate=\n"
    );
}

#[test]
fn probe_cli_through_the_launcher() {
    if !system_policy_absent() {
        return;
    }
    let f = Fixture::new();
    f.place_cli();
    let cli = f.cli();
    let cli_text = cli.display().to_string();
    let probe = |stamp: &str, gate: &str| remora(&f, stamp, &["-probe-cli".as_ref(), cli.as_os_str()], &[(GATE, gate)]);
    let nothing = (String::new(), String::new());

    // A usable launcher: one run through it, nothing printed.
    f.launcher(ENV_LOG);
    f.policy(&f.wrap);
    assert_eq!(probe("89cb6289", "1"), nothing);
    assert_eq!(
        f.log(&f.wrap_log) + &f.log(&f.cli_log),
        format!(
            "LAUNCH {cli_text} --version\nENV gate=unset dir=unset wrapper=unset token=unset\nCLI --version gate=\n"
        )
    );

    // Without the gate, or for a build without the launcher: the direct run.
    std::fs::remove_file(&f.wrap_log).unwrap();
    std::fs::remove_file(&f.cli_log).unwrap();
    assert_eq!(probe("89cb6289", "true"), nothing);
    assert_eq!(probe("f6010b97", "1"), nothing);
    assert_eq!(f.log(&f.wrap_log), "");
    assert_eq!(f.log(&f.cli_log), "CLI --version gate=true\nCLI --version gate=1\n");

    // Refused: nothing runs, the reason on stderr.
    std::fs::remove_file(&f.cli_log).unwrap();
    f.policy("wrap");
    assert_eq!(
        probe("89cb6289", "1"),
        (
            "__CLI_LAUNCHER__\n".into(),
            format!("remora: {cli_text} was not run: managed launcher unusable: the launcher must be an absolute path, not a bare name resolved via PATH\n")
        )
    );
    std::fs::remove_file(f.base()).unwrap();
    std::fs::create_dir(f.base()).unwrap();
    assert_eq!(
        probe("89cb6289", "1"),
        (
            "__CLI_LAUNCHER__\n".into(),
            format!(
                "remora: {cli_text} was not run: managed settings unreadable: {}: is a directory\n",
                f.base()
            )
        )
    );
    assert_eq!(
        f.log(&f.wrap_log) + &f.log(&f.cli_log),
        "",
        "a refused launcher ran something"
    );

    // A failed run: its stderr, then the reason.
    std::fs::remove_dir(f.base()).unwrap();
    f.policy(&f.wrap);
    f.launcher("printf 'L5: to stderr\\n' >&2; exit 3");
    let failed = format!(
        "remora: {cli_text} --version through the managed launcher {} did not succeed: exit status 3\n",
        f.wrap
    );
    assert_eq!(
        probe("89cb6289", "1"),
        (
            "__CLI_LAUNCHER__\n".into(),
            format!("remora: the managed launcher's run printed:\nL5: to stderr\n\n{failed}")
        )
    );
    f.launcher("exit 3");
    assert_eq!(probe("89cb6289", "1"), ("__CLI_LAUNCHER__\n".into(), failed));

    // No policy: the direct run, with the gate kept.
    std::fs::remove_file(f.base()).unwrap();
    assert_eq!(probe("89cb6289", "1"), nothing);
    assert_eq!(f.log(&f.cli_log), "CLI --version gate=1\n");
}
