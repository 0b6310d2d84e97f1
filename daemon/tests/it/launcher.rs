//! Build 89cb6289's managed launcher against a real daemon stamped as that
//! build: `launcher.resolve` over real settings files (the folder moved with
//! `CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR`, which applies only while
//! `/etc/claude-code` holds no policy), its param errors, `process.spawn`'s
//! `launcher` param and the child env strip; and that a build before it
//! has no `launcher` namespace.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::reply::{err, ok, p};
use crate::common::{request_line, serve_command, Client, StopOnDrop, TOKEN};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const SETTINGS_DIR_ENV: &str = "CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR";

/// A daemon started `-reference-build <stamp>`, stopped on drop.
struct Stamped {
    _stop: StopOnDrop,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Stamped {
    fn start(stamp: &str, env: &[(&str, &Path)]) -> Stamped {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("rpc.sock");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let log = dir.path().join("daemon.log");
        let mut command = serve_command(&socket, &token);
        command
            .args(["-reference-build", stamp])
            .env("CLAUDE_SSH_MANAGED_LAUNCHER", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut launcher = command.spawn().unwrap();
        let mut banner = String::new();
        BufReader::new(launcher.stdout.take().unwrap())
            .read_line(&mut banner)
            .unwrap();
        let _ = launcher.wait();
        assert!(
            banner.starts_with(&format!("Claude remote server listening on {}", socket.display())),
            "banner {banner:?}; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Stamped {
            _stop: StopOnDrop::new(&socket, TOKEN),
            socket,
            log,
            _dir: dir,
        }
    }

    fn call(&self, method: &str, params: &str) -> String {
        Client::connect(&self.socket).call(1, method, params)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn stamp(id: &str) -> String {
    format!("{id}{}", "0".repeat(40 - id.len()))
}

/// The system folder must hold no policy for the override to apply.
fn system_policy_absent() -> bool {
    let absent = !Path::new("/etc/claude-code").exists();
    if !absent {
        eprintln!("skipped: /etc/claude-code exists, the settings folder cannot be moved");
    }
    absent
}

fn executable(path: &Path, text: &str) -> String {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    p(path)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn resolve_answers_each_shape_and_param_error() {
    if !system_policy_absent() {
        return;
    }
    let settings = tempfile::tempdir().unwrap();
    let s = settings.path();
    let d = Stamped::start(&stamp("89cb6289"), &[(SETTINGS_DIR_ENV, s)]);
    let cli = r#"{"cliPath":"/opt/claude/cli"}"#;

    // Param errors.
    let mut c = Client::connect(&d.socket);
    c.send_raw(request_line("2", "launcher.resolve", None, TOKEN).as_bytes());
    assert_eq!(c.reply_for(2), err(2, -32602, "Invalid params"));
    for bad in ["[]", "\"x\"", r#"{"cliPath":5}"#, r#"{"cliPath":["/x"]}"#] {
        assert_eq!(
            d.call("launcher.resolve", bad),
            err(1, -32602, "Invalid params"),
            "{bad}"
        );
    }
    for required in [
        "null",
        "{}",
        r#"{"cliPath":null}"#,
        r#"{"cliPath":""}"#,
        r#"{"other":"/x"}"#,
    ] {
        assert_eq!(
            d.call("launcher.resolve", required),
            err(1, -32602, "cliPath is required"),
            "{required}"
        );
    }
    assert_eq!(
        d.call("launcher.nope", cli),
        err(1, -32601, "Unknown method: launcher.nope")
    );

    // None: no settings at all, then settings without a value.
    assert_eq!(d.call("launcher.resolve", cli), ok(1, r#"{"status":"none"}"#));
    let base = s.join("managed-settings.json");
    write(&base, r#"{"permissions":{}}"#);
    assert_eq!(d.call("launcher.resolve", cli), ok(1, r#"{"status":"none"}"#));

    // Usable: the env key wins over processWrapper in one file.
    let wrap = executable(&s.join("bin/wrap"), "#!/bin/sh\nexec \"$@\"\n");
    write(
        &base,
        &format!(r#"{{"processWrapper":"/nope","env":{{"CLAUDE_CODE_PROCESS_WRAPPER":"{wrap} --flag \"a b\""}}}}"#),
    );
    assert_eq!(
        d.call("launcher.resolve", cli),
        ok(
            1,
            &format!(
                r#"{{"status":"usable","argv":["{wrap}","--flag","a b"],"source":"{}"}}"#,
                p(&base)
            )
        )
    );

    // Unusable: a later drop-in wins, and is refused (logged once).
    let drop_in = s.join("managed-settings.d/10-wrap.json");
    write(&drop_in, r#"{"processWrapper":"wrap"}"#);
    let unusable = ok(
        1,
        &format!(
            r#"{{"status":"unusable","source":"{}","reason":"the launcher must be an absolute path, not a bare name resolved via PATH"}}"#,
            p(&drop_in)
        ),
    );
    assert_eq!(d.call("launcher.resolve", cli), unusable);
    assert_eq!(d.call("launcher.resolve", cli), unusable);
    write(&drop_in, r#"{"processWrapper":"/opt/claude/cli"}"#);
    assert_eq!(
        d.call("launcher.resolve", cli),
        ok(
            1,
            &format!(
                r#"{{"status":"unusable","source":"{}","reason":"launcher `/opt/claude/cli` is Claude Code's own path"}}"#,
                p(&drop_in)
            )
        )
    );
    write(&drop_in, r#"{"processWrapper":"/opt/w; rm -rf /"}"#);
    assert_eq!(
        d.call("launcher.resolve", cli),
        ok(
            1,
            &format!(
                r#"{{"status":"unusable","source":"{}","reason":"the value contains an unquoted shell metacharacter (one of ; | \u0026 $ ( ) ` \u003c \u003e) — it is an argv list, not a shell command"}}"#,
                p(&drop_in)
            )
        )
    );

    // Unreadable: a drop-in that is not JSON, then one too large.
    let broken = s.join("managed-settings.d/20-broken.json");
    write(&broken, "{");
    let unreadable = ok(
        1,
        &format!(
            r#"{{"status":"unreadable","reason":"not valid JSON","path":"{}"}}"#,
            p(&broken)
        ),
    );
    assert_eq!(d.call("launcher.resolve", cli), unreadable);
    assert_eq!(d.call("launcher.resolve", cli), unreadable);
    write(&broken, &format!("{{\"x\":\"{}\"}}", "a".repeat(2 << 20)));
    assert_eq!(
        d.call("launcher.resolve", cli),
        ok(
            1,
            &format!(
                r#"{{"status":"unreadable","reason":"larger than 2 MiB","path":"{}"}}"#,
                p(&broken)
            )
        )
    );

    let log = d.log();
    let refused = format!(
        "[LauncherHandler] managed launcher from {} refused: the launcher must be an absolute path, not a bare name resolved via PATH",
        p(&drop_in)
    );
    assert_eq!(log.matches(&refused).count(), 1, "{log}");
    let unreadable_line = format!(
        "[LauncherHandler] managed settings unreadable: {}: not valid JSON",
        p(&broken)
    );
    assert_eq!(log.matches(&unreadable_line).count(), 1, "{log}");
    // The launcher was never run by resolve, and no override note: the
    // system folder holds no policy.
    assert!(!log.contains("ignored:"), "{log}");
}

fn spawn_line(id: u32, params: &str) -> String {
    request_line(&id.to_string(), "process.spawn", Some(params), TOKEN)
}

#[test]
fn spawn_runs_through_a_launcher_and_children_lose_the_launcher_variables() {
    if !system_policy_absent() {
        return;
    }
    let settings = tempfile::tempdir().unwrap();
    let d = Stamped::start(&stamp("89cb6289"), &[(SETTINGS_DIR_ENV, settings.path())]);
    let tools = tempfile::tempdir().unwrap();
    let wrap = executable(&tools.path().join("wrap"), "#!/bin/sh\necho launched\nexec \"$@\"\n");
    let no_interp = executable(&tools.path().join("broken"), "#!/nonexistent/interpreter\n");
    let env_cmd = if Path::new("/usr/bin/env").exists() {
        "/usr/bin/env"
    } else {
        "/bin/env"
    };
    let mut c = Client::connect(&d.socket);

    // Refusals, in the recorded order.
    let cases = [
        (
            format!(r#"{{"id":"p","command":"echo","args":["hi"],"launcher":["{wrap}"]}}"#),
            err(1, -32602, "command must be an absolute path when a launcher is given"),
        ),
        (
            r#"{"id":"p","command":"/bin/echo","launcher":["wrap"]}"#.to_string(),
            err(
                1,
                -32004,
                "the managed launcher cannot be used: the launcher must be an absolute path, not a bare name resolved via PATH",
            ),
        ),
        (
            r#"{"id":"p","command":"/bin/echo","launcher":[]}"#.to_string(),
            err(
                1,
                -32004,
                "the managed launcher cannot be used: the value is set but contains no launcher — unset it to run without one, or set it to the absolute path of your launcher",
            ),
        ),
        (
            format!(r#"{{"id":"p","command":"/nonexistent/cmd","launcher":["{wrap}"]}}"#),
            err(1, -32603, "fork/exec /nonexistent/cmd: no such file or directory"),
        ),
        (
            format!(r#"{{"id":"p","command":"/bin/echo","launcher":["{no_interp}"]}}"#),
            err(
                1,
                -32005,
                &format!("the managed launcher {no_interp} could not be started: its interpreter was not found (the program on its #! line, or the loader of an ELF binary; a script saved with Windows CRLF line endings fails this way)"),
            ),
        ),
        (
            r#"{"id":"p","command":"/bin/echo","launcher":"x"}"#.to_string(),
            err(1, -32602, "Invalid params"),
        ),
    ];
    for (params, want) in cases {
        c.send_raw(spawn_line(1, &params).as_bytes());
        assert_eq!(c.reply_for(1), want, "{params}");
    }

    // Through the launcher: it runs first, then the command with its args.
    c.send_raw(
        spawn_line(
            2,
            &format!(r#"{{"id":"a","command":"/bin/echo","args":["hi"],"launcher":["{wrap}"]}}"#),
        )
        .as_bytes(),
    );
    assert_eq!(c.reply_for(2), ok(2, r#"{"success":true}"#));
    assert_eq!(stdout_of(&frames_until_exit(&mut c, "a")), b"launched\nhi\n");

    // The env strip: the daemon's and the request's launcher variables are
    // gone; the wrapper variable only with a launcher.
    let env = r#"{"CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR":"/x","CLAUDE_SSH_MANAGED_LAUNCHER":"1","CLAUDE_CODE_PROCESS_WRAPPER":"/w","KEEP_ME":"1"}"#;
    c.send_raw(spawn_line(3, &format!(r#"{{"id":"e","command":"{env_cmd}","env":{env}}}"#)).as_bytes());
    assert_eq!(c.reply_for(3), ok(3, r#"{"success":true}"#));
    let plain = String::from_utf8(stdout_of(&frames_until_exit(&mut c, "e"))).unwrap();
    assert!(
        plain.contains("\nKEEP_ME=1\n") && plain.contains("\nCLAUDE_CODE_PROCESS_WRAPPER=/w\n"),
        "{plain}"
    );
    assert!(
        !plain.contains("CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR") && !plain.contains("CLAUDE_SSH_MANAGED_LAUNCHER"),
        "{plain}"
    );
    c.send_raw(
        spawn_line(
            4,
            &format!(r#"{{"id":"l","command":"{env_cmd}","env":{env},"launcher":["{wrap}"]}}"#),
        )
        .as_bytes(),
    );
    assert_eq!(c.reply_for(4), ok(4, r#"{"success":true}"#));
    let launched = String::from_utf8(stdout_of(&frames_until_exit(&mut c, "l"))).unwrap();
    assert!(
        launched.starts_with("launched\n") && launched.contains("\nKEEP_ME=1\n"),
        "{launched}"
    );
    assert!(
        !launched.contains("CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR")
            && !launched.contains("CLAUDE_SSH_MANAGED_LAUNCHER")
            && !launched.contains("CLAUDE_CODE_PROCESS_WRAPPER"),
        "{launched}"
    );
}

#[test]
fn builds_before_89cb6289_have_no_launcher() {
    let settings = tempfile::tempdir().unwrap();
    let d = Stamped::start(&stamp("f6010b97"), &[(SETTINGS_DIR_ENV, settings.path())]);
    assert_eq!(
        d.call("launcher.resolve", r#"{"cliPath":"/opt/claude/cli"}"#),
        err(1, -32601, "Unknown namespace: launcher")
    );
    let caps = d.call("server.capabilities", "{}");
    assert!(!caps.contains("launcher"), "{caps}");
    // The launcher param is an unknown key, and the child keeps the
    // launcher variables.
    let mut c = Client::connect(&d.socket);
    c.send_raw(
        spawn_line(
            2,
            r#"{"id":"o","command":"sh","args":["-c","echo $CLAUDE_SSH_MANAGED_LAUNCHER"],"launcher":"ignored"}"#,
        )
        .as_bytes(),
    );
    assert_eq!(c.reply_for(2), ok(2, r#"{"success":true}"#));
    assert_eq!(stdout_of(&frames_until_exit(&mut c, "o")), b"1\n");
}

#[test]
fn capabilities_of_89cb6289_list_the_launcher() {
    let d = Stamped::start(&stamp("89cb6289"), &[]);
    let caps = d.call("server.capabilities", "{}");
    assert!(
        caps.contains(r#""git.worktree_remove","launcher.resolve","process.spawn""#),
        "{caps}"
    );
    assert!(
        caps.contains(
            r#""process.spawn.shellAgentSocket","launcher.managed","git.worktree.external_root","server.instance_id""#
        ),
        "{caps}"
    );
}
