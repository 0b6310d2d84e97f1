//! `plugins.prune` against a real daemon whose socket sits at
//! `<X>/run/c1/rpc.sock`, over real directories: what it removes, what it
//! keeps (live, young, links, files, other names), the legacy root and the
//! sibling test with a real listening socket.

use crate::common;
use crate::common::{Client, TOKEN};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime};

struct RunDaemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for RunDaemon {
    fn drop(&mut self) {
        // The launcher exits once the daemon it detached is ready; the
        // daemon itself is stopped through its own pid.
        common::stop_serving(&self.socket, TOKEN);
        let _ = self.child.wait();
    }
}

fn serve(socket: &Path, token_file: &Path) -> RunDaemon {
    let mut child = common::serve_command(socket, token_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.contains("listening on"), "{banner}");
    RunDaemon {
        child,
        socket: socket.to_path_buf(),
    }
}

const OLD: Duration = Duration::from_secs(30 * 86_400);

fn age(path: &Path, by: Duration) {
    let f = std::fs::File::open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

fn hash_dir(root: &Path, name: &str, old: bool) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/manifest.json"), "{}").unwrap();
    if old {
        age(&dir, OLD);
    }
    dir
}

#[test]
fn prune_removes_old_hash_dirs_and_keeps_the_rest() {
    let x = tempfile::tempdir().unwrap();
    let x = x.path();
    std::fs::create_dir_all(x.join("run/c1")).unwrap();
    let token_file = x.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let install = x.join("plugins/c1");
    std::fs::create_dir_all(&install).unwrap();
    let outside = x.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "x").unwrap();
    age(&outside, OLD);

    let old = hash_dir(&install, "aaaaaaaaaaaaaaa1", true);
    hash_dir(&install, "bbbbbbbbbbbbbbb2", false);
    let synced = hash_dir(&install, "ccccccccccccccc3", true);
    std::fs::write(synced.join(".synced"), "").unwrap();
    age(&synced, OLD);
    hash_dir(&install, "ddddddddddddddd4", true);
    std::os::unix::fs::symlink(&outside, install.join("eeeeeeeeeeeeeee5")).unwrap();
    std::fs::write(install.join("fffffffffffffff6"), "plain").unwrap();
    hash_dir(&install, "AAAAAAAAAAAAAAA7", true);
    let legacy = hash_dir(&x.join("plugins"), "0000000000000008", true);
    let legacy_young = hash_dir(&x.join("plugins"), "0000000000000009", false);
    age(&x.join("plugins"), OLD);

    let d = serve(&x.join("run/c1/rpc.sock"), &token_file);
    let mut c = Client::connect(&d.socket);
    // A running child whose argv names a hash keeps that directory.
    let spawned = c.call(
        1,
        "process.spawn",
        r#"{"id":"p1","command":"/bin/sh","args":["-c","sleep 60","--plugin-dir=/somewhere/ddddddddddddddd4"]}"#,
    );
    assert!(spawned.contains(r#""result""#), "{spawned}");

    let reply = c.call(2, "plugins.prune", r#"{"minAgeDays":1}"#);
    let root = install.display();
    assert_eq!(
        reply,
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"root":"{root}","pruned":["aaaaaaaaaaaaaaa1"],"prunedLegacy":["0000000000000008"],"staleArchives":0,"kept":0,"live":1,"young":3,"legacy":"swept","minAgeDays":7}}}}"#
        )
    );
    assert!(!old.exists() && !legacy.exists());
    assert!(legacy_young.exists() && synced.exists());
    for kept in [
        "bbbbbbbbbbbbbbb2",
        "ddddddddddddddd4",
        "fffffffffffffff6",
        "AAAAAAAAAAAAAAA7",
    ] {
        assert!(install.join(kept).exists(), "{kept}");
    }
    // The link is neither followed nor removed.
    assert!(install
        .join("eeeeeeeeeeeeeee5")
        .symlink_metadata()
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(outside.join("keep.txt").exists());

    // The upper bound of the window.
    let reply = c.call(3, "plugins.prune", r#"{"minAgeDays":99999}"#);
    assert!(reply.ends_with(r#""legacy":"swept","minAgeDays":3650}}"#), "{reply}");

    // A stale sibling socket (nobody listening) is provably gone: still swept.
    std::fs::create_dir_all(x.join("run/b0")).unwrap();
    drop(std::os::unix::net::UnixListener::bind(x.join("run/b0/rpc.sock")).unwrap());
    let reply = c.call(4, "plugins.prune", "null");
    assert!(reply.contains(r#""legacy":"swept","minAgeDays":7}"#), "{reply}");

    // A sibling that answers blocks the legacy sweep only.
    std::fs::create_dir_all(x.join("run/c2")).unwrap();
    let _sibling = std::os::unix::net::UnixListener::bind(x.join("run/c2/rpc.sock")).unwrap();
    hash_dir(&x.join("plugins"), "000000000000000a", true);
    hash_dir(&install, "aaaaaaaaaaaaaab1", true);
    let reply = c.call(5, "plugins.prune", "{}");
    assert!(
        reply.contains(r#""pruned":["aaaaaaaaaaaaaab1"],"prunedLegacy":[],"#),
        "{reply}"
    );
    assert!(
        reply.contains(r#""legacy":"skipped: another install's daemon is running (run/c2/rpc.sock answers); its sessions may use the shared legacy dirs""#),
        "{reply}"
    );
    assert!(x.join("plugins/000000000000000a").exists());
}

#[test]
fn prune_params_errors_carry_the_decoder_detail() {
    let x = tempfile::tempdir().unwrap();
    let x = x.path();
    std::fs::create_dir_all(x.join("run/c1")).unwrap();
    let token_file = x.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let d = serve(&x.join("run/c1/rpc.sock"), &token_file);
    let mut c = Client::connect(&d.socket);
    assert_eq!(
        c.call(1, "plugins.prune", r#"{"minAgeDays":1.5}"#),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: json: cannot unmarshal number 1.5 into Go struct field PruneParams.minAgeDays of type int"}}"#
    );
    // No plugins folder at all: nothing to do, legacy absent.
    let reply = c.call(2, "plugins.prune", "{}");
    assert!(reply.contains(r#""pruned":[],"prunedLegacy":[],"#), "{reply}");
    assert!(reply.ends_with(r#""legacy":"absent","minAgeDays":7}}"#), "{reply}");
}
