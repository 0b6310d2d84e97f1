//! `-install`'s direct `--version` run as the records give it per build:
//! the 30 s / 120 s bounds and `cliUnresponsive` (`Switch::CliRunBounds`),
//! no prune on a cache hit, no `CLAUDE_RPC_TOKEN` for the CLI, and the empty
//! `cliPath` of a cli dir that cannot be made
//! (`Switch::EmptyPathWithoutCliDir`). CLIs are `#!/bin/sh` scripts run for
//! real; the bounds are shortened through [`Limits`] only.

use remora::install::{install_with, InstallOptions, InstallResult, Limits};
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The reference's text for a direct run stopped at either bound.
const UNRESPONSIVE: &str = "cli unresponsive: the installed Claude Code binary started but did not answer --version within 30s (120s for a first run) and was stopped; the host is not letting it run (endpoint security software or a stalled network home are the usual causes)";

/// A cli dir with four older CLIs, an upload place and a log beside it.
struct Fixture {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cli");
        fs::create_dir(&dir).unwrap();
        for (i, v) in ["0.1", "0.2", "0.3", "0.4"].iter().enumerate() {
            let p = dir.join(v);
            write_script(&p, "exit 0");
            let f = fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(1000 - 100 * i as u64))
                .unwrap();
        }
        Fixture { tmp, dir }
    }

    fn cli(&self) -> PathBuf {
        self.dir.join("1.0")
    }

    /// A `-cli-zst` upload of a CLI with `body`, outside the cli dir.
    fn upload(&self, body: &str) -> String {
        let p = self.tmp.path().join("up.zst");
        let blob = zstd::encode_all(format!("#!/bin/sh\n{body}\n").as_bytes(), 3).unwrap();
        fs::write(&p, blob).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// A CLI body that records its pid and its background child's in
    /// `pids`, then sleeps a minute.
    fn hanging(&self) -> String {
        let pids = self.tmp.path().join("pids");
        format!("sleep 60 &\necho \"$$ $!\" > {}\nwait", pids.to_string_lossy())
    }

    /// The pids [`Fixture::hanging`] wrote.
    fn pids(&self) -> Vec<i32> {
        let text = fs::read_to_string(self.tmp.path().join("pids")).unwrap_or_default();
        text.split_whitespace().map(|p| p.parse().unwrap()).collect()
    }

    fn options(&self, bounds: bool) -> InstallOptions {
        InstallOptions {
            cli_dir: self.dir.to_string_lossy().into_owned(),
            cli_version: "1.0".into(),
            cli_keep: 1,
            run_bounds: bounds,
            ..InstallOptions::default()
        }
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

fn write_script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn limits(cache_hit: Duration, first: Duration) -> Limits {
    Limits {
        probe_timeout: Duration::from_secs(60),
        cli_run_timeout: cache_hit,
        cli_first_run_timeout: first,
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// Whether `pid` is gone, waiting up to 5 s (a killed grandchild is reaped
/// by init, not at once).
fn ends(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tail(r: &InstallResult) -> String {
    let line = r.line();
    line[line.find("\"cliWasPresent\"").unwrap()..].to_string()
}

const OLD: [&str; 4] = ["0.1", "0.2", "0.3", "0.4"];

fn with(names: &[&str], more: &str) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.push(more.to_string());
    v.sort();
    v
}

/// A present CLI that does not answer is stopped at the cache-hit bound,
/// with its group: `cliWasPresent` false, the text and `cliUnresponsive`.
/// It stays, nothing is installed (the upload is not read, the URL never
/// asked) and nothing is pruned.
#[test]
fn a_present_cli_that_does_not_answer_is_stopped_at_the_cache_hit_bound() {
    let f = Fixture::new();
    write_script(&f.cli(), &f.hanging());
    let before = fs::read(f.cli()).unwrap();
    let upload = f.upload("exit 0");
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let o = InstallOptions {
        cli_zst: upload.clone(),
        ..f.options(true)
    };
    // The first-run bound is far away: a run given the wrong bound is not
    // stopped within the test's limit.
    let start = Instant::now();
    let r = install_with(&o, &limits(Duration::from_millis(400), Duration::from_secs(60)));
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(
        tail(&r),
        format!(r#""cliWasPresent":false,"cliError":"{UNRESPONSIVE}","cliUnresponsive":true}}"#)
    );
    for pid in f.pids() {
        assert!(ends(pid), "pid {pid} of the stopped CLI's group still runs");
    }
    assert_eq!(fs::read(f.cli()).unwrap(), before, "the present CLI stays");
    assert!(Path::new(&upload).exists(), "a stopped cache hit reads no upload");
    assert_eq!(f.names(), with(&OLD, "1.0"), "nothing pruned");

    // With only a URL: no request, no fetch object.
    let o = InstallOptions {
        cli_url: format!("http://{}/cli.zst", server.local_addr().unwrap()),
        cli_checksum: "00".into(),
        ..f.options(true)
    };
    let r = install_with(&o, &limits(Duration::from_millis(400), Duration::from_secs(60)));
    assert_eq!(r.cli_error.as_deref(), Some(UNRESPONSIVE));
    assert_eq!(r.fetch, None);
    assert!(server.accept().is_err(), "the URL was asked");
}

/// A new CLI that does not answer is stopped at the first-run bound: it is
/// placed all the same, its upload consumed, and nothing is pruned.
#[test]
fn a_new_cli_that_does_not_answer_is_placed_and_reported() {
    let f = Fixture::new();
    let upload = f.upload(&f.hanging());
    let o = InstallOptions {
        cli_zst: upload.clone(),
        ..f.options(true)
    };
    let start = Instant::now();
    let r = install_with(&o, &limits(Duration::from_secs(60), Duration::from_millis(400)));
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(
        tail(&r),
        format!(r#""cliWasPresent":false,"cliError":"{UNRESPONSIVE}","cliUnresponsive":true}}"#)
    );
    for pid in f.pids() {
        assert!(ends(pid), "pid {pid} of the stopped CLI's group still runs");
    }
    assert!(f.cli().is_file(), "the new CLI stays at its final name");
    assert!(!Path::new(&upload).exists(), "the upload is consumed");
    assert_eq!(f.names(), with(&OLD, "1.0"), "nothing pruned, no temporary left");
}

/// The two bounds are two values: a CLI answering between them passes
/// right after its install and is stopped on the next cache hit.
#[test]
fn the_run_right_after_an_install_has_its_own_bound() {
    let f = Fixture::new();
    let o = InstallOptions {
        cli_zst: f.upload("sleep 1"),
        ..f.options(true)
    };
    let l = limits(Duration::from_millis(300), Duration::from_secs(20));
    let r = install_with(&o, &l);
    assert_eq!(tail(&r), r#""cliWasPresent":false}"#);
    assert_eq!(f.names(), ["1.0"], "a good install prunes (keep 1)");
    let r = install_with(&f.options(true), &l);
    assert_eq!(r.cli_error.as_deref(), Some(UNRESPONSIVE));
    assert!(r.cli_unresponsive);
}

/// A build without the bounds (older stamps) keeps remora's former check:
/// a stop is "not runnable", a present CLI is reinstalled, no
/// `cliUnresponsive`.
#[test]
fn without_the_bounds_a_stopped_run_is_not_runnable() {
    let f = Fixture::new();
    write_script(&f.cli(), "sleep 60");
    let o = InstallOptions {
        cli_zst: f.upload("exit 0"),
        ..f.options(false)
    };
    let l = Limits {
        probe_timeout: Duration::from_millis(300),
        ..limits(Duration::from_secs(60), Duration::from_secs(60))
    };
    let r = install_with(&o, &l);
    assert_eq!(tail(&r), r#""cliWasPresent":false}"#);
    assert_eq!(fs::read(f.cli()).unwrap(), b"#!/bin/sh\nexit 0\n", "reinstalled");

    let o = InstallOptions {
        cli_zst: f.upload("sleep 60"),
        ..f.options(false)
    };
    fs::remove_file(f.cli()).unwrap();
    let r = install_with(&o, &l);
    assert_eq!(
        r.cli_error,
        Some(format!("installed cli at {} is not runnable", f.cli().display()))
    );
    assert!(!r.cli_unresponsive);
    assert!(!f.cli().exists());
}

/// A good cache hit prunes nothing, on every build.
#[test]
fn a_cache_hit_prunes_nothing() {
    for bounds in [true, false] {
        let f = Fixture::new();
        write_script(&f.cli(), "exit 0");
        let r = install_with(
            &f.options(bounds),
            &limits(Duration::from_secs(20), Duration::from_secs(20)),
        );
        assert_eq!(tail(&r), r#""cliWasPresent":true}"#);
        assert_eq!(f.names(), with(&OLD, "1.0"), "bounds {bounds}");
    }
}

/// A cli dir that cannot be made: an empty `cliPath` where the build says
/// so, the path otherwise; the upload stays either way.
#[test]
fn a_cli_dir_that_cannot_be_made_empties_the_path_where_the_build_says_so() {
    let f = Fixture::new();
    let file = f.tmp.path().join("p");
    fs::write(&file, "a regular file").unwrap();
    let dir = file.join("cli");
    for empties in [true, false] {
        let upload = f.upload("exit 0");
        let o = InstallOptions {
            cli_dir: dir.to_string_lossy().into_owned(),
            cli_zst: upload.clone(),
            empty_path_without_cli_dir: empties,
            ..f.options(true)
        };
        let r = install_with(&o, &limits(Duration::from_secs(20), Duration::from_secs(20)));
        let path = if empties {
            String::new()
        } else {
            format!("{}/1.0", dir.display())
        };
        assert_eq!(r.cli_path, path);
        assert_eq!(
            r.cli_error,
            Some(format!("mkdir cli dir: mkdir {}: not a directory", dir.display()))
        );
        assert!(Path::new(&upload).exists());
    }
}

// ------------------------------------------------- through the binary

/// `remora -reference-build <stamp> -install <args>` with `CLAUDE_RPC_TOKEN`
/// set: stdout.
fn remora_install(stamp: &str, args: &[&str]) -> String {
    let mut command = crate::common::remora_command();
    if !stamp.is_empty() {
        command.args(["-reference-build", &format!("{stamp:0<40}")]);
    }
    let out = command
        .arg("-install")
        .args(args)
        .env("CLAUDE_RPC_TOKEN", "secret-token")
        .env_remove("CLAUDE_SSH_MANAGED_LAUNCHER")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The token never reaches the CLI's direct run, on any build: neither the
/// check of a new CLI nor that of a present one.
#[test]
fn the_cli_never_gets_the_token() {
    for stamp in ["4534d86", "89cb6289", ""] {
        let f = Fixture::new();
        let log = f.tmp.path().join("env.log");
        let upload = f.upload(&format!(
            "echo \"token=${{CLAUDE_RPC_TOKEN-unset}}\" >> {}",
            log.to_string_lossy()
        ));
        let d = f.dir.to_string_lossy().into_owned();
        let out = remora_install(stamp, &["-cli-dir", &d, "-cli-version", "1.0", "-cli-zst", &upload]);
        assert!(out.ends_with("\"cliWasPresent\":false}\n"), "{stamp}: {out}");
        let out = remora_install(stamp, &["-cli-dir", &d, "-cli-version", "1.0"]);
        assert!(out.ends_with("\"cliWasPresent\":true}\n"), "{stamp}: {out}");
        assert_eq!(
            fs::read_to_string(&log).unwrap(),
            "token=unset\ntoken=unset\n",
            "stamp {stamp:?}"
        );
    }
}

/// The stamp decides the empty path: `89cb6289` empties it, `f6010b97`
/// keeps it.
#[test]
fn the_build_decides_the_path_of_a_cli_dir_that_cannot_be_made() {
    let f = Fixture::new();
    let file = f.tmp.path().join("p");
    fs::write(&file, "a regular file").unwrap();
    let d = file.join("cli").to_string_lossy().into_owned();
    let upload = f.upload("exit 0");
    let args = [
        "-cli-dir",
        d.as_str(),
        "-cli-version",
        "1.0",
        "-cli-zst",
        upload.as_str(),
    ];
    assert!(remora_install("89cb6289", &args).contains("\"cliPath\":\"\","));
    assert!(remora_install("f6010b97", &args).contains(&format!("\"cliPath\":\"{d}/1.0\",")));
}
