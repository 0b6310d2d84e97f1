//! One remora, many reference builds: started with each recorded build's
//! stamp, remora answers `server.capabilities` with that build's frame
//! (methods, features and members in order; `version`, `instanceId` and
//! `startedAt` are per binary and per boot), prints that build's banner,
//! and keeps the behaviours that differ between builds apart. The frames
//! are the records' (schubydoo/claustrum `docs/PROTOCOL.md` "server.*" of
//! each era; `testdata/socket_responses.golden.json` for 19f30c46/90fca6e6),
//! less the features `remora::protocol::build::NOT_SERVED` names.

use crate::common::{launch_to_banner_line, remora_command, serve_command, stop_serving, Client, TOKEN};
use std::path::{Path, PathBuf};

const M18: &[&str] = &[
    "server.ping",
    "server.capabilities",
    "server.shutdown",
    "files.list",
    "files.validate",
    "files.stat",
    "files.read",
    "files.extract_tar",
    "git.info",
    "git.status",
    "git.list_branches",
    "git.worktree_create",
    "git.worktree_remove",
    "process.spawn",
    "process.stdin",
    "process.kill",
    "process.killAndWait",
    "process.reattach",
];

/// The features of 19f30c46, which 90fca6e6 lists unchanged
/// (`testdata/socket_responses.golden.json`).
const F19F30C46: &[&str] = &[
    "process.stdin.offset",
    "git.status.baseRepo",
    "git.worktree_create.timeoutMs",
    "git.worktree_create.existingBranch",
    "git.worktree.external_root",
    "server.instance_id",
];

/// A recorded build: its stamp's leading digits, methods, features, and
/// the `peerCheck` member's value without `CLAUDE_SSH_PEER_CHECK`.
struct Recorded {
    id: &'static str,
    methods: Vec<&'static str>,
    features: &'static [&'static str],
    peer_check: Option<&'static str>,
}

fn with_plugins() -> Vec<&'static str> {
    let mut m = M18.to_vec();
    m.push("plugins.prune");
    m
}

fn with_launcher() -> Vec<&'static str> {
    let mut m = with_plugins();
    let at = m.iter().position(|x| *x == "process.spawn").unwrap();
    m.insert(at, "launcher.resolve");
    m
}

fn recorded() -> Vec<Recorded> {
    vec![
        Recorded {
            id: "4534d86",
            methods: M18.to_vec(),
            features: &[
                "process.stdin.offset",
                "git.status.baseRepo",
                "git.worktree_create.timeoutMs",
                "git.worktree.external_root",
                "server.instance_id",
            ],
            peer_check: None,
        },
        Recorded {
            id: "19f30c46",
            methods: with_plugins(),
            features: F19F30C46,
            peer_check: None,
        },
        Recorded {
            id: "90fca6e6",
            methods: with_plugins(),
            features: F19F30C46,
            peer_check: None,
        },
        Recorded {
            id: "f6010b97",
            methods: with_plugins(),
            features: &[
                "process.stdin.offset",
                "git.status.baseRepo",
                "git.worktree_create.timeoutMs",
                "git.worktree_create.existingBranch",
                "process.spawn.shellAgentSocket",
                "git.worktree.external_root",
                "server.instance_id",
            ],
            peer_check: None,
        },
        Recorded {
            id: "89cb6289",
            methods: with_launcher(),
            features: &[
                "process.stdin.offset",
                "git.status.baseRepo",
                "git.info.discovered_root",
                "git.worktree_create.timeoutMs",
                "git.worktree_create.existingBranch",
                "git.worktree_remove.unpushedGuard",
                "process.spawn.shellAgentSocket",
                "launcher.managed",
                "git.worktree.external_root",
                "server.instance_id",
            ],
            peer_check: None,
        },
        Recorded {
            id: "5fd08069",
            methods: with_launcher(),
            // The record says 5fd08069 lists one more feature, unnamed in
            // every source (docs/UPSTREAM.md).
            features: &[
                "process.stdin.offset",
                "files.extract_tar.execBit",
                "git.status.baseRepo",
                "git.info.discovered_root",
                "git.worktree_create.timeoutMs",
                "git.worktree_create.existingBranch",
                "git.worktree_remove.unpushedGuard",
                "process.spawn.shellAgentSocket",
                "launcher.managed",
                "server.peer_check",
                "git.worktree.external_root",
                "server.instance_id",
            ],
            peer_check: Some("off"),
        },
    ]
}

/// A full 40-digit stamp for a recorded id.
fn stamp(id: &str) -> String {
    format!("{id:0<40}")
}

/// The capabilities result remora must answer as `r`, with the per-boot
/// members as placeholders.
fn expected_result(r: &Recorded) -> String {
    let not_served: Vec<&str> = remora::protocol::build::NOT_SERVED.iter().map(|(f, _)| *f).collect();
    let features: Vec<&str> = r.features.iter().copied().filter(|f| !not_served.contains(f)).collect();
    let list = |items: &[&str]| items.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(",");
    let mut frame = format!(
        "{{\"version\":\"V\",\"methods\":[{}],\"instanceId\":\"I\",\"startedAt\":0,\"features\":[{}]",
        list(&r.methods),
        list(&features)
    );
    if let Some(value) = r.peer_check {
        frame.push_str(&format!(",\"peerCheck\":\"{value}\""));
    }
    frame.push('}');
    frame
}

/// `result` of a capabilities reply with `version`, `instanceId` and
/// `startedAt` replaced by placeholders; also returns the instance id.
fn normalised_result(reply: &str) -> (String, String) {
    let value: serde_json::Value = serde_json::from_str(reply).unwrap();
    let mut result = value["result"].clone();
    let object = result.as_object_mut().expect("a result object");
    let instance = object["instanceId"].as_str().unwrap().to_string();
    object.insert("version".into(), "V".into());
    object.insert("instanceId".into(), "I".into());
    object.insert("startedAt".into(), 0.into());
    (serde_json::to_string(&result).unwrap(), instance)
}

/// A stamped daemon in a temp dir of its own.
struct Stamped {
    dir: tempfile::TempDir,
    socket: PathBuf,
    banner: String,
}

impl Stamped {
    fn start(stamp: &str, env: &[(&str, &str)]) -> Stamped {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("rpc.sock");
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
        let mut command = serve_command(&socket, &token);
        if !stamp.is_empty() {
            command.args(["-reference-build", stamp]);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        let banner = launch_to_banner_line(command, &dir.path().join("daemon.log"));
        Stamped { dir, socket, banner }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn capabilities(&self) -> String {
        Client::connect(&self.socket).call(1, "server.capabilities", "{}")
    }
}

impl Drop for Stamped {
    fn drop(&mut self) {
        stop_serving(&self.socket, TOKEN);
    }
}

#[test]
fn each_stamp_answers_its_builds_capabilities_frame_and_banner() {
    for r in recorded() {
        let d = Stamped::start(&stamp(r.id), &[]);
        let (result, instance) = normalised_result(&d.capabilities());
        assert_eq!(result, expected_result(&r), "build {}", r.id);
        // f6010b97 and later end the banner with the pid and the
        // instance; the product name is the reference's when stamped.
        let plain = format!("Claude remote server listening on {}", d.socket.display());
        if ["f6010b97", "89cb6289", "5fd08069"].contains(&r.id) {
            let rest = d.banner.strip_prefix(&plain).unwrap_or_else(|| panic!("{}", d.banner));
            let pid = crate::common::peer_pid(&std::os::unix::net::UnixStream::connect(&d.socket).unwrap()).unwrap();
            assert_eq!(rest, format!(" (pid {pid}, instance {instance})\n"), "build {}", r.id);
        } else {
            assert_eq!(d.banner, format!("{plain}\n"), "build {}", r.id);
        }
        assert!(
            d.log().contains(&format!("answering as reference build {}", r.id)),
            "{}",
            d.log()
        );
    }
}

#[test]
fn no_stamp_or_an_unrecorded_one_is_served_as_the_newest_build() {
    let newest = recorded().pop().unwrap();
    let unstamped = Stamped::start("", &[]);
    assert_eq!(
        unstamped.banner,
        format!("Remora remote server listening on {}\n", unstamped.socket.display())
    );
    assert_eq!(normalised_result(&unstamped.capabilities()).0, expected_result(&newest));
    assert!(unstamped
        .log()
        .contains("no reference-build stamp: answering as the newest recorded build, 5fd08069"));

    // A build Desktop pinned that no record describes.
    let unknown = "869762545054f8caf5b0e36192651744a2461d3b";
    let d = Stamped::start(unknown, &[]);
    assert_eq!(normalised_result(&d.capabilities()).0, expected_result(&newest));
    assert!(
        d.log().contains(&format!(
            "reference-build {unknown} has no record: answering as the newest recorded build, 5fd08069"
        )),
        "{}",
        d.log()
    );
}

#[test]
fn an_older_build_answers_methods_it_lacks_as_unknown() {
    let d = Stamped::start(&stamp("4534d86"), &[]);
    let reply = Client::connect(&d.socket).call(1, "plugins.prune", "{}");
    assert_eq!(
        reply,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Unknown namespace: plugins"}}"#
    );
}

/// The value a spawned child sees for `name` (`absent` when unset).
fn child_env(socket: &Path, name: &str) -> String {
    let mut c = Client::connect(socket);
    let params = format!(r#"{{"id":"e","command":"sh","args":["-c","printf %s \"${{{name}-absent}}\""]}}"#);
    let reply = c.call(1, "process.spawn", &params);
    assert!(reply.contains("\"result\""), "{reply}");
    let frames = crate::common::frames::frames_until_exit(&mut c, "e");
    String::from_utf8(crate::common::frames::stdout_of(&frames)).unwrap()
}

#[test]
fn peer_check_is_read_once_and_no_child_inherits_it() {
    let d = Stamped::start(&stamp("5fd08069"), &[("CLAUDE_SSH_PEER_CHECK", "1")]);
    assert!(
        d.capabilities().ends_with(r#""peerCheck":"unavailable"}}"#),
        "{}",
        d.capabilities()
    );
    assert_eq!(child_env(&d.socket, "CLAUDE_SSH_PEER_CHECK"), "absent");
    assert!(d.log().contains("CLAUDE_SSH_PEER_CHECK is set"), "{}", d.log());
    // Any other value is "off"; a build without the member passes the
    // variable on as any other.
    let off = Stamped::start(&stamp("5fd08069"), &[("CLAUDE_SSH_PEER_CHECK", " 1")]);
    assert!(off.capabilities().ends_with(r#""peerCheck":"off"}}"#));
    let older = Stamped::start(&stamp("89cb6289"), &[("CLAUDE_SSH_PEER_CHECK", "1")]);
    assert!(!older.capabilities().contains("peerCheck"));
    assert_eq!(child_env(&older.socket, "CLAUDE_SSH_PEER_CHECK"), "1");
}

/// `-install` as the stamp's build, with `HOME` set to `home` (or unset).
fn install(stamp: &str, home: Option<&Path>) -> std::process::Output {
    let mut command = remora_command();
    command.args(["-install", "-cli-version", "1.0", "-reference-build", stamp]);
    match home {
        Some(home) => command.env("HOME", home),
        None => command.env_remove("HOME"),
    };
    command.output().unwrap()
}

#[test]
fn install_without_cli_dir_uses_the_default_folder_where_the_build_does() {
    let home = tempfile::tempdir().unwrap();
    let out = install(&stamp("89cb6289"), Some(home.path()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let default = home.path().join(".claude/remote/ccd-cli");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("\"cliPath\":\"{}/1.0\"", default.display())),
        "{stdout}"
    );
    assert!(!stdout.contains("--cli-dir is required"), "{stdout}");
    // No home: the recorded refusal, nothing on stdout, exit 2.
    let out = install(&stamp("89cb6289"), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "remora: cannot resolve home directory: $HOME is not defined\n"
    );
    // An older build still requires the folder.
    let out = install(&stamp("90fca6e6"), Some(home.path()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--cli-dir is required"));
}

/// A gzip'd tar with `entries` (name, mode, is_dir).
fn tarball(dir: &Path, entries: &[(&str, u32, bool)]) -> PathBuf {
    let path = dir.join("a.tar.gz");
    let file = std::fs::File::create(&path).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::fast()));
    for (name, mode, is_dir) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mode(*mode);
        header.set_entry_type(if *is_dir {
            tar::EntryType::Directory
        } else {
            tar::EntryType::Regular
        });
        header.set_size(if *is_dir { 0 } else { 2 });
        // Names are written raw: `tar` refuses `..` through `append_data`.
        let raw = &mut header.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        builder
            .append(&header, if *is_dir { &b""[..] } else { &b"hi"[..] })
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
    path
}

fn extract(d: &Stamped, entries: &[(&str, u32, bool)], dest: &Path) -> String {
    let archive = tarball(d.dir.path(), entries);
    let params = format!(
        r#"{{"archivePath":"{}","destDir":"{}"}}"#,
        archive.display(),
        dest.display()
    );
    Client::connect(&d.socket).call(1, "files.extract_tar", &params)
}

#[test]
fn extract_tar_keeps_the_owner_exec_bit_and_refuses_come_back_names_only_where_the_build_does() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    for (id, exec_mode, strict) in [("5fd08069", 0o700, true), ("89cb6289", 0o600, false)] {
        let d = Stamped::start(&stamp(id), &[]);
        let dest = d.dir.path().join("dest");
        let entries = [
            ("run", 0o755, false),
            ("plain", 0o644, false),
            ("group-exec", 0o654, false),
        ];
        let reply = extract(&d, &entries, &dest);
        assert!(reply.contains(r#""success":true,"fileCount":3"#), "{id}: {reply}");
        assert_eq!(mode(dest.join("run")), exec_mode, "{id}");
        assert_eq!(mode(dest.join("plain")), 0o600, "{id}");
        assert_eq!(mode(dest.join("group-exec")), 0o600, "{id}");

        let reply = extract(&d, &[("../dest/x.txt", 0o644, false)], &dest);
        if strict {
            assert!(
                reply.ends_with(
                    r#""result":{"success":false,"fileCount":0,"error":"unsafe path in archive: ../dest/x.txt"}}"#
                ),
                "{id}: {reply}"
            );
        } else {
            assert!(reply.contains(r#""success":true,"fileCount":1"#), "{id}: {reply}");
            assert!(dest.join("x.txt").exists());
        }
    }
}
