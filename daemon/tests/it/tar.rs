//! files.extract_tar against a real daemon: archives built with the `tar`
//! and `flate2` crates, hostile ones from hand-made headers. Each test
//! checks the exact reply and what is (and is not) on disk afterwards.

use crate::common::reply::{ok, p};
use crate::common::tarball::{gz, raw_header, raw_tar};
use crate::common::TestDaemon;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn failed(error: &str) -> String {
    ok(1, &format!(r#"{{"success":false,"fileCount":0,"error":"{error}"}}"#))
}

fn is_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

struct Case {
    d: TestDaemon,
    archive: PathBuf,
    dest: PathBuf,
}

impl Case {
    /// A daemon stamped as 89cb6289, the build whose column of
    /// `docs/record/files-extract-tar.md` these cases check (5fd08069's
    /// exec bit and come-back refusal: build_profiles.rs).
    fn new() -> Case {
        let stamp = format!("{:0<40}", "89cb6289");
        let d = TestDaemon::start_with(&["-reference-build", &stamp], &[]);
        let archive = d.root().join("upload.tar.gz");
        let dest = d.root().join("work").join("dest");
        Case { d, archive, dest }
    }

    fn write_archive(&self, bytes: &[u8]) {
        fs::write(&self.archive, bytes).unwrap();
    }

    fn extract(&self) -> String {
        self.extract_to(&p(&self.dest))
    }

    fn extract_to(&self, dest: &str) -> String {
        self.d.call(
            "files.extract_tar",
            &format!(r#"{{"archivePath":"{}","destDir":"{dest}"}}"#, p(&self.archive)),
        )
    }

    /// Sorted relative paths of everything under dest.
    fn tree(&self) -> Vec<String> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let rel = e.path().strip_prefix(base).unwrap().to_str().unwrap().to_string();
                let is_dir = e.file_type().unwrap().is_dir();
                out.push(if is_dir { format!("{rel}/") } else { rel });
                if is_dir {
                    walk(base, &e.path(), out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dest, &self.dest, &mut out);
        out.sort();
        out
    }
}

#[test]
fn extracts_files_with_fixed_modes_marker_and_consumes_archive() {
    let c = Case::new();
    fs::create_dir_all(c.dest.join("stale")).unwrap();
    fs::write(c.dest.join("stale/old.txt"), b"old").unwrap();
    let mut b = tar::Builder::new(Vec::new());
    let add = |b: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, data).unwrap();
    };
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    b.append_data(&mut dir, "src/", &[][..]).unwrap();
    add(&mut b, "src/main.rs", 0o644, b"fn main() {}\n");
    add(&mut b, "bin/run.sh", 0o755, b"#!/bin/sh\n");
    let long = format!("{}/deep.txt", "d".repeat(120));
    add(&mut b, &long, 0o644, b"long name");
    add(&mut b, "empty", 0o644, b"");
    let bytes = gz(&b.into_inner().unwrap());
    c.write_archive(&bytes);
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":4}"#));
    assert!(!c.archive.exists(), "archive consumed");
    assert_eq!(
        c.tree(),
        vec![
            ".synced".to_string(),
            "bin/".into(),
            "bin/run.sh".into(),
            format!("{}/", "d".repeat(120)),
            long.clone(),
            "empty".into(),
            "src/".into(),
            "src/main.rs".into(),
        ]
    );
    assert_eq!(fs::read(c.dest.join("src/main.rs")).unwrap(), b"fn main() {}\n");
    assert_eq!(fs::read(c.dest.join(&long)).unwrap(), b"long name");
    assert_eq!(fs::read(c.dest.join(".synced")).unwrap(), b"");
    assert_eq!(mode(&c.dest), 0o700);
    assert_eq!(mode(&c.dest.join("src")), 0o700);
    assert_eq!(mode(&c.dest.join("bin")), 0o700, "implied parent dirs are 0700");
    assert_eq!(mode(&c.dest.join("bin/run.sh")), 0o600, "0755 entry lands 0600");
    assert_eq!(mode(&c.dest.join("src/main.rs")), 0o600);
    assert_eq!(mode(&c.dest.join(".synced")), 0o600);

    // Idempotent and destructive: extracting again replaces everything.
    let only = gz(&raw_tar(&[(b"one.txt", b'0', b"1")]));
    c.write_archive(&only);
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":1}"#));
    assert_eq!(c.tree(), vec![".synced", "one.txt"]);

    // An empty (but valid) archive: zero files, the marker still written.
    c.write_archive(&gz(&[0u8; 1024]));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":0}"#));
    assert_eq!(c.tree(), vec![".synced"]);
}

#[test]
fn param_and_dest_validation_leave_the_archive() {
    let c = Case::new();
    c.write_archive(b"whatever");
    let required =
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"archivePath and destDir are required"}}"#;
    assert_eq!(c.d.call("files.extract_tar", "{}"), required);
    assert_eq!(c.d.call("files.extract_tar", r#"{"archivePath":"/x"}"#), required);
    assert_eq!(
        c.d.call("files.extract_tar", r#"{"destDir":"/x","archivePath":""}"#),
        required
    );
    assert_eq!(
        c.d.call("files.extract_tar", r#"{"archivePath":1,"destDir":"/x"}"#),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}"#
    );
    for dest in ["relative/dir", "/", "//", "/..", "/tmp/..", "./x"] {
        assert_eq!(
            c.extract_to(dest),
            ok(
                1,
                &format!(r#"{{"success":false,"error":"destDir must be an absolute, non-root path: {dest}"}}"#)
            ),
            "{dest}"
        );
    }
    assert!(c.archive.exists(), "rejected before the archive is opened");
}

#[test]
fn open_failure_reports_go_error_and_keeps_dest() {
    let c = Case::new();
    fs::create_dir_all(&c.dest).unwrap();
    fs::write(c.dest.join("keep"), b"").unwrap();
    assert_eq!(
        c.extract(),
        failed(&format!(
            "open archive: open {}: no such file or directory",
            p(&c.archive)
        ))
    );
    assert!(
        c.dest.join("keep").exists(),
        "dest untouched when the archive cannot be opened"
    );
}

#[test]
fn bad_gzip_truncation_and_corruption() {
    let c = Case::new();
    fs::create_dir_all(&c.dest).unwrap();
    fs::write(c.dest.join("stale"), b"").unwrap();
    c.write_archive(b"this is not gzip data at all");
    assert_eq!(c.extract(), failed("gzip: invalid header"));
    assert!(!c.archive.exists(), "consumed on a bad gzip");
    assert_eq!(c.tree(), Vec::<String>::new(), "dest wiped and recreated, no marker");
    assert_eq!(mode(&c.dest), 0o700);

    c.write_archive(b"");
    assert_eq!(c.extract(), failed("EOF"));
    assert!(!c.archive.exists());

    let data: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let good = gz(&raw_tar(&[(b"big.bin", b'0', &data)]));
    c.write_archive(&good[..good.len() / 2]);
    assert_eq!(c.extract(), failed("unexpected EOF"));
    assert!(!c.archive.exists());

    // A complete gzip of a tar cut inside an entry's data.
    let tarball = raw_tar(&[(b"big.bin", b'0', &data)]);
    c.write_archive(&gz(&tarball[..10_000]));
    assert_eq!(c.extract(), failed("unexpected EOF"));

    // A corrupt CRC in the trailer, with and without end-of-archive
    // blocks: the stream is always read to its end, so both fail.
    let mut unterminated = raw_header(b"a", b'0', 3);
    unterminated.extend_from_slice(b"abc");
    unterminated.resize(1024, 0);
    unterminated.truncate(1024);
    let mut bad_crc = gz(&unterminated[..1024]);
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0xff;
    c.write_archive(&bad_crc);
    assert_eq!(c.extract(), failed("gzip: invalid checksum"));
    let mut bad_crc = gz(&raw_tar(&[(b"a", b'0', b"abc")]));
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0xff;
    c.write_archive(&bad_crc);
    assert_eq!(
        c.extract(),
        failed("gzip: invalid checksum"),
        "read past the end marker"
    );
    // A bad size field in the trailer is the same checksum error.
    let mut bad_size = gz(&unterminated[..1024]);
    let n = bad_size.len();
    bad_size[n - 1] ^= 0x01;
    c.write_archive(&bad_size);
    assert_eq!(c.extract(), failed("gzip: invalid checksum"));

    // Valid gzip, not a tar.
    c.write_archive(&gz(&[b'x'; 1024]));
    assert_eq!(c.extract(), failed("archive/tar: invalid tar header"));
    assert!(!c.archive.exists());
}

/// Issue 26 item 11: a gzip whose trailer is cut short (here the 4-byte
/// size, or all 8 bytes) once extracted as success because the tar reader
/// stops at its end-of-archive blocks; the reference's gzip reader says
/// `unexpected EOF` for it. Padding after the end blocks (GNU tar writes
/// 10 KiB records) must not hide it either.
#[test]
fn gzip_with_a_cut_trailer_fails_as_unexpected_eof() {
    let c = Case::new();
    let tarball = raw_tar(&[(b"a.txt", b'0', b"hello")]);
    let mut padded = tarball.clone();
    padded.resize(10240, 0);
    for (archive, cut) in [(&tarball, 4), (&tarball, 8), (&padded, 4), (&padded, 1)] {
        let whole = gz(archive);
        c.write_archive(&whole[..whole.len() - cut]);
        assert_eq!(c.extract(), failed("unexpected EOF"), "cut {cut} of {}", archive.len());
        assert!(!c.dest.join(".synced").exists(), "no marker after a failure");
        assert!(!c.archive.exists());
    }
    // The same archives whole still extract.
    c.write_archive(&gz(&padded));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":1}"#));
    assert_eq!(c.tree(), [".synced", "a.txt"]);
}

/// Issue 26 item 11: a failure in the middle of a file's data leaves no
/// half-written file; complete files written before it stay (as in the
/// reference).
#[test]
fn an_archive_cut_inside_a_file_leaves_no_partial_file() {
    let c = Case::new();
    let data: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let tarball = raw_tar(&[(b"first.txt", b'0', b"complete"), (b"big.bin", b'0', &data)]);
    // The tar cut inside big.bin's data, in a well-formed gzip.
    c.write_archive(&gz(&tarball[..100_000]));
    assert_eq!(c.extract(), failed("unexpected EOF"));
    assert_eq!(c.tree(), ["first.txt"], "big.bin was cut: removed");
    assert_eq!(fs::read(c.dest.join("first.txt")).unwrap(), b"complete");
    // The gzip itself cut inside big.bin's data.
    let whole = gz(&tarball);
    c.write_archive(&whole[..whole.len() / 2]);
    assert_eq!(c.extract(), failed("unexpected EOF"));
    assert_eq!(c.tree(), ["first.txt"]);
}

#[test]
fn zip_slip_is_refused_and_nothing_escapes() {
    let c = Case::new();
    let outside = c.d.root().join("work");
    for name in ["../../x", "a/../../x", "../x", "..", "a/../.."] {
        c.write_archive(&gz(&raw_tar(&[
            (b"ok.txt", b'0', b"fine"),
            (name.as_bytes(), b'0', b"evil"),
        ])));
        assert_eq!(
            c.extract(),
            failed(&format!("unsafe path in archive: {name}")),
            "{name}"
        );
        assert!(!c.archive.exists());
        assert!(!outside.join("x").exists() && !c.d.root().join("x").exists());
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            1,
            "only dest itself under work/"
        );
    }
    // Also for directory entries and for a sibling sharing dest's prefix.
    c.write_archive(&gz(&raw_tar(&[(b"../dest-evil/", b'5', b"")])));
    assert_eq!(c.extract(), failed("unsafe path in archive: ../dest-evil/"));
    assert!(!outside.join("dest-evil").exists());

    // A `../` that resolves back inside is fine; so are absolute names and
    // `./`, which filepath.Join puts inside destDir.
    c.write_archive(&gz(&raw_tar(&[
        (b"./", b'5', b""),
        (b"a/../b.txt", b'0', b"b"),
        (b"../dest/c.txt", b'0', b"c"),
        (b"/etc/passwd", b'0', b"not really"),
        (b"//abs//dir/", b'5', b""),
    ])));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":3}"#));
    assert_eq!(
        c.tree(),
        vec![".synced", "abs/", "abs/dir/", "b.txt", "c.txt", "etc/", "etc/passwd"]
    );
    assert_eq!(fs::read(c.dest.join("etc/passwd")).unwrap(), b"not really");
}

#[test]
fn links_devices_and_fifos_are_refused() {
    let c = Case::new();
    for (flag, name) in [
        (b'2', "link"),
        (b'1', "hard"),
        (b'3', "chardev"),
        (b'4', "blockdev"),
        (b'6', "fifo"),
        (b'7', "contig"),
        (b'V', "volume"),
    ] {
        c.write_archive(&gz(&raw_tar(&[
            (b"first.txt", b'0', b"1"),
            (name.as_bytes(), flag, b""),
        ])));
        assert_eq!(
            c.extract(),
            failed(&format!("unsupported tar entry type {}: {name}", char::from(flag))),
            "{name}"
        );
        assert!(!c.archive.exists());
        assert!(fs::symlink_metadata(c.dest.join(name)).is_err(), "{name} not created");
        assert!(!c.dest.join(".synced").exists());
    }
    // The path check runs first: an escaping symlink is an unsafe path.
    c.write_archive(&gz(&raw_tar(&[(b"../l", b'2', b"")])));
    assert_eq!(c.extract(), failed("unsafe path in archive: ../l"));
    // A PAX global header is an entry of its own in Go's archive/tar.
    let rec = b"19 comment=abcdefg\n";
    c.write_archive(&gz(&raw_tar(&[(b"pax_global_header", b'g', rec)])));
    assert_eq!(c.extract(), failed("unsupported tar entry type g: pax_global_header"));
    // Real symlink entries built by the tar crate.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "ln", "/etc/passwd").unwrap();
    c.write_archive(&gz(&b.into_inner().unwrap()));
    assert_eq!(c.extract(), failed("unsupported tar entry type 2: ln"));
}

#[test]
fn entry_conflicts_and_marker_failures() {
    let c = Case::new();
    let dest = p(&c.dest);
    // A file where a directory is needed: the texts of build 89cb6289
    // (docs/record/files-extract-tar.md), the entry named first.
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x"), (b"a/b", b'0', b"y")])));
    assert_eq!(
        c.extract(),
        failed(&format!("mkdir parent a/b: mkdir {dest}/a: not a directory"))
    );
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x"), (b"a/b/c", b'0', b"y")])));
    assert_eq!(
        c.extract(),
        failed(&format!("mkdir parent a/b/c: mkdir {dest}/a: not a directory"))
    );
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x"), (b"a/", b'5', b"")])));
    assert_eq!(
        c.extract(),
        failed(&format!("mkdir a/: mkdir {dest}/a: not a directory"))
    );
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x"), (b"a/b/", b'5', b"")])));
    assert_eq!(
        c.extract(),
        failed(&format!("mkdir a/b/: mkdir {dest}/a: not a directory"))
    );
    // A directory where a file is wanted.
    c.write_archive(&gz(&raw_tar(&[(b"d/", b'5', b""), (b"d", b'0', b"y")])));
    assert_eq!(c.extract(), failed(&format!("create d: open {dest}/d: is a directory")));
    c.write_archive(&gz(&raw_tar(&[(b"s/d/", b'5', b""), (b"s/d", b'0', b"y")])));
    assert_eq!(
        c.extract(),
        failed(&format!("create s/d: open {dest}/s/d: is a directory"))
    );
    // A file entry that names destDir itself.
    c.write_archive(&gz(&raw_tar(&[(b".", b'0', b"y")])));
    assert_eq!(c.extract(), failed(&format!("create .: open {dest}: is a directory")));
    // Duplicates: the last one wins, both count.
    c.write_archive(&gz(&raw_tar(&[(b"f", b'0', b"first"), (b"f", b'0', b"2nd")])));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":2}"#));
    assert_eq!(fs::read(c.dest.join("f")).unwrap(), b"2nd");
    // Paths past PATH_MAX fail like Go's path-based calls (via PAX path).
    let deep = "d/".repeat(2100) + "f";
    let rec = format!("{} path={deep}\n", deep.len() + 11);
    assert_eq!(rec.len(), deep.len() + 11);
    c.write_archive(&gz(&raw_tar(&[
        (b"PaxHeaders/f", b'x', rec.as_bytes()),
        (b"f", b'0', b"x"),
    ])));
    let mut first_too_long = dest.clone();
    while first_too_long.len() < 4096 {
        first_too_long.push_str("/d");
    }
    assert_eq!(
        c.extract(),
        failed(&format!(
            "mkdir parent {deep}: mkdir {first_too_long}: file name too long"
        ))
    );
    // The marker cannot be written over a directory of that name.
    c.write_archive(&gz(&raw_tar(&[(b".synced/", b'5', b"")])));
    assert_eq!(
        c.extract(),
        failed(&format!("write .synced: open {dest}/.synced: is a directory"))
    );
    // An archive file named .synced is overwritten by the (empty) marker.
    c.write_archive(&gz(&raw_tar(&[(b".synced", b'0', b"data")])));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":1}"#));
    assert_eq!(fs::read(c.dest.join(".synced")).unwrap(), b"");
}

#[test]
fn dest_clean_and_mkdir_failures() {
    let c = Case::new();
    // destDir below a regular file: Go's RemoveAll fails at unlinkat.
    let file = c.d.root().join("plain");
    fs::write(&file, b"").unwrap();
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x")])));
    assert_eq!(
        c.extract_to(&format!("{}/sub", p(&file))),
        failed(&format!("clean destDir: unlinkat {}/sub: not a directory", p(&file)))
    );
    assert!(!c.archive.exists(), "consumed: it was opened");
    // A trailing `/.` is refused by RemoveAll.
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x")])));
    let dot = format!("{}/.", p(&c.dest));
    assert_eq!(
        c.extract_to(&dot),
        failed(&format!("clean destDir: RemoveAll {dot}: invalid argument"))
    );
    // destDir that is a symlink: the link is removed, not followed.
    let target = c.d.root().join("target");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("precious"), b"").unwrap();
    fs::create_dir_all(c.dest.parent().unwrap()).unwrap();
    let _ = fs::remove_dir_all(&c.dest);
    std::os::unix::fs::symlink(&target, &c.dest).unwrap();
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x")])));
    assert_eq!(c.extract(), ok(1, r#"{"success":true,"fileCount":1}"#));
    assert!(target.join("precious").exists());
    assert!(fs::symlink_metadata(&c.dest).unwrap().is_dir());

    if is_root() {
        return; // permission checks do not bind root
    }
    let ro = c.d.root().join("ro");
    fs::create_dir_all(ro.join("dest")).unwrap();
    fs::write(ro.join("dest/f"), b"").unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x")])));
    let r1 = c.extract_to(&format!("{}/dest", p(&ro)));
    c.write_archive(&gz(&raw_tar(&[(b"a", b'0', b"x")])));
    let r2 = c.extract_to(&format!("{}/new", p(&ro)));
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        r1,
        failed(&format!("clean destDir: unlinkat {}/dest: permission denied", p(&ro)))
    );
    assert_eq!(
        r2,
        failed(&format!("mkdir destDir: mkdir {}/new: permission denied", p(&ro)))
    );
}

#[test]
fn archive_in_read_only_directory_still_extracts() {
    if is_root() {
        return; // root can always unlink
    }
    let c = Case::new();
    let ro = c.d.root().join("uploads");
    fs::create_dir(&ro).unwrap();
    let archive = ro.join("a.tar.gz");
    fs::write(&archive, gz(&raw_tar(&[(b"a", b'0', b"x")]))).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    let reply = c.d.call(
        "files.extract_tar",
        &format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(&archive), p(&c.dest)),
    );
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    // The removal failure is ignored (as Go ignores its deferred os.Remove).
    assert_eq!(reply, ok(1, r#"{"success":true,"fileCount":1}"#));
    assert!(archive.exists());
}

#[test]
fn archive_inside_dest_is_read_from_the_open_descriptor() {
    let c = Case::new();
    fs::create_dir_all(&c.dest).unwrap();
    let inside = c.dest.join("in.tar.gz");
    fs::write(&inside, gz(&raw_tar(&[(b"x.txt", b'0', b"x")]))).unwrap();
    let reply = c.d.call(
        "files.extract_tar",
        &format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(&inside), p(&c.dest)),
    );
    assert_eq!(reply, ok(1, r#"{"success":true,"fileCount":1}"#));
    assert_eq!(c.tree(), vec![".synced", "x.txt"]);
}

/// Found by the `tar_extract` fuzzer: with flate2's default backend a
/// deflate stream whose first symbol copies from before the start of the
/// output ("distance too far back") decoded to zeros, the tar reader saw an
/// end-of-archive block, and extraction reported success. Go's flate (and
/// zlib) reject it; so does remora now (flate2 on the zlib-rs backend).
#[test]
fn fuzz_regression_distance_too_far_back_is_corrupt_input() {
    let c = Case::new();
    // gzip header, then one fixed-Huffman block: <length 3, distance 1>
    // with no output yet, end of block; then a (meaningless) trailer.
    let mut archive = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    archive.extend_from_slice(&[0x03, 0x02, 0x00]);
    archive.extend_from_slice(&[0; 8]);
    c.write_archive(&archive);
    let reply = c.extract();
    let prefix = r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"fileCount":0,"error":"flate: corrupt input before offset "#;
    assert!(reply.starts_with(prefix), "{reply}");
    assert!(reply.ends_with("\"}}"), "{reply}");
    assert!(!c.archive.exists(), "consumed once opened");
    assert!(!c.dest.join(".synced").exists(), "no marker on failure");
}

/// Issue 26 item 3: another user races the wipe of destDir by renaming a
/// directory of their own into its place (`RENAME_NOREPLACE`, so only
/// into the gap between the wipe and the daemon's mkdir). The extraction
/// must never succeed into that directory: it either creates its own or
/// fails `mkdir destDir: mkdir <dest>: file exists`. Needs root to make a
/// directory owned by another uid (65534, "nobody").
#[test]
#[cfg(target_os = "linux")] // renameat2(RENAME_NOREPLACE) is Linux-only
fn a_dest_dir_planted_by_another_user_is_never_extracted_into() {
    use std::os::unix::fs::MetadataExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    if !is_root() {
        eprintln!("skipping: needs root to create another user's directory");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let dest = shared.join("dest");
    let planted = shared.join("planted");
    let stop = Arc::new(AtomicBool::new(false));
    let wins = Arc::new(AtomicU64::new(0));
    let racer = {
        let (stop, wins, dest, planted) = (stop.clone(), wins.clone(), dest.clone(), planted.clone());
        std::thread::spawn(move || {
            let from = std::ffi::CString::new(planted.as_os_str().as_encoded_bytes()).unwrap();
            let to = std::ffi::CString::new(dest.as_os_str().as_encoded_bytes()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                if !planted.exists() {
                    fs::create_dir(&planted).unwrap();
                    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
                }
                // SAFETY: valid NUL-terminated paths.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        from.as_ptr(),
                        libc::AT_FDCWD,
                        to.as_ptr(),
                        libc::RENAME_NOREPLACE,
                    )
                };
                if r == 0 {
                    wins.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let archive = tmp.path().join("a.tar.gz");
    let bytes = gz(&raw_tar(&[(b"run.sh", b'0', b"echo mine\n")]));
    let d = TestDaemon::start();
    let mut c = d.connect();
    let params = format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(&archive), p(&dest));
    let refusal = failed(&format!("mkdir destDir: mkdir {}: file exists", p(&dest)));
    let mut refused = 0;
    for _ in 0..500 {
        fs::write(&archive, &bytes).unwrap();
        let reply = c.call(1, "files.extract_tar", &params);
        if reply == ok(1, r#"{"success":true,"fileCount":1}"#) {
            let meta = fs::symlink_metadata(&dest).unwrap();
            assert_eq!(meta.uid(), 0, "extracted into another user's directory");
            assert_eq!(fs::read(dest.join("run.sh")).unwrap(), b"echo mine\n");
        } else {
            assert_eq!(reply, refusal);
            refused += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    eprintln!(
        "racer planted {} times; {refused} extractions refused",
        wins.load(Ordering::Relaxed)
    );
}
