//! files.extract_tar's failure texts on a daemon stamped as build
//! 5fd08069: the entry and destDir failures are worded relative to
//! `destDir` (`openat`/`mkdirat`), as the collision, directory-entry and
//! destDir tables of `docs/record/files-extract-tar.md` give them for that
//! build (Linux rows). `tar.rs` holds the 89cb6289 texts of the same cases.

use crate::common::reply::{ok, p};
use crate::common::tarball::{gz, raw_tar, Entry};
use crate::common::TestDaemon;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn failed(error: &str) -> String {
    ok(1, &format!(r#"{{"success":false,"fileCount":0,"error":"{error}"}}"#))
}

fn is_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

struct Case {
    d: TestDaemon,
    archive: PathBuf,
    dest: PathBuf,
}

impl Case {
    /// A daemon stamped as 5fd08069.
    fn new() -> Case {
        let stamp = format!("{:0<40}", "5fd08069");
        let d = TestDaemon::start_with(&["-reference-build", &stamp], &[]);
        let archive = d.root().join("upload.tar.gz");
        let dest = d.root().join("work").join("dest");
        Case { d, archive, dest }
    }

    fn extract_to(&self, dest: &str, entries: &[Entry]) -> String {
        fs::write(&self.archive, gz(&raw_tar(entries))).unwrap();
        self.d.call(
            "files.extract_tar",
            &format!(r#"{{"archivePath":"{}","destDir":"{dest}"}}"#, p(&self.archive)),
        )
    }

    fn extract(&self, entries: &[Entry]) -> String {
        self.extract_to(&p(&self.dest), entries)
    }
}

#[test]
fn collisions_are_worded_relative_to_dest_dir() {
    let c = Case::new();
    let rows: [(&[Entry], &str); 8] = [
        (
            &[(b"a", b'0', b"x"), (b"a/b", b'0', b"y")],
            "mkdir parent a/b: mkdirat a: file exists",
        ),
        (
            &[(b"x/", b'5', b""), (b"x", b'0', b"y")],
            "create x: openat x: file exists",
        ),
        (
            &[(b"a", b'0', b"x"), (b"a/b/c", b'0', b"y")],
            "mkdir parent a/b/c: openat a: not a directory",
        ),
        (
            &[(b"s/a", b'0', b"x"), (b"s/a/b", b'0', b"y")],
            "mkdir parent s/a/b: mkdirat s/a: file exists",
        ),
        (
            &[(b"s/d/", b'5', b""), (b"s/d", b'0', b"y")],
            "create s/d: openat s/d: file exists",
        ),
        (&[(b".", b'0', b"y")], "create .: openat .: file exists"),
        (&[(b"/", b'0', b"y")], "create /: openat .: file exists"),
        (
            &[(b"a.txt/", b'5', b""), (b"a.txt", b'0', b"y")],
            "create a.txt: openat a.txt: file exists",
        ),
    ];
    for (entries, text) in rows {
        assert_eq!(c.extract(entries), failed(text), "{text}");
        assert!(!c.archive.exists(), "consumed: {text}");
        assert!(!c.dest.join(".synced").exists(), "no marker: {text}");
    }
    assert_eq!(
        c.extract(&[(b"//", b'0', b"y")]),
        failed("create //: openat .: file exists")
    );
}

#[test]
fn directory_entries_are_worded_relative_to_dest_dir() {
    let c = Case::new();
    let rows: [(&[Entry], &str); 3] = [
        (
            &[(b"a", b'0', b"x"), (b"a/", b'5', b"")],
            "mkdir a/: mkdirat a: file exists",
        ),
        (
            &[(b"a", b'0', b"x"), (b"a/b/", b'5', b"")],
            "mkdir a/b/: openat a: not a directory",
        ),
        (
            &[(b"a.txt", b'0', b"x"), (b"a.txt/", b'5', b"")],
            "mkdir a.txt/: mkdirat a.txt: file exists",
        ),
    ];
    for (entries, text) in rows {
        assert_eq!(c.extract(entries), failed(text), "{text}");
        // The file stays.
        let first = std::str::from_utf8(entries[0].0).unwrap();
        assert_eq!(fs::read(c.dest.join(first)).unwrap(), b"x", "{text}");
    }
    // What succeeds on both builds still does.
    assert_eq!(
        c.extract(&[
            (b"d/", b'5', b""),
            (b"d/", b'5', b""),
            (b"p/q/r/", b'5', b""),
            (b"p/f", b'0', b"z")
        ]),
        ok(1, r#"{"success":true,"fileCount":1}"#)
    );
    assert!(c.dest.join("p/q/r").is_dir());
    assert_eq!(fs::read(c.dest.join("p/f")).unwrap(), b"z");
    assert_eq!(fs::read(c.dest.join(".synced")).unwrap(), b"");
}

#[test]
fn a_name_too_long_is_worded_relative_to_dest_dir() {
    let c = Case::new();
    let name = "n".repeat(300);
    let rec = format!("{} path={name}\n", name.len() + 10);
    assert_eq!(rec.len(), name.len() + 10);
    assert_eq!(
        c.extract(&[(b"PaxHeaders/f", b'x', rec.as_bytes()), (b"f", b'0', b"x")]),
        failed(&format!("create {name}: openat {name}: file name too long"))
    );
}

#[test]
fn old_content_goes_and_a_good_archive_extracts() {
    let c = Case::new();
    fs::create_dir_all(c.dest.join("old/deep")).unwrap();
    fs::write(c.dest.join("old/deep/f"), b"").unwrap();
    fs::write(c.dest.join("old.txt"), b"").unwrap();
    assert_eq!(
        c.extract(&[(b"a.txt", b'0', b"hello"), (b"a.txt", b'0', b"bye")]),
        ok(1, r#"{"success":true,"fileCount":2}"#)
    );
    let mut names: Vec<_> = fs::read_dir(&c.dest)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [".synced", "a.txt"]);
    assert_eq!(fs::read(c.dest.join("a.txt")).unwrap(), b"bye");
    assert_eq!(fs::metadata(&c.dest).unwrap().permissions().mode() & 0o7777, 0o700);
}

/// The permission rows of the record (Linux VM). Root passes every
/// permission check, so these run only as another user.
#[test]
fn dest_dir_permission_rows() {
    let c = Case::new();
    if is_root() {
        return;
    }
    let root = c.d.root();
    // The parent of destDir has mode 0500, destDir does not exist.
    let ro = root.join("ro");
    fs::create_dir(&ro).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
    let r1 = c.extract_to(&format!("{}/dest", p(&ro)), &[(b"a", b'0', b"x")]);
    // An old destDir of mode 0500 with content.
    let old = root.join("old");
    fs::create_dir_all(old.join("dest")).unwrap();
    fs::write(old.join("dest/old.txt"), b"").unwrap();
    fs::set_permissions(old.join("dest"), fs::Permissions::from_mode(0o500)).unwrap();
    let r2 = c.extract_to(&format!("{}/dest", p(&old)), &[(b"a", b'0', b"x")]);
    // The parent of destDir has mode 0300, and destDir has old content.
    let wx = root.join("wx");
    fs::create_dir_all(wx.join("dest")).unwrap();
    fs::write(wx.join("dest/old.txt"), b"").unwrap();
    fs::set_permissions(&wx, fs::Permissions::from_mode(0o300)).unwrap();
    let r3 = c.extract_to(&format!("{}/dest", p(&wx)), &[(b"a", b'0', b"x")]);
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(old.join("dest"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&wx, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r1, failed("mkdir destDir: mkdirat dest: permission denied"));
    assert_eq!(r2, failed("clean destDir: RemoveAll dest: permission denied"));
    assert!(old.join("dest/old.txt").exists(), "the old content stays");
    assert_eq!(r3, failed(&format!("open parent: open {}: permission denied", p(&wx))));
    assert!(wx.join("dest/old.txt").exists(), "the old content stays");
}

/// A 5fd08069 daemon started with `umask` (through a shell that sets it
/// and execs remora; the test process's own umask is never changed).
fn daemon_with_umask(dir: &std::path::Path, umask: &str) -> TestDaemon {
    use std::os::unix::fs::OpenOptionsExt;
    let wrapper = dir.join(format!("remora-umask-{umask}"));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&wrapper)
        .unwrap();
    writeln!(
        f,
        "#!/bin/sh\numask {umask}\nexec '{}' \"$@\"",
        crate::common::remora_bin()
    )
    .unwrap();
    drop(f);
    let stamp = format!("{:0<40}", "5fd08069");
    TestDaemon::start_binary(&wrapper, &["-reference-build", &stamp])
}

/// The umask rows of the record (Linux VM): the new destDir gets a mode
/// the daemon cannot use. Root passes every permission check, so these
/// run only as another user.
#[test]
fn dest_dir_umask_rows() {
    if is_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let call = |d: &TestDaemon, dest: &std::path::Path| {
        let archive = tmp.path().join("a.tar.gz");
        fs::write(&archive, gz(&raw_tar(&[(b"a.txt", b'0', b"x")]))).unwrap();
        d.call(
            "files.extract_tar",
            &format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(&archive), p(dest)),
        )
    };
    let d = daemon_with_umask(tmp.path(), "0200");
    fs::create_dir(tmp.path().join("u200")).unwrap();
    let dest = tmp.path().join("u200/dest");
    assert_eq!(call(&d, &dest), failed("create a.txt: openat a.txt: permission denied"));
    let d = daemon_with_umask(tmp.path(), "0100");
    fs::create_dir_all(tmp.path().join("u100/x")).unwrap();
    let dest = tmp.path().join("u100/x/dest");
    assert_eq!(
        call(&d, &dest),
        failed(r#"open destDir: \"dest\" could not be examined (statat .: permission denied)"#)
    );
    let d = daemon_with_umask(tmp.path(), "0400");
    fs::create_dir(tmp.path().join("u400")).unwrap();
    let dest = tmp.path().join("u400/dest");
    assert_eq!(call(&d, &dest), failed("open destDir: openat dest: permission denied"));
    let dest = tmp.path().join("u400b/p/dest");
    assert_eq!(
        call(&d, &dest),
        failed(&format!(
            "open parent: open {}: permission denied",
            p(&tmp.path().join("u400b/p"))
        ))
    );
    assert!(!dest.exists(), "no destDir afterwards");
    for sub in ["u200/dest", "u100/x/dest", "u400/dest", "u400b", "u400b/p"] {
        let _ = fs::set_permissions(tmp.path().join(sub), fs::Permissions::from_mode(0o700));
    }
}
