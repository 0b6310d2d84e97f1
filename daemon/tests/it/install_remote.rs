//! `ci/install-remote` against a real sshd, as an operator meets it.
//!
//! The test starts Debian's `openssh-server` on 127.0.0.1 with its own
//! config, host key and client key. As root it logs in to a throwaway
//! account made for the run (home in the test's temp dir, removed after);
//! otherwise it logs in as the current user, with `HOME` set to a temp dir
//! by the server's config, so nothing lands in the real home.
//!
//! Through that server it installs a tarball packed by `ci/pack` (as
//! `ci/release` packs), starts the daemon the way `docs/OPERATING.md` does, upgrades
//! the binary under the running daemon, is refused a tarball whose checksum
//! does not match and a dist/ without a tarball for the remote's
//! architecture, then drives a ping and a spawn through `remora -bridge`
//! over ssh, and stops the daemon. `--nocapture` shows the transcript.
//!
//! Without sshd, ssh or ssh-keygen (or, as root, useradd) it skips, saying
//! so; under `REMORA_REQUIRE_ALL_TOOLS=1` (`.ci/run`, which installs
//! openssh-server) it fails instead.
//!
//! What needs no network (how `--desktop` treats an existing
//! `remora.conf`) runs the script's remote half here instead, through a
//! stand-in for ssh on PATH ([`local_ssh`]).

use crate::common::skip::skip;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const TOKEN: &str = "install-remote-test-token";
/// The remote commands of `docs/OPERATING.md`, verbatim (checked below). Serving: a
/// private directory for the socket, the token on stdin, the log kept
/// with `2>>`.
const SERVE: &str = "mkdir -p -m 700 ~/.remora && ~/.local/bin/remora -serve -socket ~/.remora/rpc.sock -token-fd 0 2>>~/.remora/daemon.log";
const BRIDGE: &str = "~/.local/bin/remora -bridge -socket ~/.remora/rpc.sock";
const STOP: &str = "read -r t && CLAUDE_RPC_TOKEN=$t ~/.local/bin/remora -stop -socket ~/.remora/rpc.sock";
/// Bounds a wedged ssh or daemon, so a broken run fails instead of hanging.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `name` on PATH or in the sbin directories a non-root PATH may lack.
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    eprintln!(
        "$ {cmd:?}\n  -> {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The account the test logs in to.
struct Account {
    name: String,
    home: PathBuf,
    /// Made by this test (root only), so removed by it.
    created: bool,
}

impl Account {
    fn make(base: &Path, root: bool) -> Result<Account, String> {
        let home = base.join("home");
        if !root {
            std::fs::create_dir(&home).unwrap();
            let name = String::from_utf8(run_ok(Command::new("id").arg("-un")).stdout).unwrap();
            return Ok(Account {
                name: name.trim().to_string(),
                home,
                created: false,
            });
        }
        let useradd = find_tool("useradd").ok_or("running as root without useradd to make a throwaway account")?;
        // The home sits in the temp dir, which the account must traverse.
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o711)).unwrap();
        // Tests run in parallel in one process: one account each.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("remora-it-{}-{n}", std::process::id());
        // `*`: no password, but not locked (sshd refuses a locked account).
        run_ok(
            Command::new(useradd)
                .args(["-M", "-s", "/bin/sh", "-p", "*", "-d"])
                .arg(&home)
                .arg(&name),
        );
        let account = Account {
            name,
            home,
            created: true,
        };
        std::fs::create_dir(&account.home).unwrap();
        Ok(account)
    }

    /// Gives `path` to the account (a no-op for the current user).
    fn own(&self, path: &Path) {
        if self.created {
            run_ok(
                Command::new("chown")
                    .arg("-R")
                    .arg(format!("{0}:{0}", self.name))
                    .arg(path),
            );
        }
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        if self.created {
            let _ = Command::new(find_tool("userdel").unwrap_or_else(|| "userdel".into()))
                .arg(&self.name)
                .status();
        }
    }
}

/// A private sshd on 127.0.0.1 and the ssh options that reach it.
struct Sshd {
    child: Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    ssh_options: Vec<String>,
    destination: String,
}

impl Sshd {
    fn start(dir: &Path, sshd: &Path, account: &Account, root: bool) -> Sshd {
        std::fs::create_dir(dir).unwrap();
        let keygen = |path: &Path| {
            run_ok(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(path),
            );
        };
        let host_key = dir.join("host_ed25519");
        let client_key = dir.join("client_ed25519");
        keygen(&host_key);
        keygen(&client_key);
        let client_pub = std::fs::read_to_string(client_key.with_extension("pub")).unwrap();

        // The account's own ~/.ssh/authorized_keys, as on a real remote.
        let ssh_dir = account.home.join(".ssh");
        std::fs::create_dir(&ssh_dir).unwrap();
        std::fs::write(ssh_dir.join("authorized_keys"), &client_pub).unwrap();
        std::fs::set_permissions(&ssh_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&account.home, std::fs::Permissions::from_mode(0o700)).unwrap();
        account.own(&account.home);

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = format!(
            "ListenAddress 127.0.0.1:{port}\nHostKey {}\nPidFile none\nUsePAM no\n\
             PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             AllowUsers {}\nLogLevel VERBOSE\n",
            host_key.display(),
            account.name
        );
        if root {
            // Privilege separation needs its empty directory (Debian's
            // service unit makes it; a container may not have it yet).
            std::fs::create_dir_all("/run/sshd").unwrap();
            config.push_str("PermitRootLogin no\nAuthorizedKeysFile .ssh/authorized_keys\n");
        } else {
            // The current user: keep the install out of the real home, and
            // take the key from there too (StrictModes would refuse a path
            // through the world-writable /tmp).
            config.push_str(&format!(
                "SetEnv HOME={0}\nAuthorizedKeysFile {0}/.ssh/authorized_keys\nStrictModes no\n",
                account.home.display()
            ));
        }
        let config_path = dir.join("sshd_config");
        std::fs::write(&config_path, config).unwrap();

        let known_hosts = dir.join("known_hosts");
        let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {host_pub}")).unwrap();

        let mut child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sshd");
        // Ready when it says it listens; its log is kept for failures.
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("Server listening on") {
                    let _ = ready_tx.send(());
                }
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        if ready_rx.recv_timeout(HANG_GUARD).is_err() {
            let _ = child.kill();
            panic!("sshd did not start:\n{}", log.lock().unwrap());
        }
        let options = [
            "-F",
            "/dev/null",
            "-p",
            &port.to_string(),
            "-i",
            client_key.to_str().unwrap(),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            &format!("UserKnownHostsFile={}", known_hosts.display()),
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "LogLevel=ERROR",
        ];
        Sshd {
            child,
            log,
            ssh_options: options.iter().map(|s| s.to_string()).collect(),
            destination: format!("{}@127.0.0.1", account.name),
        }
    }

    fn ssh(&self, remote_command: &str) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(&self.ssh_options).arg(&self.destination).arg(remote_command);
        cmd
    }

    /// `remote_command` with `input` on its stdin.
    fn ssh_with_input(&self, remote_command: &str, input: &str) -> Output {
        let mut child = self
            .ssh(remote_command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        eprintln!(
            "$ ssh … {remote_command:?} <<< {input:?}\n  -> {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn install(&self, dist: &Path) -> Output {
        self.install_remote(&["--dist".as_ref(), dist.as_os_str()])
    }

    /// `ci/install-remote <options> HOST <ssh options>`, executed as the
    /// operator's guide calls it (so a missing run bit fails here).
    fn install_remote(&self, options: &[&std::ffi::OsStr]) -> Output {
        let mut cmd = Command::new(workspace().join("ci/install-remote"));
        cmd.args(options)
            .arg(&self.destination)
            .args(&self.ssh_options)
            .stdin(Stdio::null());
        run(&mut cmd)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("sshd log:\n{}", self.log.lock().unwrap());
        }
    }
}

/// Stops the remote daemon when the test ends, whatever happened.
struct RemoteDaemon<'a>(&'a Sshd);

impl Drop for RemoteDaemon<'_> {
    fn drop(&mut self) {
        let _ = self.0.ssh_with_input(STOP, &format!("{TOKEN}\n"));
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Packs `binary` with `ci/pack` into `dist` and writes its SHA256SUMS;
/// returns the tarball's name.
fn pack(binary: &Path, version: &str, target: &str, dist: &Path) -> String {
    let out = run_ok(
        Command::new("bash")
            .arg(workspace().join("ci/pack"))
            .arg(binary)
            .args([version, target])
            .arg(dist),
    );
    let tarball = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let name = tarball.file_name().unwrap().to_str().unwrap().to_string();
    let sum = sha256_hex(&std::fs::read(&tarball).unwrap());
    std::fs::write(dist.join("SHA256SUMS"), format!("{sum}  {name}\n")).unwrap();
    name
}

/// This build's `remora`, without its debug info when `strip` is at hand:
/// a sixth of the size to pack and send (the test's runtime is mostly that).
fn stripped_build(dir: &Path) -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_remora"));
    let stripped = dir.join("remora-v2");
    match Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(&binary)
        .status()
    {
        Ok(s) if s.success() => stripped,
        _ => binary,
    }
}

/// A line from the bridge's stdout, or a failure if none comes.
fn bridge_line(lines: &mpsc::Receiver<String>) -> String {
    let line = lines.recv_timeout(HANG_GUARD).expect("a line from the bridge");
    eprintln!("< {line}");
    line
}

fn bridge_send(stdin: &mut ChildStdin, line: &str) {
    eprintln!("> {line}");
    stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
}

#[test]
fn the_operating_guide_shows_the_remote_commands_this_test_runs() {
    let guide = std::fs::read_to_string(workspace().join("docs/OPERATING.md")).unwrap();
    for command in [SERVE, BRIDGE, STOP] {
        assert!(
            guide.contains(&format!("'{command}'")),
            "docs/OPERATING.md lacks '{command}'"
        );
    }
}

/// What both tests run against: an account, its sshd, and a temp dir.
struct Remote {
    // Field order is drop order: sshd first, then the account, then the files.
    server: Sshd,
    account: Account,
    tmp: tempfile::TempDir,
}

/// The remote, or `None` (after saying why) where the tools are missing.
fn remote() -> Option<Remote> {
    let Some(sshd_bin) = find_tool("sshd") else {
        skip("no sshd (Debian: apt-get install openssh-server)");
        return None;
    };
    for tool in ["ssh", "ssh-keygen"] {
        if find_tool(tool).is_none() {
            skip(&format!("no {tool} (Debian: apt-get install openssh-client)"));
            return None;
        }
    }
    let arch = std::env::consts::ARCH;
    if !["x86_64", "aarch64"].contains(&arch) {
        skip(&format!(
            "release tarballs exist for x86_64 and aarch64, not this {arch}"
        ));
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tmp = tempfile::tempdir().unwrap();
    let account = match Account::make(tmp.path(), root) {
        Ok(a) => a,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    let server = Sshd::start(&tmp.path().join("sshd"), &sshd_bin, &account, root);
    // The remote's HOME must be the temp home before anything is installed.
    let home = run_ok(&mut server.ssh("echo $HOME")).stdout;
    assert_eq!(String::from_utf8_lossy(&home).trim(), account.home.to_str().unwrap());
    Some(Remote { server, account, tmp })
}

#[test]
fn install_upgrade_refusal_and_bridge_over_a_real_sshd() {
    // Bound in this order so they drop as sshd, account, temp dir.
    let Some(Remote { tmp, account, server }) = remote() else {
        return;
    };
    let arch = std::env::consts::ARCH;

    // Two releases of this build: v1 carries a trailing byte (it still
    // runs), so the upgrade visibly replaces the file.
    let target = format!("{arch}-unknown-linux-musl");
    let binary = stripped_build(tmp.path());
    let v2_bytes = std::fs::read(&binary).unwrap();
    let mut v1_bytes = v2_bytes.clone();
    v1_bytes.push(0);
    let v1_binary = tmp.path().join("remora-v1");
    std::fs::write(&v1_binary, &v1_bytes).unwrap();
    let (dist1, dist2) = (tmp.path().join("dist1"), tmp.path().join("dist2"));
    pack(&v1_binary, "v0.0.1", &target, &dist1);
    let v2_tarball = pack(&binary, "v0.0.2", &target, &dist2);
    let installed = account.home.join(".local/bin/remora");
    let installed_bytes = || std::fs::read(&installed).unwrap_or_default();

    // Install.
    let out = server.install(&dist1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "install failed");
    assert!(
        stdout.contains(&format!("installed {}: remora ", installed.display())),
        "{stdout}"
    );
    // ssh's PATH for commands does not hold ~/.local/bin: the script says
    // how to call it.
    assert!(stdout.contains("is not on the PATH"), "{stdout}");
    assert!(installed_bytes() == v1_bytes, "the installed file is not v1");

    // The daemon as docs/OPERATING.md starts it.
    let _daemon = RemoteDaemon(&server);
    let out = server.ssh_with_input(SERVE, &format!("{TOKEN}\n"));
    assert!(out.status.success(), "-serve over ssh failed");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Remora remote server listening on "));

    // Upgrade under the running daemon.
    let out = server.install(&dist2);
    assert!(out.status.success(), "upgrade failed");
    assert!(installed_bytes() == v2_bytes, "the upgrade did not replace the file");

    // A tarball whose checksum does not match is refused, nothing changes.
    let bad = tmp.path().join("dist-bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::copy(dist2.join(&v2_tarball), bad.join(&v2_tarball)).unwrap();
    std::fs::write(bad.join("SHA256SUMS"), format!("{}  {v2_tarball}\n", "0".repeat(64))).unwrap();
    std::fs::write(&installed, &v1_bytes).unwrap();
    let out = server.install(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr.trim_end(),
        format!("install-remote: on the remote: checksum mismatch for {v2_tarball}: nothing installed")
    );
    assert!(installed_bytes() == v1_bytes, "a refused install changed the binary");
    std::fs::write(&installed, &v2_bytes).unwrap();
    assert_nothing_beside(&installed);

    // A dist/ without a tarball for the remote's architecture.
    let other = tmp.path().join("dist-other");
    std::fs::create_dir(&other).unwrap();
    let other_arch = if arch == "x86_64" { "aarch64" } else { "x86_64" };
    std::fs::write(
        other.join("SHA256SUMS"),
        format!(
            "{}  remora-v0.0.2-{other_arch}-unknown-linux-musl.tar.gz\n",
            "1".repeat(64)
        ),
    )
    .unwrap();
    let out = server.install(&other);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "install-remote: {}/SHA256SUMS lists no tarball for {target}: build it (ci/release {target})",
            other.display()
        )
    );

    // A ping and a spawn through the upgraded binary's bridge, over ssh, to
    // the daemon the first version started.
    ping_and_spawn_through(&server, BRIDGE);

    // The daemon's log, kept by `2>>`, saw those connections.
    let log = std::fs::read_to_string(account.home.join(".remora/daemon.log")).unwrap();
    assert!(log.contains("New connection"), "daemon log: {log}");
    let out = server.ssh_with_input(STOP, &format!("{TOKEN}\n"));
    assert!(out.status.success(), "-stop over ssh failed");
}

/// Desktop's regex on `--version` output: /claude-ssh\s+(\S+)/.
fn desktop_token(version: &str) -> Option<&str> {
    let at = version.find("claude-ssh")?;
    let rest = &version[at + "claude-ssh".len()..];
    let trimmed = rest.trim_start();
    if trimmed.len() == rest.len() {
        return None; // \s+ needs at least one blank
    }
    trimmed.split_whitespace().next()
}

#[test]
fn desktops_regex_as_the_test_reads_it() {
    let sha = "90fca6e6".repeat(5);
    assert_eq!(
        desktop_token(&format!("claude-ssh {sha} (via remora v1, built x)\n")),
        Some(sha.as_str())
    );
    assert_eq!(desktop_token("remora v0.1.0 (built x)\n"), None);
    assert_eq!(desktop_token("claude-sshX y"), None);
}

/// Plays Claude Desktop's part against `ci/install-remote --desktop`:
/// a cached reference at `srv/<sha>/server`, the install, the client's
/// version check, a daemon started with the client's argv, a bridge, a CLI
/// install into the client's cli-dir, `-stop`, and `--restore`.
#[test]
fn desktop_install_and_restore_over_a_real_sshd() {
    let Some(Remote { tmp, account, server }) = remote() else {
        return;
    };
    let arch = std::env::consts::ARCH;
    // The build Desktop deploys now: remora answers as its record says.
    let sha = "89cb6289".repeat(5);
    let srv = account.home.join(".claude/remote/srv").join(&sha);
    std::fs::create_dir_all(&srv).unwrap();
    let reference = format!("#!/bin/sh\necho \"claude-ssh {sha} (built 2026-09-24T00:00:00Z)\"\n");
    std::fs::write(srv.join("server"), &reference).unwrap();
    std::fs::set_permissions(srv.join("server"), std::fs::Permissions::from_mode(0o755)).unwrap();
    account.own(&account.home.join(".claude"));

    let dist = tmp.path().join("dist");
    pack(
        &stripped_build(tmp.path()),
        "v0.0.3",
        &format!("{arch}-unknown-linux-musl"),
        &dist,
    );

    // The install, as README and docs/OPERATING.md call it.
    let out = server.install_remote(&["--desktop".as_ref(), "--dist".as_ref(), dist.as_os_str()]);
    assert!(out.status.success(), "--desktop failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "srv/{sha}/server: claude-ssh {sha} (via remora {}, built ",
            remora::base::version::ID
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("(the reference is kept as server.reference)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(srv.join("server.reference")).unwrap(),
        reference
    );

    // What Desktop does before a session: run the cached file's --version,
    // take the token after claude-ssh, compare it with the pin.
    let server_path = format!("~/.claude/remote/srv/{sha}/server");
    let version = String::from_utf8(run_ok(&mut server.ssh(&format!("{server_path} --version"))).stdout).unwrap();
    assert_eq!(desktop_token(&version), Some(sha.as_str()), "{version}");
    assert!(version.contains("(via remora "), "{version}");

    // A session: the daemon with the client's argv, a token file, the
    // socket under ~/.claude/remote/run.
    let run = "~/.claude/remote/run/0a1b2c3d";
    let out = server.ssh_with_input(
        &format!(
            "mkdir -p -m 700 {run} && umask 077 && cat >{run}/token && \
             {server_path} --serve --socket {run}/rpc.sock --token-file {run}/token"
        ),
        &format!("{TOKEN}\n"),
    );
    assert!(out.status.success(), "--serve failed");
    let stop = format!("{server_path} --stop --socket {run}/rpc.sock");
    struct StopOnDrop<'a>(&'a Sshd, String);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            let _ = self.0.ssh_with_input(&self.1, "");
        }
    }
    let daemon_guard = StopOnDrop(&server, stop.clone());
    // Stamped as the pinned build: the reference's wording, and 89cb6289
    // ends it with the daemon's pid and instance.
    let banner = String::from_utf8_lossy(&out.stdout).into_owned();
    let socket = account.home.join(".claude/remote/run/0a1b2c3d/rpc.sock");
    let prefix = format!("Claude remote server listening on {} (pid ", socket.display());
    assert!(banner.starts_with(&prefix), "{banner}");
    assert!(banner.contains(", instance ") && banner.ends_with(")\n"), "{banner}");
    let bridge = format!("{server_path} --bridge --socket {run}/rpc.sock");
    ping_and_spawn_through(&server, &bridge);
    answers_as_89cb6289(&server, &bridge, &account.home);

    // A CLI into the client's cli-dir, from an uploaded zstd blob.
    let cli = b"#!/bin/sh\necho \"2.1.300 (Claude Code)\"\n";
    let blob = zstd::encode_all(&cli[..], 3).unwrap();
    let mut upload = server
        .ssh("umask 077 && cat >~/.claude/remote/cli.zst")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    upload.stdin.take().unwrap().write_all(&blob).unwrap();
    assert!(upload.wait().unwrap().success(), "upload failed");
    // 89cb6289 installs into ~/.claude/remote/ccd-cli without --cli-dir.
    let out = run_ok(&mut server.ssh(&format!(
        "{server_path} --install --cli-version 2.1.300 --cli-zst ~/.claude/remote/cli.zst"
    )));
    let facts = String::from_utf8_lossy(&out.stdout);
    let cli_path = account.home.join(".claude/remote/ccd-cli/2.1.300");
    assert!(facts.starts_with("__INSTALL_RESULT__{"), "{facts}");
    assert!(
        facts.contains(&format!("\"cliPath\":\"{}\"", cli_path.display())),
        "{facts}"
    );
    assert!(!facts.contains("cliError"), "{facts}");
    assert_eq!(std::fs::read(&cli_path).unwrap(), cli);

    // -stop as Desktop runs it (no token in the environment).
    let out = run_ok(&mut server.ssh(&stop));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "stopped");
    drop(daemon_guard);

    // Restore: the reference is back and remora's settings are gone.
    let out = server.install_remote(&["--desktop".as_ref(), "--restore".as_ref()]);
    assert!(out.status.success(), "--restore failed");
    assert_eq!(std::fs::read_to_string(srv.join("server")).unwrap(), reference);
    assert!(!srv.join("server.reference").exists());
    assert!(!srv.join("remora.conf").exists());
    let version = String::from_utf8(run_ok(&mut server.ssh(&format!("{server_path} --version"))).stdout).unwrap();
    assert_eq!(version, format!("claude-ssh {sha} (built 2026-09-24T00:00:00Z)\n"));
}

/// 89cb6289's surface through `bridge_command` over ssh, as the records
/// give it: `launcher.resolve` with no managed settings, a spawn through a
/// launcher, and a worktree remove that keeps a branch with unpushed work.
fn answers_as_89cb6289(server: &Sshd, bridge_command: &str, home: &std::path::Path) {
    let repo = home.join("project");
    let wt = repo.join(".claude/worktrees/wt");
    let git = "git -c user.email=t@example.com -c user.name=t -c init.defaultBranch=main";
    run_ok(&mut server.ssh(&format!(
        "{git} init -q ~/project && cd ~/project && {git} commit -q --allow-empty -m init && \
         {git} worktree add -q -b wt .claude/worktrees/wt && cd .claude/worktrees/wt && \
         {git} commit -q --allow-empty -m unpushed"
    )));
    let (mut bridge, mut to_bridge, lines) = open_bridge(server, bridge_command);
    let request = |id: u32, method: &str, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params},"auth":"{TOKEN}"}}"#)
    };
    // The reply to `id`, skipping stream frames.
    let reply = |id: u32| loop {
        let line = bridge_line(&lines);
        if line.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"#)) {
            return line;
        }
    };
    bridge_send(
        &mut to_bridge,
        &request(11, "launcher.resolve", r#"{"cliPath":"/bin/true"}"#),
    );
    assert_eq!(reply(11), r#"{"jsonrpc":"2.0","id":11,"result":{"status":"none"}}"#);
    let spawn = r#"{"id":"wrapped","command":"/bin/echo","args":["hi"],"launcher":["/usr/bin/env"]}"#;
    bridge_send(&mut to_bridge, &request(12, "process.spawn", spawn));
    assert!(reply(12).contains(r#""result":"#), "a spawn through a launcher");
    let remove = format!(
        r#"{{"baseRepo":"{}","worktreePath":"{}","branchName":"wt"}}"#,
        repo.display(),
        wt.display()
    );
    bridge_send(&mut to_bridge, &request(13, "git.worktree_remove", &remove));
    assert_eq!(
        reply(13),
        r#"{"jsonrpc":"2.0","id":13,"result":{"success":true,"branchKept":true}}"#
    );
    drop(to_bridge);
    let _ = bridge.wait();
    let heads = run_ok(&mut server.ssh("git -C ~/project for-each-ref '--format=%(refname:short)' refs/heads/"));
    assert!(
        String::from_utf8_lossy(&heads.stdout).lines().any(|h| h == "wt"),
        "the unpushed branch was deleted"
    );
}

/// `bridge_command` run over ssh: the process, its stdin, and its stdout
/// as lines arriving on a channel (read by a thread of its own).
fn open_bridge(server: &Sshd, bridge_command: &str) -> (Child, ChildStdin, mpsc::Receiver<String>) {
    let mut bridge = server
        .ssh(bridge_command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let to_bridge = bridge.stdin.take().unwrap();
    let from_bridge = bridge.stdout.take().unwrap();
    let (line_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from_bridge).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    (bridge, to_bridge, lines)
}

/// A ping and a spawn of `echo hi` through `bridge_command` run over ssh.
fn ping_and_spawn_through(server: &Sshd, bridge_command: &str) {
    let (mut bridge, mut to_bridge, lines) = open_bridge(server, bridge_command);
    bridge_send(
        &mut to_bridge,
        &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"{TOKEN}"}}"#),
    );
    assert_eq!(
        bridge_line(&lines),
        r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#
    );
    bridge_send(
        &mut to_bridge,
        &format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"process.spawn","params":{{"id":"p1","command":"echo","args":["hi"]}},"auth":"{TOKEN}"}}"#
        ),
    );
    let mut stdout = Vec::new();
    let mut replied = false;
    loop {
        let v: Value = serde_json::from_str(&bridge_line(&lines)).unwrap();
        if v["id"] == 2 {
            assert!(v.get("error").is_none(), "spawn failed: {v}");
            replied = true;
        } else if v["processId"] == "p1" && v["stream"] == "stdout" {
            let data = v["data"].as_str().unwrap();
            use base64::Engine;
            stdout.extend(base64::engine::general_purpose::STANDARD.decode(data).unwrap());
        } else if v["processId"] == "p1" && v["stream"] == "exit" {
            assert_eq!(v["exitCode"], 0, "{v}");
            break;
        }
    }
    assert!(replied, "no reply to process.spawn");
    assert_eq!(stdout, b"hi\n");
    drop(to_bridge);
    assert!(bridge.wait().unwrap().success(), "the bridge failed");
}

/// A stand-in for ssh in `<dir>/bin`: it runs the remote command on this
/// machine, as sshd hands it to the remote user's shell (`sh -c`, the
/// arguments after the host joined by spaces). With it, the remote half of
/// `ci/install-remote` runs here without an sshd; returns the directory to
/// put first on PATH.
fn local_ssh(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh = bin.join("ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\n# Options up to `--`, then the host, then the remote command.\n\
         while [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift 2\nexec sh -c \"$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `ci/install-remote <options> localhost` through [`local_ssh`], with
/// `home` as the remote's home.
fn install_remote_here(bin: &Path, home: &Path, options: &[&std::ffi::OsStr]) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(workspace().join("ci/install-remote"));
    cmd.args(options)
        .arg("localhost")
        .env("PATH", path)
        .env("HOME", home)
        .stdin(Stdio::null());
    run(&mut cmd)
}

/// Audit F5 (issue 44): `--desktop` copied the other keys of a
/// `remora.conf` the daemon ignores (mode 0666, another user's, a link)
/// into a fresh 0600 file, which the daemon then trusts: a
/// `metrics-addr = 0.0.0.0:9464` anyone could have written went live.
/// `--restore` did the same. A line is kept only from a file that passes
/// the daemon's own rule; any other is replaced whole, and the install
/// says so. Runs the script's remote half here, through a stand-in ssh.
#[test]
fn desktop_install_and_restore_keep_no_line_of_a_conf_the_daemon_ignores() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let srv = home.join(".claude/remote/srv");
    let bin = local_ssh(tmp.path());
    let sha = |i: u32| format!("89cb6289{i:032x}");
    let planted = "metrics-addr = 0.0.0.0:9464\nkeep-children = true\n";
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // srv/<sha 1>: world-writable; <sha 2>: a link to a private file;
    // <sha 3>: private, the daemon reads it (its line stays); <sha 4>, as
    // root: another user's.
    let elsewhere = tmp.path().join("elsewhere.conf");
    std::fs::write(&elsewhere, planted).unwrap();
    mode(&elsewhere, 0o600);
    let plant = |with_stamp: bool| {
        let stamp = |i| {
            if with_stamp {
                format!("reference-build = {}\n", sha(i))
            } else {
                String::new()
            }
        };
        for i in 1..=4 {
            std::fs::create_dir_all(srv.join(sha(i))).unwrap();
            let _ = std::fs::remove_file(srv.join(sha(i)).join("remora.conf"));
        }
        let wide = srv.join(sha(1)).join("remora.conf");
        std::fs::write(&wide, format!("{}{planted}", stamp(1))).unwrap();
        mode(&wide, 0o666);
        std::os::unix::fs::symlink(&elsewhere, srv.join(sha(2)).join("remora.conf")).unwrap();
        let own = srv.join(sha(3)).join("remora.conf");
        std::fs::write(&own, format!("{}log-level = debug\n", stamp(3))).unwrap();
        mode(&own, 0o600);
        let foreign = srv.join(sha(4)).join("remora.conf");
        std::fs::write(&foreign, format!("{}{planted}", stamp(4))).unwrap();
        mode(&foreign, 0o644);
        if root {
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        }
    };
    let untrusted: &[u32] = if root { &[1, 2, 4] } else { &[1, 2] };
    plant(false);
    let dist = tmp.path().join("dist");
    let arch = std::env::consts::ARCH;
    pack(
        &stripped_build(tmp.path()),
        "v0.0.3",
        &format!("{arch}-unknown-linux-musl"),
        &dist,
    );

    let out = install_remote_here(
        &bin,
        &home,
        &["--desktop".as_ref(), "--dist".as_ref(), dist.as_os_str()],
    );
    assert!(out.status.success(), "--desktop failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let header = |i| {
        format!(
            "# written by ci/install-remote --desktop: the build this directory stands in for\nreference-build = {}\n",
            sha(i)
        )
    };
    for &i in untrusted {
        let conf = srv.join(sha(i)).join("remora.conf");
        let meta = std::fs::symlink_metadata(&conf).unwrap();
        assert!(
            meta.file_type().is_file(),
            "{}: replaced by a file of its own",
            conf.display()
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), header(i), "{}", conf.display());
        assert!(
            stderr.contains(&format!(
                "install-remote: srv/{}/remora.conf is not a file the daemon reads (a link, owned by another user, writable by group or others, or over 64 KiB): none of its lines kept\n",
                sha(i)
            )),
            "{stderr}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&elsewhere).unwrap(),
        planted,
        "the link's target is left alone"
    );
    // The file the daemon reads keeps its line.
    let own = srv.join(sha(3)).join("remora.conf");
    assert_eq!(
        std::fs::read_to_string(&own).unwrap(),
        format!("{}log-level = debug\n", header(3))
    );
    assert!(
        !stderr.contains(&format!("srv/{}/remora.conf is not", sha(3))),
        "{stderr}"
    );

    // --restore: the same files again, now with a reference-build line.
    plant(true);
    let out = install_remote_here(&bin, &home, &["--desktop".as_ref(), "--restore".as_ref()]);
    assert!(out.status.success(), "--restore failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for &i in untrusted {
        let conf = srv.join(sha(i)).join("remora.conf");
        assert!(std::fs::symlink_metadata(&conf).is_err(), "{} was kept", conf.display());
        assert!(
            stderr.contains(&format!("srv/{}/remora.conf is not a file the daemon reads", sha(i))),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), planted);
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "log-level = debug\n");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "srv/{}: kept remora.conf (it holds other keys), without reference-build",
            sha(3)
        )),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Issue 47 (signed releases): a dist/ in the reference's layout
/// (`manifest.json` beside `<platform>/claude-ssh.zst`, as `ci/release`
/// writes it through `ci/manifest`) installs only when the platform's .zst
/// has the size and sha256 the manifest gives. A tampered .zst (one byte
/// flipped, or one byte more) is refused before anything is sent, with one
/// line naming both values, and the installed binary stays as it was.
/// Runs the script's remote half here, through a stand-in ssh.
#[test]
fn a_release_in_the_reference_layout_installs_only_what_its_manifest_names() {
    for tool in ["zstd", "python3"] {
        if find_tool(tool).is_none() {
            skip(&format!("no {tool} (Debian: apt-get install {tool})"));
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let bin = local_ssh(tmp.path());
    let binary = stripped_build(tmp.path());
    let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let dist = tmp.path().join("dist");
    let manifest = |args: &[&std::ffi::OsStr]| {
        let out = run_ok(Command::new(workspace().join("ci/manifest")).args(args));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let platform = manifest(&["platform".as_ref(), target.as_ref()]);
    // `ci/manifest add` compresses at level 19, which on a debug build
    // takes minutes on a loaded machine; the check does not depend on the
    // level, so this test compresses fast (`ci/release` runs `add`).
    let zst = dist.join(&platform).join("claude-ssh.zst");
    std::fs::create_dir_all(zst.parent().unwrap()).unwrap();
    run_ok(
        Command::new("zstd")
            .args(["-1", "-q", "-f", "-o"])
            .arg(&zst)
            .arg(&binary),
    );
    manifest(&["write".as_ref(), dist.as_os_str(), "v0.0.4".as_ref(), platform.as_ref()]);
    let good = std::fs::read(&zst).unwrap();
    assert_eq!(
        std::fs::read_to_string(dist.join("manifest.json")).unwrap(),
        format!(
            "{{\"version\":\"v0.0.4\",\"platforms\":{{\"{platform}\":{{\"checksum\":\"{}\",\"size\":{}}}}}}}\n",
            sha256_hex(&good),
            good.len()
        )
    );

    // The untampered release installs the binary it was made from.
    let installed = home.join(".local/bin/remora");
    let options = ["--dist".as_ref(), dist.as_os_str()];
    let out = install_remote_here(&bin, &home, &options);
    assert!(out.status.success(), "install from the manifest failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "verified {platform}/claude-ssh.zst against {}/manifest.json (version v0.0.4)",
            dist.display()
        )),
        "{stdout}"
    );
    assert!(std::fs::read(&installed).unwrap() == std::fs::read(&binary).unwrap());

    // Tampered: the same size with one byte changed, then one byte more.
    let before = b"#!/bin/sh\necho the previous install\n";
    std::fs::write(&installed, before).unwrap();
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let mut longer = good.clone();
    longer.push(0);
    for (bad, why) in [
        (
            &flipped,
            format!(
                "has sha256 {}, manifest.json says {}",
                sha256_hex(&flipped),
                sha256_hex(&good)
            ),
        ),
        (
            &longer,
            format!("is {} bytes, manifest.json says {}", longer.len(), good.len()),
        ),
    ] {
        std::fs::write(&zst, bad).unwrap();
        let out = install_remote_here(&bin, &home, &options);
        let why = format!("{} {why}: it does not match", zst.display());
        assert_refused(&out, &why, &installed, before);
    }

    // A manifest without the remote's platform.
    std::fs::write(&zst, &good).unwrap();
    std::fs::write(
        dist.join("manifest.json"),
        "{\"version\":\"v0.0.4\",\"platforms\":{}}\n",
    )
    .unwrap();
    let out = install_remote_here(&bin, &home, &options);
    let why = format!("{}/manifest.json lists no {platform}: build it", dist.display());
    assert_refused(&out, &why, &installed, before);
}

/// A refused install: exit 1, the one line `install-remote: <why>: nothing
/// installed`, no upload started, the installed binary unchanged and
/// nothing left beside it.
fn assert_refused(out: &Output, why: &str, installed: &Path, before: &[u8]) {
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!("install-remote: {why}: nothing installed")
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("installing"),
        "the upload started"
    );
    assert_eq!(
        std::fs::read(installed).unwrap(),
        before,
        "a refused install changed the binary"
    );
    assert_nothing_beside(installed);
}

/// Nothing but `remora` in the install directory: a refused install left
/// no temporary file behind.
fn assert_nothing_beside(installed: &Path) {
    let leftovers: Vec<_> = std::fs::read_dir(installed.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "remora")
        .collect();
    assert!(leftovers.is_empty(), "left in ~/.local/bin: {leftovers:?}");
}
