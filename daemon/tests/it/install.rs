//! `-install` end to end through the library (`remora::install`): real zstd
//! blobs of small `#!/bin/sh` CLIs, a real HTTP server on 127.0.0.1, real
//! files and mtimes, and a real process killed mid-download. The same
//! behaviour through the `remora -install` flags is in `install_cli.rs`.

use crate::common::http::read_request_head;
use remora::install::{install_with, InstallOptions, InstallResult, Limits};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

// ---------------------------------------------------------------- helpers

/// A CLI that prints its version and exits with `code`.
fn script(version: &str, code: i32) -> Vec<u8> {
    format!("#!/bin/sh\necho \"fake-cli {version}\"\nexit {code}\n").into_bytes()
}

fn zst(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).expect("zstd encode")
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn limits() -> Limits {
    Limits {
        probe_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        progress_interval: Duration::from_secs(1),
        ..Limits::default()
    }
}

fn opts(dir: &Path, version: &str) -> InstallOptions {
    InstallOptions {
        cli_dir: dir.to_string_lossy().into_owned(),
        cli_version: version.to_string(),
        cli_keep: 3,
        ..InstallOptions::default()
    }
}

fn run(o: &InstallOptions) -> InstallResult {
    install_with(o, &limits())
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn hidden(dir: &Path) -> Vec<String> {
    names(dir).into_iter().filter(|n| n.starts_with('.')).collect()
}

/// Writes `blob` to `<tmp>/upload.zst` (outside the cli dir, as an SFTP
/// upload would be) and returns its path.
fn upload(tmp: &Path, blob: &[u8]) -> String {
    let p = tmp.join("upload.zst");
    fs::write(&p, blob).unwrap();
    p.to_string_lossy().into_owned()
}

fn assert_ok(r: &InstallResult, dir: &Path, version: &str, was_present: bool) {
    assert_eq!(r.cli_error, None, "{r:?}");
    assert_eq!(r.cli_was_present, was_present);
    assert_eq!(r.cli_path, format!("{}/{version}", dir.display()));
    let meta = fs::metadata(dir.join(version)).expect("cli in place");
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
}

fn set_age(path: &Path, secs: u64) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs)).unwrap();
}

fn place_cli(dir: &Path, name: &str, code: i32) {
    fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    fs::write(&p, script(name, code)).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A pid that no longer exists: a reaped child's.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

// ----------------------------------------------------------- HTTP server

#[derive(Clone)]
enum Route {
    Body(Vec<u8>),
    Status(u16, &'static str),
    /// `302 Found` with this `Location`.
    Redirect(&'static str),
    /// Announces `total` bytes, sends `prefix`, then stalls for a minute.
    Stall {
        prefix: Vec<u8>,
        total: usize,
    },
}

/// A tiny HTTP/1.1 server on 127.0.0.1; one thread per connection,
/// `Connection: close`. Returns the base URL.
fn serve(routes: Vec<(&str, Route)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes: Arc<HashMap<String, Route>> = Arc::new(routes.into_iter().map(|(p, r)| (p.to_string(), r)).collect());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let routes = Arc::clone(&routes);
            std::thread::spawn(move || handle(stream, &routes));
        }
    });
    base
}

fn handle(mut stream: TcpStream, routes: &HashMap<String, Route>) {
    let Some(req) = read_request_head(&mut stream) else {
        return;
    };
    let text = String::from_utf8_lossy(&req);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let route = routes.get(&path).cloned().unwrap_or(Route::Status(404, "Not Found"));
    let _ = match route {
        Route::Body(body) => stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .and_then(|_| stream.write_all(&body)),
        Route::Status(code, reason) => stream.write_all(
            format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot here\n").as_bytes(),
        ),
        Route::Redirect(location) => stream.write_all(
            format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        ),
        Route::Stall { prefix, total } => {
            let r = stream
                .write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n").as_bytes(),
                )
                .and_then(|_| stream.write_all(&prefix))
                .and_then(|_| stream.flush());
            std::thread::sleep(Duration::from_secs(60));
            r
        }
    };
}

// ------------------------------------------------------------- -cli-zst

#[test]
fn zst_without_checksum_installs_and_is_consumed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let mut o = opts(&dir, "2.0.1");
    o.cli_zst = upload(tmp.path(), &zst(&script("2.0.1", 0)));
    let r = run(&o);
    assert_ok(&r, &dir, "2.0.1", false);
    assert_eq!(r.fetch, None, "no download, no fetch object");
    assert_eq!(fs::read(dir.join("2.0.1")).unwrap(), script("2.0.1", 0));
    assert!(!Path::new(&o.cli_zst).exists(), "the upload is consumed");
    assert_eq!(names(&dir), ["2.0.1"], "no temporaries left");
    // The facts carry the host identity.
    assert_eq!(r.server_version, remora::base::version::ID);
    assert_eq!(r.os, remora::base::version::goos());
    assert_eq!(r.arch, remora::base::version::goarch());
    assert!(r.libc == "glibc" || r.libc == "musl");
    assert_eq!(
        r.line(),
        format!(
            "__INSTALL_RESULT__{{\"serverVersion\":\"{}\",\"os\":\"{}\",\"arch\":\"{}\",\"libc\":\"{}\",\
             \"cliPath\":\"{}/2.0.1\",\"cliWasPresent\":false}}",
            remora::base::version::ID,
            remora::base::version::goos(),
            remora::base::version::goarch(),
            r.libc,
            dir.display()
        )
    );
}

#[test]
fn zst_with_matching_checksum_installs_in_any_hex_case() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let blob = zst(&script("1.0", 0));
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &blob);
    o.cli_checksum = sha(&blob).to_uppercase();
    assert_ok(&run(&o), &dir, "1.0", false);
    assert!(!Path::new(&o.cli_zst).exists());
}

#[test]
fn zst_with_wrong_checksum_is_rejected_and_left_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let blob = zst(&script("1.0", 0));
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &blob);
    o.cli_checksum = "00".repeat(32);
    let r = run(&o);
    assert_eq!(
        r.cli_error.as_deref(),
        Some(format!("checksum mismatch: expected={}, actual={}", "00".repeat(32), sha(&blob)).as_str())
    );
    assert!(!r.cli_was_present);
    assert_eq!(fs::read(&o.cli_zst).unwrap(), blob, "source intact");
    assert!(!dir.join("1.0").exists());
    assert!(hidden(&dir).is_empty());
}

#[test]
fn zst_corrupt_reports_decompressing_or_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let corrupt = b"this is not zstd at all".to_vec();
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &corrupt);
    let r = run(&o);
    assert_eq!(
        r.cli_error.as_deref(),
        Some("decompressing: invalid input: magic number mismatch")
    );
    assert!(Path::new(&o.cli_zst).exists(), "a failed install keeps the upload");
    assert!(!dir.join("1.0").exists());
    assert!(hidden(&dir).is_empty());

    // Truncated real zstd.
    let blob = zst(&[b'x'; 200_000]);
    fs::write(&o.cli_zst, &blob[..blob.len() - 5]).unwrap();
    assert_eq!(run(&o).cli_error.as_deref(), Some("decompressing: unexpected EOF"));

    // With a (wrong) checksum supplied, the mismatch wins over decompressing.
    o.cli_checksum = sha(b"something else");
    let r = run(&o);
    assert!(
        r.cli_error
            .as_deref()
            .unwrap()
            .starts_with("checksum mismatch: expected="),
        "{r:?}"
    );
    assert!(hidden(&dir).is_empty());
}

/// Issue 26 item 7 (audit): a FIFO as `-cli-zst` once blocked `-install`
/// forever in open(2). It is refused at once and left in place.
#[test]
fn zst_fifo_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let fifo = tmp.path().join("up.zst");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut o = opts(&dir, "1.0");
    o.cli_zst = fifo.to_string_lossy().into_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(&o));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("-install blocked on a FIFO");
    assert_eq!(
        r.cli_error,
        Some(format!("opening input: open {}: not a regular file", fifo.display()))
    );
    assert!(fifo.exists());
}

#[test]
fn zst_missing_reports_opening_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let missing = tmp.path().join("nope.zst");
    let mut o = opts(&dir, "1.0");
    o.cli_zst = missing.to_string_lossy().into_owned();
    o.cli_url = "http://127.0.0.1:1/never-tried".into();
    let r = run(&o);
    assert_eq!(
        r.cli_error.as_deref(),
        Some(format!("opening input: open {}: no such file or directory", missing.display()).as_str())
    );
    assert!(!dir.exists(), "nothing created for a failed source");
}

#[test]
fn zst_wins_over_url() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let base = serve(vec![]);
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    o.cli_url = format!("{base}/missing");
    assert_ok(&run(&o), &dir, "1.0", false);
}

#[test]
fn empty_blob_is_not_runnable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), b"");
    let r = run(&o);
    assert_eq!(
        r.cli_error,
        Some(format!("installed cli at {}/1.0 is not runnable", dir.display()))
    );
}

// ------------------------------------------------------------- -cli-url

#[test]
fn url_installs_when_checksum_matches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let blob = zst(&script("3.1.4", 0));
    let base = serve(vec![("/cli.zst", Route::Body(blob.clone()))]);
    let mut o = opts(&dir, "3.1.4");
    o.cli_url = format!("{base}/cli.zst");
    o.cli_checksum = sha(&blob);
    assert_ok(&run(&o), &dir, "3.1.4", false);
    assert_eq!(names(&dir), ["3.1.4"], "download temporary removed");
}

#[test]
fn url_checksum_is_always_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let blob = zst(&script("1.0", 0));
    let base = serve(vec![("/cli.zst", Route::Body(blob.clone()))]);
    let mut o = opts(&dir, "1.0");
    o.cli_url = format!("{base}/cli.zst");

    let r = run(&o);
    assert_eq!(
        r.cli_error,
        Some(format!("checksum mismatch: expected=, actual={}", sha(&blob)))
    );
    o.cli_checksum = "deadbeef".into();
    let r = run(&o);
    assert_eq!(
        r.cli_error,
        Some(format!("checksum mismatch: expected=deadbeef, actual={}", sha(&blob)))
    );
    assert!(!dir.join("1.0").exists());
    assert!(hidden(&dir).is_empty(), "download temporary removed on mismatch");
}

#[test]
fn url_http_errors_are_download_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let base = serve(vec![
        ("/gone", Route::Status(404, "Not Found")),
        ("/boom", Route::Status(500, "Internal Server Error")),
        ("/partial", Route::Status(206, "Partial Content")),
    ]);
    let mut o = opts(&dir, "1.0");
    o.cli_checksum = "00".into();
    o.cli_url = format!("{base}/gone");
    let r = run(&o);
    // The reference's bare text: no URL, no reason phrase.
    assert_eq!(r.cli_error.as_deref(), Some("download failed with status 404"));
    // Attempted, so measured: nothing read.
    assert_eq!(r.fetch.map(|f| f.bytes), Some(0));
    o.cli_url = format!("{base}/boom");
    assert_eq!(run(&o).cli_error.as_deref(), Some("download failed with status 500"));
    // Only 200 is an answer to read, as the reference's.
    o.cli_url = format!("{base}/partial");
    assert_eq!(run(&o).cli_error.as_deref(), Some("download failed with status 206"));
    assert!(hidden(&dir).is_empty());

    // Connection refused: a port nobody listens on any more.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    o.cli_url = format!("http://127.0.0.1:{port}/x");
    assert_eq!(
        run(&o).cli_error,
        Some(format!(
            "download failed: Get \"http://127.0.0.1:{port}/x\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
    o.cli_url = "ftp://example.com/x".into();
    assert_eq!(
        run(&o).cli_error.as_deref(),
        Some("download failed: Get \"ftp://example.com/x\": unsupported protocol scheme \"ftp\"")
    );
}

/// A server redirecting to a URL without a host (`file:`, `data:`,
/// `javascript:`) once panicked inside ureq (exit 101, no facts line). Go
/// answers each with its transport's refusal.
#[test]
fn url_redirects_to_hostless_schemes_are_refused_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let blob = zst(&script("1.0", 0));
    let base = serve(vec![
        ("/file", Route::Redirect("file:///etc/passwd")),
        ("/data", Route::Redirect("data:text/plain,hi")),
        ("/js", Route::Redirect("javascript:alert(1)")),
        ("/hop", Route::Redirect("/cli.zst")),
        ("/cli.zst", Route::Body(blob.clone())),
    ]);
    let mut o = opts(&dir, "1.0");
    o.cli_checksum = sha(&blob);
    for (path, error) in [
        (
            "/file",
            "Get \"file:///etc/passwd\": unsupported protocol scheme \"file\"",
        ),
        (
            "/data",
            "Get \"data:text/plain,hi\": unsupported protocol scheme \"data\"",
        ),
        (
            "/js",
            "Get \"javascript:alert(1)\": unsupported protocol scheme \"javascript\"",
        ),
    ] {
        o.cli_url = format!("{base}{path}");
        let r = run(&o);
        assert_eq!(r.cli_error, Some(format!("download failed: {error}")), "{path}");
        assert_eq!(r.fetch.map(|f| f.bytes), Some(0));
    }
    assert!(hidden(&dir).is_empty());
    // A relative redirect to http on the same server is still followed.
    o.cli_url = format!("{base}/hop");
    assert_ok(&run(&o), &dir, "1.0", false);
}

/// More than ten redirects stop with Go's text, naming the last Location.
#[test]
fn url_redirect_loop_stops_after_ten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let base = serve(vec![("/loop", Route::Redirect("/loop"))]);
    let mut o = opts(&dir, "1.0");
    o.cli_checksum = "00".into();
    o.cli_url = format!("{base}/loop");
    assert_eq!(
        run(&o).cli_error.as_deref(),
        Some("download failed: Get \"/loop\": stopped after 10 redirects")
    );
}

#[test]
fn url_corrupt_blob_with_its_own_checksum_reports_decompressing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let corrupt = b"\x28\xb5\x2f\xfd garbage after a valid magic".to_vec();
    let base = serve(vec![("/c", Route::Body(corrupt.clone()))]);
    let mut o = opts(&dir, "1.0");
    o.cli_url = format!("{base}/c");
    o.cli_checksum = sha(&corrupt);
    let r = run(&o);
    let err = r.cli_error.unwrap();
    assert_eq!(err, "decompressing: data corruption detected");
    assert!(!dir.join("1.0").exists());
    assert!(hidden(&dir).is_empty());
}

#[test]
fn url_stalled_body_times_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let base = serve(vec![(
        "/stall",
        Route::Stall {
            prefix: vec![1; 1000],
            total: 1 << 20,
        },
    )]);
    let mut o = opts(&dir, "1.0");
    o.cli_url = format!("{base}/stall");
    let mut l = limits();
    l.read_timeout = Duration::from_millis(1000);
    let r = install_with(&o, &l);
    // The read-idle abort has its own cliError.
    assert_eq!(
        r.cli_error.as_deref(),
        Some("download stalled: no data for 1s after 1000/1048576 bytes")
    );
    let fetch = r.fetch.expect("a download was attempted");
    assert_eq!(fetch.bytes, 1000);
    assert!(fetch.longest_pause_ms >= 1000, "{fetch:?}");
    assert!(fetch.ms >= fetch.longest_pause_ms, "{fetch:?}");
    assert!(hidden(&dir).is_empty());
}

// ------------------------------------------------- presence and runnability

#[test]
fn present_and_runnable_is_kept_without_a_source() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    place_cli(&dir, "1.0", 0);
    let before = fs::metadata(dir.join("1.0")).unwrap().modified().unwrap();
    let r = run(&opts(&dir, "1.0"));
    assert_ok(&r, &dir, "1.0", true);
    assert_eq!(
        fs::metadata(dir.join("1.0")).unwrap().modified().unwrap(),
        before,
        "untouched"
    );
    assert!(r.line().ends_with("\"cliWasPresent\":true}"));
}

#[test]
fn present_but_broken_is_reinstalled() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    place_cli(&dir, "1.0", 3);
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(fs::read(dir.join("1.0")).unwrap(), script("1.0", 0));
}

#[test]
fn absent_without_source_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    place_cli(&dir, "1.0", 1); // present but broken counts as missing
    let r = run(&opts(&dir, "1.0"));
    assert_eq!(
        r.cli_error.as_deref(),
        Some("cli 1.0 missing and no --cli-url or --cli-zst provided")
    );
    assert!(!r.cli_was_present);
}

#[test]
fn non_runnable_blob_is_reported_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 1)));
    let r = run(&o);
    assert_eq!(
        r.cli_error,
        Some(format!("installed cli at {}/1.0 is not runnable", dir.display()))
    );
    assert!(!dir.join("1.0").exists());
    assert!(hidden(&dir).is_empty(), "temporary removed");
    assert!(Path::new(&o.cli_zst).exists(), "upload kept for a retry");
}

#[test]
fn hanging_cli_is_killed_and_not_runnable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(b"#!/bin/sh\nsleep 60\n"));
    let mut l = limits();
    l.probe_timeout = Duration::from_millis(400);
    let start = Instant::now();
    let r = install_with(&o, &l);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(r.cli_error.unwrap().ends_with("is not runnable"));
}

// ------------------------------------------------------------- bad input

#[test]
fn versions_never_escape_the_cli_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a").join("cli");
    fs::create_dir_all(&dir).unwrap();
    let blob = zst(&script("x", 0));
    for (version, err) in [
        ("..", "invalid cli version \"..\""),
        (".", "invalid cli version \".\""),
        ("../escaped", "invalid cli version \"../escaped\""),
        ("a/b", "invalid cli version \"a/b\""),
        ("/abs", "invalid cli version \"/abs\""),
        ("x\0y", "invalid cli version \"x\\x00y\""),
        ("", "--cli-version is required"),
    ] {
        let mut o = opts(&dir, version);
        o.cli_zst = upload(tmp.path(), &blob);
        let r = run(&o);
        assert_eq!(r.cli_error.as_deref(), Some(err), "{version:?}");
        assert!(Path::new(&o.cli_zst).exists());
    }
    assert_eq!(names(&tmp.path().join("a")), ["cli"], "nothing written beside the dir");
    assert!(names(&dir).is_empty());
    assert_eq!(names(tmp.path()), ["a", "upload.zst"]);
}

#[test]
fn missing_cli_dir_flag_is_reported() {
    let r = run(&InstallOptions {
        cli_version: "1.0".into(),
        cli_keep: 3,
        ..Default::default()
    });
    assert_eq!(r.cli_error.as_deref(), Some("--cli-dir is required"));
    assert_eq!(r.cli_path, "1.0");
}

/// Each new level is owner-only, as 89cb6289 makes it (new levels `0700`
/// whatever the umask); remora grants no more to any build.
#[test]
fn cli_dir_is_created_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deep").join("er").join("cli");
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    assert_ok(&run(&o), &dir, "1.0", false);
    for level in [&dir, &tmp.path().join("deep").join("er"), &tmp.path().join("deep")] {
        assert_eq!(
            fs::metadata(level).unwrap().permissions().mode() & 0o777,
            0o700,
            "{level:?}"
        );
    }
}

// ----------------------------------------------------------------- prune

#[test]
fn prune_keeps_the_newest_and_the_current() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    for (i, v) in ["0.1", "0.2", "0.3", "0.4"].iter().enumerate() {
        place_cli(&dir, v, 0);
        set_age(&dir.join(v), 1000 - i as u64 * 100); // 0.4 newest
    }
    fs::create_dir(dir.join("subdir")).unwrap();
    fs::write(dir.join(".keepme"), b"").unwrap();
    set_age(&dir.join(".keepme"), 100_000);
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(names(&dir), [".keepme", "0.3", "0.4", "1.0", "subdir"]);

    // A cache hit prunes nothing, as the reference's (measured at 5db5e4a
    // and 89cb6289).
    set_age(&dir.join("1.0"), 50_000);
    let mut o = opts(&dir, "1.0");
    o.cli_keep = 1;
    assert_ok(&run(&o), &dir, "1.0", true);
    assert_eq!(names(&dir), [".keepme", "0.3", "0.4", "1.0", "subdir"]);

    // An install prunes; keep <= 0 keeps only the current CLI.
    fs::remove_file(dir.join("1.0")).unwrap();
    o.cli_keep = 0;
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(names(&dir), [".keepme", "1.0", "subdir"]);
}

#[test]
fn failed_install_prunes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    for v in ["0.1", "0.2", "0.3", "0.4"] {
        place_cli(&dir, v, 0);
    }
    let mut o = opts(&dir, "1.0");
    o.cli_keep = 1;
    assert!(run(&o).cli_error.is_some());
    assert_eq!(names(&dir).len(), 4);
}

/// Audit N5: an existing `-cli-dir` another user could change is refused
/// before anything is written, run or deleted in it. The victim's CLI was
/// installed into a `0777` directory the attacker owned, who then
/// replaced the binary.
#[test]
fn a_cli_dir_another_user_can_change_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
    }
    let mut o = opts(&dir, "1.0");
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    let r = run(&o);
    let error = r.cli_error.unwrap_or_default();
    assert!(
        error.starts_with(&format!("unsafe cli dir \"{}\": ", dir.display())),
        "{error}"
    );
    assert!(names(&dir).is_empty(), "nothing written there");
    assert!(tmp.path().join("upload.zst").exists(), "the upload is not consumed");
    // Below such a directory too, even when the cli dir does not exist yet.
    let below = dir.join("cli");
    let r = run(&opts(&below, "1.0"));
    assert!(r.cli_error.unwrap_or_default().starts_with("unsafe cli dir"));
    assert!(!below.exists());
}

/// Audit N5: the prune follows no link. With `-cli-dir` a link to a
/// directory of the user's own files and `-cli-keep 1`, the prune deleted
/// those files.
#[test]
fn the_prune_never_follows_a_link_at_the_cli_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let own = tmp.path().join("documents");
    fs::create_dir(&own).unwrap();
    for name in ["notes", "photo"] {
        fs::write(own.join(name), name).unwrap();
        set_age(&own.join(name), 1000);
    }
    let dir = tmp.path().join("cli");
    std::os::unix::fs::symlink(&own, &dir).unwrap();
    let mut o = opts(&dir, "1.0");
    o.cli_keep = 1;
    o.cli_zst = upload(tmp.path(), &zst(&script("1.0", 0)));
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(names(&own), ["1.0", "notes", "photo"]);
}

// ------------------------------------------------------- interrupted runs

#[test]
fn stale_temporaries_are_swept_live_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    place_cli(&dir, "1.0", 0);
    let dead = dead_pid();
    let stale_tmp = format!(".1.0.tmp-{dead}-0123456789abcdef");
    let stale_dl = format!(".0.9.dl-{dead}-fedcba9876543210");
    // pid 1 is alive: a fresh temporary of it is a concurrent install...
    let live = ".2.0.tmp-1-00000000000000aa".to_string();
    // ...unless it is older than an hour.
    let old = ".2.0.dl-1-00000000000000bb".to_string();
    for n in [&stale_tmp, &stale_dl, &live, &old] {
        fs::write(dir.join(n), b"half").unwrap();
    }
    set_age(&dir.join(&old), 2 * 3600);
    let r = run(&opts(&dir, "1.0"));
    assert_ok(&r, &dir, "1.0", true);
    assert_eq!(names(&dir), [live, "1.0".to_string()]);
}

const CHILD_ENV: &str = "REMORA_INSTALL_TEST_CHILD";

/// Not a test of its own: the body of the child process that
/// `killed_download_leaves_no_cli` kills mid-download. Without the
/// environment variable it does nothing.
#[test]
fn child_install_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, '\n');
    let (dir, version, url) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    let o = InstallOptions {
        cli_dir: dir.into(),
        cli_version: version.into(),
        cli_url: url.into(),
        cli_checksum: "00".into(),
        cli_zst: String::new(),
        cli_keep: 3,
        ..InstallOptions::default()
    };
    remora::install::run(&o);
}

#[test]
fn killed_download_leaves_no_cli_and_is_cleaned_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    fs::create_dir_all(&dir).unwrap();
    let blob = zst(&script("1.0", 0));
    let base = serve(vec![
        (
            "/stall",
            Route::Stall {
                prefix: blob[..blob.len() / 2].to_vec(),
                total: blob.len(),
            },
        ),
        ("/good", Route::Body(blob.clone())),
    ]);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "install::child_install_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}\n1.0\n{base}/stall", dir.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // Wait until the child has written part of the blob to its temporary.
    let deadline = Instant::now() + Duration::from_secs(20);
    let partial: PathBuf = loop {
        let found = hidden(&dir)
            .into_iter()
            .map(|n| dir.join(n))
            .find(|p| fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false));
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < deadline, "child never started downloading");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();

    assert!(!dir.join("1.0").exists(), "no CLI at the final path");
    assert!(partial.exists(), "the killed run's temporary is left behind");
    let name = partial.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(".1.0.dl-"), "{name}");

    let mut o = opts(&dir, "1.0");
    o.cli_url = format!("{base}/good");
    o.cli_checksum = sha(&blob);
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(names(&dir), ["1.0"], "leftover swept");
}

#[test]
fn upload_at_the_final_path_is_not_deleted_after_install() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cli");
    fs::create_dir_all(&dir).unwrap();
    let at_final = dir.join("1.0");
    fs::write(&at_final, zst(&script("1.0", 0))).unwrap();
    let mut o = opts(&dir, "1.0");
    o.cli_zst = at_final.to_string_lossy().into_owned();
    assert_ok(&run(&o), &dir, "1.0", false);
    assert_eq!(
        fs::read(&at_final).unwrap(),
        script("1.0", 0),
        "the installed CLI survives"
    );
}
