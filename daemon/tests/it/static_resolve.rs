//! `-install -cli-url` resolves a host name the way a remote does: from
//! `/etc/hosts`, through the binary's own libc.
//!
//! The binary under test is `$REMORA_BINARY` when set (`ci/release` points
//! it at each static musl build, the aarch64 one under qemu-user), else
//! this build's `remora`. Each run happens in a private mount namespace
//! (`unshare --mount`) with its own `/etc/hosts` and `/etc/resolv.conf`
//! bind-mounted over the real ones, so the machine's files are never
//! touched. The same URL is tried twice: without the name in the hosts file
//! it must fail, with it the CLI must install — so the hosts entry, not
//! some other resolver, is what made the download work.
//!
//! Where no private mount namespace can be had the test skips, so that a
//! plain `cargo test` passes on such machines. With
//! `REMORA_REQUIRE_STATIC_RESOLVE=1` (`ci/release` sets it for every Linux
//! target) or `REMORA_REQUIRE_ALL_TOOLS=1` (`.ci/run`) the same situation
//! is a failure: a release must not ship with
//! this check quietly skipped.

use crate::common;
use crate::common::http::read_request_head;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Never in DNS (RFC 2606), so only the hosts file can resolve it.
const HOST: &str = "remora-cli.invalid";

fn binary() -> PathBuf {
    std::env::var_os("REMORA_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_remora")))
}

/// Serves `body` for every GET on 127.0.0.1 until the test process ends.
fn serve(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            respond(stream, &body);
        }
    });
    port
}

fn respond(mut stream: TcpStream, body: &[u8]) {
    if read_request_head(&mut stream).is_none() {
        return;
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body));
}

/// Runs `remora -install` with `hosts` as `/etc/hosts` and a resolver
/// config that gives up after one second.
fn install_with_hosts(prefix: &[&str], dir: &Path, hosts: &str, url: &str, sum: &str, version: &str) -> Output {
    let hosts_file = dir.join(format!("hosts-{version}"));
    std::fs::write(&hosts_file, hosts).unwrap();
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n").unwrap();
    let cli_dir = dir.join("cli");
    Command::new(prefix[0])
        .args(&prefix[1..])
        .args([
            "sh",
            "-c",
            r#"mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@""#,
            "sh",
        ])
        .arg(&hosts_file)
        .arg(&resolv)
        .arg(binary())
        .args(["-install", "-cli-dir"])
        .arg(&cli_dir)
        .args(["-cli-version", version, "-cli-url", url, "-cli-checksum", sum])
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("run remora -install under unshare")
}

#[test]
fn cli_url_host_name_resolves_from_etc_hosts() {
    let prefix = match common::unshare_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            common::skip::skip_unless(
                Some("REMORA_REQUIRE_STATIC_RESOLVE"),
                &format!("no private mount namespace here (`unshare --mount` needs root or unprivileged user namespaces): {why}"),
            );
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let cli = b"#!/bin/sh\necho \"fake-cli 3.1\"\n";
    let blob = zstd::encode_all(&cli[..], 3).unwrap();
    let sum: String = Sha256::digest(&blob).iter().map(|b| format!("{b:02x}")).collect();
    let port = serve(blob);
    let url = format!("http://{HOST}:{port}/cli.zst");

    let without = install_with_hosts(&prefix, tmp.path(), "127.0.0.1 localhost\n", &url, &sum, "3.0");
    let stdout = String::from_utf8_lossy(&without.stdout);
    assert!(
        stdout.contains("\"cliError\":\"download failed: "),
        "without the hosts entry the download must fail; stdout: {stdout}; stderr: {}",
        String::from_utf8_lossy(&without.stderr)
    );
    assert!(!tmp.path().join("cli/3.0").exists());

    let hosts = format!("127.0.0.1 localhost\n127.0.0.1 {HOST}\n");
    let with = install_with_hosts(&prefix, tmp.path(), &hosts, &url, &sum, "3.1");
    let stdout = String::from_utf8_lossy(&with.stdout);
    assert!(
        // Progress lines (`__INSTALL_PROGRESS__`) may precede the result.
        stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("__INSTALL_RESULT__"))
            && !stdout.contains("cliError"),
        "with {HOST} in /etc/hosts the install must succeed; stdout: {stdout}; stderr: {}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert_eq!(with.status.code(), Some(0));
    let installed = tmp.path().join("cli/3.1");
    assert_eq!(std::fs::read(&installed).unwrap(), cli);
}
