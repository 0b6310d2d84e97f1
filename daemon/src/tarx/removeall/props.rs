//! The removals' side of the home guard's property test (issue 44, item
//! 9; audit F3): on the fixture of `base::homeguard::props` (a fake home,
//! links to it and to its parent, and in a private mount namespace bind
//! mounts of both), every spelling the guard clears is wiped for real, as
//! `files.extract_tar` wipes a `destDir`; the home and its parent must come
//! through every wipe whole. And the descent's mount test, by mount id: a
//! bind mount of a directory of the tree's own filesystem is left.

use super::{remove_all_from, remove_all_within, split_path, Bounds, ParentNow, HOME_HERE, OTHER_FILESYSTEM};
use crate::base::homeguard::props::{self, on_a_private_thread, Fixture};
use crate::base::homeguard::{Homes, Verdict};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[test]
fn wiping_what_the_home_guard_clears_never_reaches_the_home() {
    let tmp = tempfile::tempdir().unwrap();
    let (tally, mounts) = on_a_private_thread(|private| {
        let fixture = Fixture::new(tmp.path(), private);
        let top = fixture.top.as_os_str().as_bytes().to_vec();
        let tally: RefCell<BTreeMap<&'static str, usize>> = RefCell::default();
        let count = |key| *tally.borrow_mut().entry(key).or_default() += 1;
        let result = props::runner().run(&props::recipes(props::Aim::Anywhere), |recipe| {
            fixture.restore();
            let spelled = fixture.render(&recipe);
            let spelling = &spelled.spelling;
            let shown = String::from_utf8_lossy(spelling).into_owned();
            let homes = fixture.homes(&spelled);
            if homes.verdict(Path::new(OsStr::from_bytes(spelling))) != Verdict::Clear {
                count("refused by the guard");
                return Ok(());
            }
            // Nothing outside the temp dir is ever wiped: what the spelling
            // names lies inside `<top>`, its parent there or at `<top>`.
            let (dir, base) = split_path(spelling);
            let real = props::realpath(spelling);
            let real_dir = props::realpath(&dir);
            let inside = |p: &[u8]| p.starts_with(&top) && p.get(top.len()) == Some(&b'/');
            match (&real, &real_dir) {
                (Ok(real), Ok(real_dir)) if inside(real) && (inside(real_dir) || *real_dir == top) => {}
                (Err(_), _) | (_, Err(_)) => {
                    count("names nothing");
                    return Ok(());
                }
                // `/proc/<pid>/cwd` and the like, whose last name is the
                // link in `/proc` (which the kernel never removes).
                (Ok(real), Ok(real_dir)) if inside(real) && real_dir.starts_with(b"/proc/") => {
                    count("the last name is a link in /proc");
                    return Ok(());
                }
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "{shown:?} names something outside the temp dir"
                    )))
                }
            }
            let Some(parent) = props::open_dir(&dir) else {
                count("names nothing");
                return Ok(());
            };
            let holds_a_home_mount = fixture.holds_a_home_mount(spelling);
            let bounds = Bounds { homes, root: None };
            let result = remove_all_within(spelling, &base, ParentNow::Dir(&parent), bounds);
            prop_assert!(
                fixture.home_intact(),
                "wiping {:?} reached the home: {:?}",
                shown,
                result
            );
            if holds_a_home_mount {
                count("wiped a tree holding a mount of the home or its parent");
            }
            count(match result {
                Ok(()) => "wiped",
                Err(e) if e.to_string().ends_with(HOME_HERE) => "wiped, a home mount left",
                Err(e) if e.to_string().ends_with(OTHER_FILESYSTEM) => "wiped, another mount left",
                // Go's texts: a spelling ending in `/.`, `x/..` (its
                // parent emptied, `..` not removed), a busy mount point.
                Err(_) => "wipe failed otherwise",
            });
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        (tally.into_inner(), private.mounts)
    });
    eprintln!("{} cases: {tally:#?}", props::cases());
    let count = |key: &str| tally.get(key).copied().unwrap_or(0);
    let at_least = (props::cases() / 64) as usize;
    assert!(count("wiped") >= at_least, "only {} wipes", count("wiped"));
    assert!(count("refused by the guard") >= at_least);
    if mounts {
        let key = "wiped a tree holding a mount of the home or its parent";
        assert!(count(key) >= at_least / 4, "only {} cases of {key}", count(key));
        assert!(count("wiped, another mount left") >= at_least / 4);
    }
}

#[test]
fn a_bind_mount_of_a_directory_of_the_same_filesystem_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    on_a_private_thread(|private| {
        if !private.mounts {
            eprintln!("skipped: no private mount namespace: {}", private.why_not);
            return;
        }
        let t = tmp.path();
        std::fs::create_dir_all(t.join("tree/m")).unwrap();
        std::fs::create_dir_all(t.join("tree/plain")).unwrap();
        std::fs::create_dir(t.join("elsewhere")).unwrap();
        std::fs::write(t.join("elsewhere/kept"), b"x").unwrap();
        let parent = super::super::open_dir_at(None, t.as_os_str().as_bytes()).unwrap();
        if crate::sys::os::mount_id(parent.as_raw_fd()).is_none() {
            eprintln!("skipped: this kernel gives no mount id");
            return;
        }
        props::bind_mount(&t.join("elsewhere"), &t.join("tree/m")).unwrap();
        // Same device as the tree: by `st_dev` it was entered and emptied.
        let (_, rel, e) = remove_all_from(
            &parent,
            b"tree",
            Bounds {
                homes: Homes::default(),
                root: None,
            },
        )
        .unwrap_err();
        assert_eq!(
            (rel.as_slice(), e.to_string().as_str()),
            (&b"tree/m"[..], OTHER_FILESYSTEM)
        );
        assert!(t.join("elsewhere/kept").exists());
        assert!(!t.join("tree/plain").exists());
        let dst = CString::new(t.join("tree/m").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) };
    });
}
