//! files.stat / list / read / validate against a real daemon and real files,
//! symlinks, FIFOs and sockets. Replies are compared byte for byte.

use crate::common;
use crate::common::reply::{err, ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::Path;

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(p(path)).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    chmod(path, 0o644);
}

fn is_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn stat_reports_go_mode_strings_and_follows_symlinks() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let file = root.join("f.txt");
    fs::write(&file, b"hello").unwrap();
    chmod(&file, 0o644);
    let dir = root.join("sub");
    fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o755);
    let sticky = root.join("sticky");
    fs::create_dir(&sticky).unwrap();
    chmod(&sticky, 0o1777);
    let suid = root.join("suid");
    fs::write(&suid, b"").unwrap();
    chmod(&suid, 0o4755);
    let sgid = root.join("sgid");
    fs::write(&sgid, b"").unwrap();
    chmod(&sgid, 0o2750);
    let fifo = root.join("pipe");
    mkfifo(&fifo);
    symlink(&file, root.join("link-file")).unwrap();
    symlink(&dir, root.join("link-dir")).unwrap();
    symlink(root.join("nowhere"), root.join("dangling")).unwrap();

    let mut c = d.connect();
    let stat =
        |c: &mut common::Client, id: u32, path: &str| c.call(id, "files.stat", &format!(r#"{{"path":"{path}"}}"#));
    assert_eq!(
        stat(&mut c, 1, &p(&file)),
        ok(1, r#"{"exists":true,"isDir":false,"size":5,"mode":"-rw-r--r--"}"#)
    );
    let dir_size = fs::metadata(&dir).unwrap().len();
    assert_eq!(
        stat(&mut c, 2, &p(&dir)),
        ok(
            2,
            &format!(r#"{{"exists":true,"isDir":true,"size":{dir_size},"mode":"drwxr-xr-x"}}"#)
        )
    );
    let sticky_size = fs::metadata(&sticky).unwrap().len();
    assert_eq!(
        stat(&mut c, 3, &p(&sticky)),
        ok(
            3,
            &format!(r#"{{"exists":true,"isDir":true,"size":{sticky_size},"mode":"dtrwxrwxrwx"}}"#)
        )
    );
    assert_eq!(
        stat(&mut c, 4, &p(&suid)),
        ok(4, r#"{"exists":true,"isDir":false,"size":0,"mode":"urwxr-xr-x"}"#)
    );
    assert_eq!(
        stat(&mut c, 5, &p(&sgid)),
        ok(5, r#"{"exists":true,"isDir":false,"size":0,"mode":"grwxr-x---"}"#)
    );
    assert_eq!(
        stat(&mut c, 6, &p(&fifo)),
        ok(6, r#"{"exists":true,"isDir":false,"size":0,"mode":"prw-r--r--"}"#)
    );
    // The daemon's own socket is created 0600.
    assert_eq!(
        stat(&mut c, 7, &p(&d.socket)),
        ok(7, r#"{"exists":true,"isDir":false,"size":0,"mode":"Srw-------"}"#)
    );
    assert_eq!(
        stat(&mut c, 8, "/dev/null"),
        ok(8, r#"{"exists":true,"isDir":false,"size":0,"mode":"Dcrw-rw-rw-"}"#)
    );
    // Symlinks are followed (os.Stat): the target is reported.
    assert_eq!(
        stat(&mut c, 9, &p(&root.join("link-file"))),
        ok(9, r#"{"exists":true,"isDir":false,"size":5,"mode":"-rw-r--r--"}"#)
    );
    assert_eq!(
        stat(&mut c, 10, &p(&root.join("link-dir"))),
        ok(
            10,
            &format!(r#"{{"exists":true,"isDir":true,"size":{dir_size},"mode":"drwxr-xr-x"}}"#)
        )
    );
    let missing = r#"{"exists":false,"isDir":false,"size":0,"mode":""}"#;
    assert_eq!(stat(&mut c, 11, &p(&root.join("dangling"))), ok(11, missing));
    assert_eq!(stat(&mut c, 12, &p(&root.join("nope"))), ok(12, missing));
    assert_eq!(stat(&mut c, 13, ""), ok(13, missing));
    assert_eq!(c.call(14, "files.stat", r#"{"path":null}"#), ok(14, missing));
    assert_eq!(c.call(15, "files.stat", "{}"), ok(15, missing));
    assert_eq!(c.call(16, "files.stat", "null"), ok(16, missing));
    // An over-long name is an error like any other.
    let long = format!("/{}", "a".repeat(300));
    assert_eq!(
        stat(&mut c, 17, &long),
        err(17, -32603, &format!("stat {long}: file name too long"))
    );
    // Other errors are -32603 with Go's PathError text.
    assert_eq!(
        c.call(18, "files.stat", r#"{"path":"/x/f\u0000x"}"#),
        err(18, -32603, r"stat /x/f\u0000x: invalid argument")
    );
    assert_eq!(
        stat(&mut c, 19, &format!("{}/x", p(&file))),
        err(19, -32603, &format!("stat {}/x: not a directory", p(&file)))
    );
    // Namespace binding: a mistyped sibling field is Invalid params.
    assert_eq!(
        c.call(20, "files.stat", r#"{"path":"/","maxBytes":"{"}"#),
        err(20, -32602, "Invalid params")
    );
    // Case-insensitive key, last duplicate wins.
    assert_eq!(
        c.call(
            21,
            "files.stat",
            &format!(r#"{{"path":"/nope","PATH":"{}"}}"#, p(&file))
        ),
        ok(21, r#"{"exists":true,"isDir":false,"size":5,"mode":"-rw-r--r--"}"#)
    );
}

#[test]
fn list_sorts_skips_hidden_joins_and_follows_links() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    for f in ["b.txt", "B.txt", "_u", "a", ".hidden", ".git"] {
        fs::write(root.join(f), b"x").unwrap();
    }
    fs::create_dir(root.join("dir")).unwrap();
    fs::create_dir(root.join(".hiddendir")).unwrap();
    symlink(root.join("dir"), root.join("ldir")).unwrap();
    symlink(root.join("a"), root.join("lfile")).unwrap();
    symlink(root.join("gone"), root.join("zdangling")).unwrap();
    mkfifo(&root.join("fifo"));
    let r = p(&root);
    let entry = |name: &str, is_dir: bool| format!(r#"{{"name":"{name}","path":"{r}/{name}","isDir":{is_dir}}}"#);
    let want = [
        entry("B.txt", false),
        entry("_u", false),
        entry("a", false),
        entry("b.txt", false),
        entry("dir", true),
        entry("fifo", false),
        entry("ldir", true),
        entry("lfile", false),
        entry("zdangling", false),
    ]
    .join(",");
    let want = ok(1, &format!(r#"{{"entries":[{want}]}}"#));
    let mut c = d.connect();
    assert_eq!(c.call(1, "files.list", &format!(r#"{{"path":"{r}"}}"#)), want);
    // filepath.Join cleans: a trailing slash and `./` vanish from entry paths.
    assert_eq!(c.call(1, "files.list", &format!(r#"{{"path":"{r}/./"}}"#)), want);
    // Through a symlinked directory, the link path is kept (not resolved).
    let via = c.call(2, "files.list", &format!(r#"{{"path":"{r}/ldir"}}"#));
    assert_eq!(via, ok(2, r#"{"entries":[]}"#));
    fs::write(root.join("dir/inner"), b"").unwrap();
    assert_eq!(
        c.call(3, "files.list", &format!(r#"{{"path":"{r}/ldir"}}"#)),
        ok(
            3,
            &format!(r#"{{"entries":[{{"name":"inner","path":"{r}/ldir/inner","isDir":false}}]}}"#)
        )
    );
    assert_eq!(
        c.call(4, "files.list", &format!(r#"{{"path":"{r}/missing"}}"#)),
        err(4, -32603, &format!("open {r}/missing: no such file or directory"))
    );
    assert_eq!(
        c.call(5, "files.list", &format!(r#"{{"path":"{r}/a"}}"#)),
        err(5, -32603, &format!("open {r}/a: not a directory"))
    );
    assert_eq!(
        c.call(6, "files.list", "{}"),
        err(6, -32603, "open : no such file or directory")
    );
    assert_eq!(
        c.call(7, "files.list", &format!(r#"{{"path":"{r}/fifo"}}"#)),
        err(7, -32603, &format!("open {r}/fifo: not a directory"))
    );
    if !is_root() {
        let locked = root.join("dir");
        chmod(&locked, 0o000);
        let reply = c.call(8, "files.list", &format!(r#"{{"path":"{r}/dir"}}"#));
        chmod(&locked, 0o755);
        assert_eq!(reply, err(8, -32603, &format!("open {r}/dir: permission denied")));
    }
}

#[test]
fn list_names_with_invalid_utf8_become_replacement_chars() {
    use std::os::unix::ffi::OsStrExt;
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"x\xffy<");
    fs::write(root.join(name), b"").unwrap();
    let r = p(&root);
    assert_eq!(
        d.call("files.list", &format!(r#"{{"path":"{r}"}}"#)),
        ok(
            1,
            &format!(r#"{{"entries":[{{"name":"x�y\u003c","path":"{r}/x�y\u003c","isDir":false}}]}}"#)
        )
    );
}

#[test]
fn read_returns_raw_text_and_enforces_max_bytes() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let f = root.join("f");
    fs::write(&f, b"<a>&b\xe2\x80\xa8x\xff\xfey\x01\x08\x0c\"\\\n").unwrap();
    let fp = p(&f);
    let mut c = d.connect();
    let read = |c: &mut common::Client, id: u32, extra: &str| {
        c.call(id, "files.read", &format!(r#"{{"path":"{fp}"{extra}}}"#))
    };
    let content = ok(
        1,
        r#"{"content":"\u003ca\u003e\u0026b\u2028x��y\u0001\b\f\"\\\n","exists":true}"#,
    );
    assert_eq!(read(&mut c, 1, ""), content);
    assert_eq!(read(&mut c, 1, r#","maxBytes":-1"#), content);
    assert_eq!(read(&mut c, 1, r#","maxBytes":0"#), content);
    assert_eq!(read(&mut c, 1, r#","maxBytes":18"#), content);
    assert_eq!(
        read(&mut c, 2, r#","maxBytes":16"#),
        err(2, -32602, "files.read: file exceeds maxBytes")
    );
    assert_eq!(read(&mut c, 3, r#","maxBytes":1.5"#), err(3, -32602, "Invalid params"));
    assert_eq!(read(&mut c, 3, r#","maxBytes":"4""#), err(3, -32602, "Invalid params"));
    assert_eq!(
        c.call(4, "files.read", &format!(r#"{{"path":"{}"}}"#, p(&root))),
        err(4, -32602, "files.read: path is a directory")
    );
    // The directory check precedes the size check.
    assert_eq!(
        c.call(4, "files.read", &format!(r#"{{"path":"{}","maxBytes":1}}"#, p(&root))),
        err(4, -32602, "files.read: path is a directory")
    );
    let missing = r#"{"content":"","exists":false}"#;
    assert_eq!(
        c.call(5, "files.read", &format!(r#"{{"path":"{}/nope"}}"#, p(&root))),
        ok(5, missing)
    );
    assert_eq!(c.call(6, "files.read", "{}"), ok(6, missing));
    assert_eq!(
        c.call(7, "files.read", r#"{"path":"/x/f\u0000x"}"#),
        err(7, -32603, r"open /x/f\u0000x: invalid argument")
    );
    fs::write(root.join("empty"), b"").unwrap();
    assert_eq!(
        c.call(
            8,
            "files.read",
            &format!(r#"{{"path":"{}/empty","maxBytes":1}}"#, p(&root))
        ),
        ok(8, r#"{"content":"","exists":true}"#)
    );
    // A symlink is read through; a FIFO without a writer is refused at
    // once instead of blocking.
    symlink(&f, root.join("lnk")).unwrap();
    assert_eq!(
        c.call(9, "files.read", &format!(r#"{{"path":"{}/lnk"}}"#, p(&root))),
        content.replace("\"id\":1", "\"id\":9")
    );
    mkfifo(&root.join("fifo"));
    assert_eq!(
        c.call(10, "files.read", &format!(r#"{{"path":"{}/fifo"}}"#, p(&root))),
        err(10, -32602, "files.read: not a regular file")
    );
    if !is_root() {
        chmod(&f, 0o000);
        let reply = read(&mut c, 11, "");
        chmod(&f, 0o644);
        assert_eq!(reply, err(11, -32603, &format!("open {fp}: permission denied")));
    }
}

/// Issue 26 items 6 and 12 (files.read part), as reference build
/// 5fd08069 answers (`docs/record/files-read.md`): the kind of the opened
/// file decides, a FIFO with a writer waiting is refused rather than read,
/// an endless device is refused rather than read, the null device reads
/// empty, and no `maxBytes` means 262144.
#[test]
fn read_refuses_non_regular_files_and_caps_without_max_bytes() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let mut c = d.connect();
    let nrf = |id| err(id, -32602, "files.read: not a regular file");
    let read = |c: &mut common::Client, id: u32, path: &str, extra: &str| {
        c.call(id, "files.read", &format!(r#"{{"path":"{path}"{extra}}}"#))
    };

    let fifo = root.join("fifo");
    mkfifo(&fifo);
    let open_reader = |fifo: &Path| {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
            .unwrap()
    };
    // A writer that waits in open(2) for a reader: refused whenever the
    // writer gets there, before or after the daemon's open.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            fs::OpenOptions::new().write(true).open(&fifo).map(|mut f| {
                use std::io::Write;
                let _ = f.write_all(b"hi");
            })
        })
    };
    assert_eq!(read(&mut c, 1, &p(&fifo), ""), nrf(1));
    // If the writer reached open(2) only after the daemon closed the FIFO
    // it is still waiting for a reader: give it one so the join ends.
    let release = open_reader(&fifo);
    writer.join().unwrap().unwrap();
    drop(release);
    // A writer already attached with bytes waiting (the golden file's
    // case, which 5db5e4a and 89cb6289 read): refused the same way, at once
    // and whatever the size, as 5fd08069 does.
    let held = open_reader(&fifo);
    let mut attached = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    {
        use std::io::Write;
        attached.write_all(&[b'Z'; 40]).unwrap();
    }
    assert_eq!(read(&mut c, 11, &p(&fifo), ""), nrf(11));
    assert_eq!(read(&mut c, 12, &p(&fifo), r#","maxBytes":4"#), nrf(12));
    // The daemon read none of the bytes (with the writer gone, the read
    // ends at EOF).
    drop(attached);
    {
        use std::io::Read;
        let mut left = Vec::new();
        (&held).read_to_end(&mut left).unwrap();
        assert_eq!(left, vec![b'Z'; 40]);
    }

    assert_eq!(read(&mut c, 2, "/dev/zero", r#","maxBytes":16"#), nrf(2));
    assert_eq!(read(&mut c, 3, "/dev/zero", ""), nrf(3));
    symlink("/dev/zero", root.join("zero")).unwrap();
    assert_eq!(read(&mut c, 4, &p(&root.join("zero")), ""), nrf(4));
    assert_eq!(
        read(&mut c, 5, "/dev/null", ""),
        ok(5, r#"{"content":"","exists":true}"#)
    );

    let at_cap = root.join("at-cap");
    fs::write(&at_cap, vec![b'a'; 262_144]).unwrap();
    let reply = read(&mut c, 6, &p(&at_cap), "");
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":6,"result":{"content":"aaaa"#),
        "{}",
        &reply[..80]
    );
    let over = root.join("over-cap");
    fs::write(&over, vec![b'a'; 262_145]).unwrap();
    for extra in ["", r#","maxBytes":0"#, r#","maxBytes":-1"#] {
        assert_eq!(
            read(&mut c, 7, &p(&over), extra),
            err(7, -32602, "files.read: file exceeds maxBytes")
        );
    }
    // An explicit maxBytes above the cap is honoured.
    let reply = read(&mut c, 8, &p(&over), r#","maxBytes":262145"#);
    assert!(reply.starts_with(r#"{"jsonrpc":"2.0","id":8,"result":{"content":"aaaa"#));
}

/// Issue 26 item 6: a FIFO as `archivePath` once blocked a pool thread
/// for good (520 such calls starved every other method). It is refused at
/// once, neither read nor removed, and destDir is left alone.
#[test]
fn extract_tar_refuses_a_fifo_archive_without_blocking() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let fifo = root.join("upload.tar.gz");
    mkfifo(&fifo);
    let dest = root.join("dest");
    fs::create_dir(&dest).unwrap();
    fs::write(dest.join("keep"), b"").unwrap();
    let mut c = d.connect();
    let params = format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(&fifo), p(&dest));
    for id in 1..=40 {
        c.send(id, "files.extract_tar", &params);
    }
    for id in 1..=40 {
        assert_eq!(
            c.reply_for(id),
            ok(
                id,
                &format!(
                    r#"{{"success":false,"fileCount":0,"error":"open archive: open {}: not a regular file"}}"#,
                    p(&fifo)
                )
            )
        );
    }
    assert_eq!(c.call(41, "server.ping", "{}"), ok(41, r#"{"pong":true}"#));
    assert!(
        fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
        "not consumed"
    );
    assert!(dest.join("keep").exists(), "destDir untouched");
}

#[test]
fn validate_reports_existence_and_kind() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("f"), b"x").unwrap();
    symlink(root.join("gone"), root.join("dangling")).unwrap();
    let r = p(&root);
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "files.validate", &format!(r#"{{"path":"{r}"}}"#)),
        ok(1, r#"{"valid":true,"isDir":true}"#)
    );
    assert_eq!(
        c.call(2, "files.validate", &format!(r#"{{"path":"{r}/f"}}"#)),
        ok(2, r#"{"valid":true,"isDir":false}"#)
    );
    let missing = r#"{"valid":false,"isDir":false,"error":"Path does not exist"}"#;
    assert_eq!(
        c.call(3, "files.validate", &format!(r#"{{"path":"{r}/nope"}}"#)),
        ok(3, missing)
    );
    assert_eq!(
        c.call(4, "files.validate", &format!(r#"{{"path":"{r}/dangling"}}"#)),
        ok(4, missing)
    );
    assert_eq!(c.call(5, "files.validate", "{}"), ok(5, missing));
    assert_eq!(
        c.call(6, "files.validate", r#"{"path":"/x/f\u0000x"}"#),
        ok(
            6,
            r#"{"valid":false,"isDir":false,"error":"stat /x/f\u0000x: invalid argument"}"#
        )
    );
    assert_eq!(c.call(7, "files.validate", r#"[]"#), err(7, -32602, "Invalid params"));
    assert_eq!(
        c.call(8, "files.validate", &format!(r#"{{"path":"{r}/f/x"}}"#)),
        ok(
            8,
            &format!(r#"{{"valid":false,"isDir":false,"error":"stat {r}/f/x: not a directory"}}"#)
        )
    );
}

/// Threads of `pid` blocked in `openat` (each a files.read job held on its
/// FIFO by the test seam, waiting for a writer). Linux's `/proc`.
#[cfg(target_os = "linux")]
fn threads_in_open(pid: i32) -> usize {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let openat = libc::SYS_openat.to_string();
    tasks
        .flatten()
        .filter(|task| {
            fs::read_to_string(task.path().join("syscall"))
                .is_ok_and(|s| s.split_whitespace().next() == Some(openat.as_str()))
        })
        .count()
}

/// Whether a reader waits on the FIFO at `path` (a non-blocking open for
/// writing fails with ENXIO without one). Opening it lets that reader on.
#[cfg(target_os = "linux")]
fn release_reader(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .is_ok()
}

#[test]
#[cfg(target_os = "linux")]
fn a_seventeenth_files_job_waits_for_a_permit_while_other_methods_are_served() {
    use common::wait_until;
    use std::time::Duration;
    // files.read opens blocking here, so each job holds its permit and
    // its blocking thread on its own FIFO until the test opens the writer.
    let d = TestDaemon::start_with(&[], &[("REMORA_TEST_FILES_READ_BLOCKS", "1")]);
    let root = tempfile::tempdir().unwrap();
    let fifos: Vec<_> = (0..17).map(|i| root.path().join(format!("fifo{i}"))).collect();
    for fifo in &fifos {
        mkfifo(fifo);
    }
    let mut c = d.connect();
    let pid = common::peer_pid(&c.stream).expect("the daemon's pid");
    let read = |c: &mut common::Client, i: usize| c.send(i, "files.read", &format!(r#"{{"path":"{}"}}"#, p(&fifos[i])));
    for i in 0..16 {
        read(&mut c, i);
    }
    assert!(
        wait_until(Duration::from_secs(30), || threads_in_open(pid) == 16),
        "16 files.read jobs wait on their FIFOs"
    );
    read(&mut c, 16);
    // With every permit taken, the daemon still answers: a ping on the
    // same connection, a spawn with its output and exit.
    assert!(c.call(100, "server.ping", "{}").contains(r#""pong":true"#));
    let spawned = c.call(
        101,
        "process.spawn",
        r#"{"id":"served","command":"sh","args":["-c","echo still-served"]}"#,
    );
    assert!(spawned.contains(r#""result":"#), "{spawned}");
    let mut output = String::new();
    loop {
        let line = c.recv_line();
        if line.contains(r#""stream":"exit""#) {
            break;
        }
        output.push_str(&line);
    }
    // "still-served\n", base64 in the frame.
    assert!(output.contains("c3RpbGwtc2VydmVkCg=="), "{output}");
    // The 17th job has not started: it waits for a permit, not a writer.
    assert_eq!(threads_in_open(pid), 16);
    assert!(!release_reader(&fifos[16]), "the 17th job opened its FIFO");
    // Let one job finish: its permit goes to the 17th.
    assert!(release_reader(&fifos[0]));
    assert_eq!(c.reply_for(0), err(0, -32602, "files.read: not a regular file"));
    assert!(
        wait_until(Duration::from_secs(30), || release_reader(&fifos[16])),
        "the 17th job runs once a permit is free"
    );
    assert_eq!(c.reply_for(16), err(16, -32602, "files.read: not a regular file"));
    for (i, fifo) in fifos.iter().enumerate().take(16).skip(1) {
        assert!(wait_until(Duration::from_secs(30), || release_reader(fifo)));
        assert_eq!(c.reply_for(i), err(i as u32, -32602, "files.read: not a regular file"));
    }
}
