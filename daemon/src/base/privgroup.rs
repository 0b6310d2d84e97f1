//! Whether a group is the user's own private group: the one rule by which
//! the trust walks ([`crate::base::trustpath`] for the agent socket, the
//! `-cli-dir` and `destDir`'s way; [`crate::base::safedir`] for the replay
//! and run directories) let a group-writable directory count as the
//! user's.
//!
//! Group write by the user's primary group used to count as private
//! whatever the group was. On a host where users share a primary group
//! (`users`, macOS's `staff`) every other member could then re-point the
//! agent socket or the `-cli-dir` (audit F6). Now the group must be the
//! user's alone (the user-private-group convention, where a `0775`
//! project directory is common):
//!
//! - it is the effective group (the callers check that first);
//! - the user belongs to it: as the passwd entry's primary group, or as a
//!   listed member;
//! - its member list names nobody but the user;
//! - no other account has it as its primary group (every passwd entry is
//!   read, `getpwent`).
//!
//! Any lookup that fails, or an account list longer than
//! [`MAX_ACCOUNTS`], is "cannot tell", and the group counts as shared.
//! Not covered: accounts a directory service does not enumerate (sssd
//! with `enumerate = false`); an operator who relies on such a service and
//! on group-writable directories should not share primary groups.

use std::sync::Mutex;

/// Passwd entries read at most; a longer list cannot be judged in
/// reasonable time, and counts as "cannot tell".
const MAX_ACCOUNTS: usize = 100_000;

/// Whether `gid` is the private group of the user `uid` (see the module
/// comment). `false` whenever it cannot be told.
pub(crate) fn is_private(gid: u32, uid: u32) -> bool {
    let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) else {
        return false;
    };
    let Ok(Some(group)) = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) else {
        return false;
    };
    let Some(primaries) = primary_groups() else {
        return false;
    };
    sole_member(
        gid,
        &Account {
            uid,
            name: &user.name,
            gid: user.gid.as_raw(),
        },
        &group.mem,
        &primaries,
    )
}

/// One passwd entry, as the rule needs it.
struct Account<'a> {
    uid: u32,
    name: &'a str,
    gid: u32,
}

/// The rule itself, over what the lookups found: `members` is the
/// group's member list, `primaries` every account's `(uid, primary gid)`.
fn sole_member(gid: u32, user: &Account<'_>, members: &[String], primaries: &[(u32, u32)]) -> bool {
    let listed = members.iter().any(|m| m == user.name);
    if user.gid != gid && !listed {
        return false;
    }
    if members.iter().any(|m| m != user.name) {
        return false;
    }
    !primaries
        .iter()
        .any(|&(uid, primary)| primary == gid && uid != user.uid)
}

/// Every passwd entry's uid and primary gid; `None` when the list could
/// not be read whole.
fn primary_groups() -> Option<Vec<(u32, u32)>> {
    // `getpwent` keeps one cursor per process: one reader at a time (no
    // other code in the daemon walks the list).
    static CURSOR: Mutex<()> = Mutex::new(());
    let _held = CURSOR.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut out = Vec::new();
    // SAFETY: the cursor functions take no arguments; the lock above keeps
    // this the only user of the process's cursor.
    unsafe { libc::setpwent() };
    let result = loop {
        if out.len() >= MAX_ACCOUNTS {
            break None;
        }
        crate::sys::os::clear_errno();
        // SAFETY: as above; the entry is read before the next call.
        let entry = unsafe { libc::getpwent() };
        if entry.is_null() {
            // The end of the list, or a failure: only these errno values
            // are failures (the end may leave ENOENT or nothing).
            let errno = std::io::Error::last_os_error().raw_os_error();
            let failed = matches!(
                errno,
                Some(libc::EIO) | Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOMEM) | Some(libc::ERANGE)
            );
            break (!failed).then_some(());
        }
        // SAFETY: a non-null entry from getpwent points to a valid passwd.
        let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
        out.push((uid, gid));
    };
    // SAFETY: closes the cursor opened above.
    unsafe { libc::endpwent() };
    result.map(|()| out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Account<'static> {
        Account {
            uid: 1000,
            name: "me",
            gid: 1000,
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_group_only_the_user_has_is_private() {
        let accounts = [(0, 0), (1000, 1000), (1001, 1001)];
        assert!(sole_member(1000, &me(), &[], &accounts));
        assert!(sole_member(1000, &me(), &names(&["me"]), &accounts));
        // A supplementary group listing only the user.
        assert!(sole_member(1002, &me(), &names(&["me"]), &accounts));
    }

    #[test]
    fn a_group_shared_by_primary_gid_or_by_membership_is_not() {
        // `users`: another account's primary group too.
        let shared = [(1000, 100), (1001, 100)];
        let user = Account { gid: 100, ..me() };
        assert!(!sole_member(100, &user, &[], &shared));
        // Listed members beside the user.
        assert!(!sole_member(1000, &me(), &names(&["me", "other"]), &[(1000, 1000)]));
        assert!(!sole_member(1000, &me(), &names(&["other"]), &[(1000, 1000)]));
        // A group the user is not in at all (the effective gid came from
        // elsewhere): nothing says it is the user's.
        assert!(!sole_member(1002, &me(), &[], &[(1000, 1000)]));
    }

    #[test]
    fn the_lookups_answer_for_real_accounts() {
        // Read-only: whatever this host's accounts are, the answer must
        // agree with the rule over the same lookups, and never panic.
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let got = is_private(gid, uid);
        let primaries = primary_groups().expect("the account list reads");
        assert!(primaries.iter().any(|&(u, _)| u == uid) || !got);
        assert!(!is_private(u32::MAX - 7, uid), "a group that does not exist");
    }
}
