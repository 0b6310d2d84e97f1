//! The command line without a running daemon: Go `flag` messages and
//! usage, mode selection, `-version`, and every start-up error of `-serve`,
//! `-bridge` and `-stop`, byte-exact with exit codes.

use crate::common;
use crate::common::remora_bin;
use assert_cmd::Command;

/// Runs remora with `args` (and a clean, predictable environment for the
/// variables remora reads); returns (exit code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(remora_bin());
    cmd.args(args)
        .env("SHELL", common::QUICK_LOGIN_SHELL)
        .env_remove("CLAUDE_RPC_TOKEN")
        .env_remove("REMORA_DAEMON_CHILD")
        .env_remove("REMORA_LOG_LEVEL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run remora");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What follows a flag error: the modes' synopsis, not every option.
fn short_usage() -> String {
    let (_, _, help) = run(&["-h"], &[]);
    let modes = help.split("\nOptions of ").next().unwrap().to_string();
    format!("{modes}\nRun remora -h for the options of each mode.\n")
}

#[test]
fn no_mode_is_exit_2_without_usage() {
    // The reference's line, then which modes there are.
    let want = "remora: one of --version/--install/--serve/--bridge/--stop is required\nremora: choose a mode: -serve, -bridge, -stop, -install, -probe-cli PATH, -doctor or -version (remora -h describes each)\n";
    assert_eq!(run(&[], &[]), (2, String::new(), want.to_string()));
    // Flags without a mode, and arguments after the flags, change nothing.
    assert_eq!(
        run(&["-socket", "/x", "extra"], &[]),
        (2, String::new(), want.to_string())
    );
    // A mode after a non-flag argument is not parsed (Go stops there).
    assert_eq!(run(&["extra", "-version"], &[]), (2, String::new(), want.to_string()));
    assert_eq!(run(&["--", "-version"], &[]), (2, String::new(), want.to_string()));
}

#[test]
fn unknown_flag_prints_go_error_then_the_modes() {
    for arg in ["-bogus", "--bogus", "-bogus=1"] {
        let (code, out, err) = run(&[arg, "-serve"], &[]);
        assert_eq!(code, 2, "{arg}");
        assert_eq!(out, "");
        assert_eq!(err, format!("flag provided but not defined: -bogus\n{}", short_usage()));
    }
}

#[test]
fn help_shows_the_modes_then_each_modes_options() {
    let (code, out, err) = run(&["-h"], &[]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(err.starts_with("Usage: remora MODE [OPTION...]"), "{err}");
    // A synopsis line per mode, in this order, before any option.
    let at = |needle: &str| err.find(needle).unwrap_or_else(|| panic!("{needle:?} missing: {err}"));
    let modes = [
        "\n  remora -serve [-socket PATH] (-token-file FILE | -token-fd N) [OPTION...]\n",
        "\n  remora -bridge [-socket PATH]\n",
        "\n  remora -stop [-socket PATH]\n",
        "\n  remora -install -cli-dir DIR -cli-version VERSION",
        "\n  remora -probe-cli PATH\n",
        "\n  remora -version [-reference-build SHA]\n",
        "\n  remora -print-config [-serve OPTION...]\n",
        "\nOptions of -serve:\n",
        "\nOptions of -bridge and -stop:\n",
        "\nOptions of -install:\n",
        "\nOptions of -version:\n",
        "\nOptions of every mode:\n",
    ];
    let places: Vec<usize> = modes.iter().map(|m| at(m)).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{err}");
    // Every option under its mode, with its value's name and a description.
    for option in [
        "  -socket PATH ",
        "  -token-file FILE ",
        "  -token-fd N ",
        "  -keep-children ",
        "  -metrics-addr HOST:PORT\n",
        "  -replay-dir DIR ",
        "  -replay-budget-mb MIB ",
        "  -cli-dir DIR ",
        "  -cli-version VERSION ",
        "  -cli-url URL ",
        "  -cli-checksum SHA256 ",
        "  -cli-zst FILE ",
        "  -cli-keep N ",
        "  -reference-build SHA ",
        "  -log-level LEVEL ",
    ] {
        at(option);
    }
    assert!(
        err.contains("(default 3)\n") && err.contains("(default 2048)\n"),
        "{err}"
    );
    for help in ["-help", "--help", "--h"] {
        assert_eq!(run(&[help, "-serve"], &[]), (0, String::new(), err.clone()), "{help}");
    }
}

#[test]
fn flag_value_errors_are_gos() {
    let cases: [(&[&str], &str); 5] = [
        (&["-serve", "-socket"], "flag needs an argument: -socket\n"),
        (&["--token-file"], "flag needs an argument: -token-file\n"),
        (&["-serve=x"], "invalid boolean value \"x\" for -serve: parse error\n"),
        (
            &["-install", "-cli-keep", "x"],
            "invalid value \"x\" for flag -cli-keep: parse error\n",
        ),
        (
            &["-serve", "-token-fd=1.5"],
            "invalid value \"1.5\" for flag -token-fd: parse error\n",
        ),
    ];
    for (args, first) in cases {
        let (code, out, err) = run(args, &[]);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, format!("{first}{}", short_usage()), "{args:?}");
    }
}

#[test]
fn version_format_and_mode_precedence() {
    let (code, out, err) = run(&["-version"], &[]);
    assert_eq!((code, err.as_str()), (0, ""));
    let rest = out.strip_prefix("remora ").unwrap_or_else(|| panic!("{out}"));
    let (id, built) = rest.split_once(" (built ").unwrap_or_else(|| panic!("{out}"));
    assert!(!id.is_empty() && !id.contains(' '), "{out}");
    // RFC 3339 UTC: 2026-11-22T10:30:09Z
    let stamp = built.strip_suffix(")\n").unwrap_or_else(|| panic!("{out}"));
    assert_eq!(stamp.len(), 20, "{out}");
    assert!(stamp.as_bytes()[10] == b'T' && stamp.ends_with('Z'), "{out}");
    // Both dash forms; version wins over every other mode.
    assert_eq!(run(&["--version"], &[]).1, out);
    assert_eq!(run(&["-serve", "-stop", "-bridge", "-version=true"], &[]).1, out);
    // -version=false is no mode at all.
    assert_eq!(run(&["-version=false"], &[]).0, 2);
}

#[test]
fn serve_requires_a_token_flag() {
    // The reference's line, then what to do.
    let want = "remora: daemonized child requires --token-file or --token-fd\nremora: -serve needs a token: -token-file FILE or -token-fd N\n";
    assert_eq!(run(&["-serve"], &[]), (1, String::new(), want.to_string()));
    // The client-side variable is never a token source for the daemon.
    assert_eq!(
        run(&["--serve", "-socket", "/tmp/x.sock"], &[("CLAUDE_RPC_TOKEN", "tok")]),
        (1, String::new(), want.to_string())
    );
    // The token is checked before the socket: a missing directory does
    // not matter yet.
    assert_eq!(run(&["-serve", "-socket", "/nonexistent/dir/rpc.sock"], &[]).2, want);
}

#[test]
fn unreadable_token_file_is_a_path_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let missing = missing.to_str().unwrap();
    assert_eq!(
        run(
            &["-serve", "-socket", "/nonexistent/dir/rpc.sock", "-token-file", missing],
            &[]
        ),
        (
            1,
            String::new(),
            format!("remora: read --token-file: open {missing}: no such file or directory\n")
        )
    );
    let as_dir = dir.path().to_str().unwrap();
    assert_eq!(
        run(&["-serve", "-token-file", as_dir], &[]).2,
        format!("remora: read --token-file: read {as_dir}: is a directory\n")
    );
}

#[test]
fn empty_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "\r\n").unwrap();
    let socket = dir.path().join("rpc.sock");
    assert_eq!(
        run(
            &[
                "-serve",
                "-socket",
                socket.to_str().unwrap(),
                "-token-file",
                token.to_str().unwrap()
            ],
            &[]
        ),
        (1, String::new(), "remora: read --token-file: empty token\n".to_string())
    );
    assert!(!socket.exists());
}

/// The mode bits of `p`.
fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Stops the daemon on `socket` (no token needed) and checks it went.
fn stop_daemon(socket: &str) {
    assert_eq!(
        run(&["-stop", "-socket", socket], &[]),
        (0, "stopped\n".into(), String::new())
    );
    assert!(!std::path::Path::new(socket).exists());
}

#[test]
fn missing_socket_directories_are_created_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o751)).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    let socket = dir.path().join("missing").join("sub").join("rpc.sock");
    let socket = socket.to_str().unwrap();
    let _stop = common::StopOnDrop::new(socket, "tok");
    assert_eq!(
        run(
            &["-serve", "-socket", socket, "-token-file", token.to_str().unwrap()],
            &[]
        ),
        (
            0,
            format!("Remora remote server listening on {socket}\n"),
            String::new()
        )
    );
    assert_eq!(mode_of(&dir.path().join("missing")), 0o700);
    assert_eq!(mode_of(&dir.path().join("missing/sub")), 0o700);
    // An existing directory keeps its mode.
    assert_eq!(mode_of(dir.path()), 0o751);
    stop_daemon(socket);
}

#[test]
fn bind_failure_when_a_parent_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let socket = dir.path().join("file").join("rpc.sock");
    let socket = socket.to_str().unwrap();
    assert_eq!(
        run(
            &["-serve", "-socket", socket, "-token-file", token.to_str().unwrap()],
            &[]
        ),
        (
            1,
            String::new(),
            format!("remora: listen unix: {socket}: bind: not a directory\n")
        )
    );
    // Read once, then unlinked, even though the daemon could not start.
    assert!(!token.exists());
}

#[test]
fn a_socket_path_over_the_kernel_limit_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    // A directory name that brings the socket path to `len` bytes.
    let socket_of = |len: usize| {
        let base = dir.path().to_str().unwrap().len() + "/".len() + "/rpc.sock".len();
        assert!(len > base + 1, "the temp dir's path is too long for this test");
        dir.path().join("d".repeat(len - base)).join("rpc.sock")
    };
    let limit = if cfg!(target_os = "linux") { 107 } else { 103 };
    let system = if cfg!(target_os = "linux") { "Linux" } else { "macOS" };
    let over = socket_of(limit + 1);
    std::fs::write(&token, "tok\n").unwrap();
    assert_eq!(
        run(&["-serve", "-socket", over.to_str().unwrap(), "-token-file", token.to_str().unwrap()], &[]),
        (
            1,
            String::new(),
            format!(
                "remora: socket path too long: {} is {} bytes, and a Unix socket path can have at most {limit} bytes on {system}; choose a shorter -socket\n",
                over.display(),
                limit + 1
            )
        )
    );
    // Refused before the directory was created (the token is still read
    // first, as the contract orders it).
    assert!(!over.parent().unwrap().exists());
    // The longest path that fits serves.
    let fits = socket_of(limit);
    std::fs::write(&token, "tok\n").unwrap();
    let fits = fits.to_str().unwrap();
    let _stop = common::StopOnDrop::new(fits, "tok");
    assert_eq!(
        run(
            &["-serve", "-socket", fits, "-token-file", token.to_str().unwrap()],
            &[]
        ),
        (0, format!("Remora remote server listening on {fits}\n"), String::new())
    );
    stop_daemon(fits);
}

#[test]
fn default_socket_is_under_home_and_serve_creates_its_directory() {
    let home = tempfile::tempdir().unwrap();
    let token = home.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    let h = home.path().to_str().unwrap();
    let default = format!("{h}/.claude/remote/rpc.sock");
    let _stop = common::StopOnDrop::new(&default, "tok");
    // -bridge and -stop never create it.
    assert_eq!(
        run(&["-bridge"], &[("HOME", h)]).2,
        format!("remora: dial server: dial unix {default}: connect: no such file or directory\n")
    );
    assert_eq!(
        run(&["-stop"], &[("HOME", h)]),
        (0, "none\n".to_string(), String::new())
    );
    assert!(!home.path().join(".claude").exists());
    assert_eq!(
        run(&["-serve", "-token-file", token.to_str().unwrap()], &[("HOME", h)]),
        (
            0,
            format!("Remora remote server listening on {default}\n"),
            String::new()
        )
    );
    assert_eq!(mode_of(&home.path().join(".claude")), 0o700);
    assert_eq!(mode_of(&home.path().join(".claude/remote")), 0o700);
    stop_daemon(&default);
}

#[test]
fn an_empty_socket_flag_means_the_default() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().to_str().unwrap();
    let default = format!("{h}/.claude/remote/rpc.sock");
    assert_eq!(
        run(&["-bridge", "-socket="], &[("HOME", h)]).2,
        format!("remora: dial server: dial unix {default}: connect: no such file or directory\n")
    );
    assert_eq!(
        run(&["-stop", "-socket="], &[("HOME", h)]),
        (0, "none\n".to_string(), String::new())
    );
}

#[test]
fn stop_without_a_daemon_says_none() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let socket = socket.to_str().unwrap();
    assert_eq!(
        run(&["-stop", "-socket", socket], &[("CLAUDE_RPC_TOKEN", "tok")]),
        (0, "none\n".to_string(), String::new())
    );
    // A socket file nobody listens on is "unreachable": `none`, and the
    // stale file is removed.
    drop(std::os::unix::net::UnixListener::bind(socket).unwrap());
    assert_eq!(
        run(&["--stop", "--socket", socket], &[]),
        (0, "none\n".to_string(), String::new())
    );
    assert!(!std::path::Path::new(socket).exists());
}

#[test]
fn bridge_dial_failure() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let socket = socket.to_str().unwrap();
    assert_eq!(
        run(&["-bridge", "-socket", socket], &[]),
        (
            1,
            String::new(),
            format!("remora: dial server: dial unix {socket}: connect: no such file or directory\n")
        )
    );
    drop(std::os::unix::net::UnixListener::bind(socket).unwrap());
    assert_eq!(
        run(&["-bridge", &format!("--socket={socket}")], &[]).2,
        format!("remora: dial server: dial unix {socket}: connect: connection refused\n")
    );
}

#[test]
fn install_mode_is_dispatched() {
    // The install engine is tested by its owner; here: the flags parse and
    // the mode runs (it always exits 0), before serve in precedence.
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(
        &[
            "-install",
            "-serve",
            "-cli-dir",
            dir.path().to_str().unwrap(),
            "-cli-version",
            "1.0.0",
            "-cli-keep=0x2",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("daemonized child"), "{err}");
}

/// Issue 26 item 10: `-token-file` removed whatever the path named, even
/// when it then refused the token; as root that deleted a device node.
/// Only a regular file that was read is removed; anything else is reported
/// and left in place.
#[test]
fn token_file_removes_only_the_regular_file_it_read() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let socket = socket.to_str().unwrap();
    let left_in_place = |p: &str| format!("remora: warning: --token-file {p} is not a regular file; left in place\n");

    // A FIFO whose writer opens and closes at once: read as empty, refused,
    // and the FIFO stays.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || drop(std::fs::OpenOptions::new().write(true).open(&fifo)))
    };
    let f = fifo.to_str().unwrap();
    let (code, _, stderr) = run(&["-serve", "-socket", socket, "-token-file", f], &[]);
    writer.join().unwrap();
    assert_eq!(
        (code, stderr),
        (
            1,
            format!("{}remora: read --token-file: empty token\n", left_in_place(f))
        )
    );
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A symlink to a token: read through, but the link is not removed.
    let target = dir.path().join("target");
    std::fs::write(&target, "\n").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let l = link.to_str().unwrap();
    let (code, _, stderr) = run(&["-serve", "-socket", socket, "-token-file", l], &[]);
    assert_eq!(
        (code, stderr),
        (
            1,
            format!("{}remora: read --token-file: empty token\n", left_in_place(l))
        )
    );
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());

    // A rejected token in a regular file: the file was read, so it goes.
    let regular = dir.path().join("regular");
    std::fs::write(&regular, "\n").unwrap();
    let (code, _, _) = run(
        &["-serve", "-socket", socket, "-token-file", regular.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1);
    assert!(!regular.exists());

    // As root: a character device with /dev/null's numbers survives.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let node = dir.path().join("null");
        let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
        assert_eq!(made, 0);
        let n = node.to_str().unwrap();
        let (code, _, stderr) = run(&["-serve", "-socket", socket, "-token-file", n], &[]);
        assert_eq!(
            (code, stderr),
            (
                1,
                format!("{}remora: read --token-file: empty token\n", left_in_place(n))
            )
        );
        assert!(std::fs::symlink_metadata(&node).unwrap().file_type().is_char_device());
    }
}
