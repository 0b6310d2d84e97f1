//! Go's `os.FileMode.String()` for a Unix `st_mode`.
//!
//! `files.stat` reports `mode` exactly as the Go daemon prints it: type
//! letters first, in Go's fixed order `dalTLDpSugct?`, then the nine
//! permission characters (`-` alone when no type letter applies). The
//! mapping from `st_mode` follows Go's `fillFileStatFromSys` on Linux:
//! a character device is `ModeDevice|ModeCharDevice` (`Dc`), a block device
//! `ModeDevice` (`D`), and the setuid/setgid/sticky bits become `u`/`g`/`t`.

// Go's FileMode bits (io/fs), highest first; the index into TYPE_LETTERS is
// the distance from bit 31.
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;
const MODE_DEVICE: u32 = 1 << 26;
const MODE_NAMED_PIPE: u32 = 1 << 25;
const MODE_SOCKET: u32 = 1 << 24;
const MODE_SETUID: u32 = 1 << 23;
const MODE_SETGID: u32 = 1 << 22;
const MODE_CHAR_DEVICE: u32 = 1 << 21;
const MODE_STICKY: u32 = 1 << 20;

const TYPE_LETTERS: &[u8; 13] = b"dalTLDpSugct?";

// The `st_mode` type and bit values, the same on Linux and macOS (libc's
// constants are `u32` on one and `u16` on the other; std's
// `MetadataExt::mode()` is `u32` on both).
const S_IFMT: u32 = 0o170000;
const S_IFBLK: u32 = 0o060000;
const S_IFCHR: u32 = 0o020000;
const S_IFDIR: u32 = 0o040000;
const S_IFIFO: u32 = 0o010000;
const S_IFLNK: u32 = 0o120000;
const S_IFSOCK: u32 = 0o140000;
const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_ISVTX: u32 = 0o1000;

/// Converts a Unix `st_mode` to Go's `FileMode` bits.
pub(crate) fn go_mode(st_mode: u32) -> u32 {
    let mut mode = st_mode & 0o777;
    match st_mode & S_IFMT {
        S_IFBLK => mode |= MODE_DEVICE,
        S_IFCHR => mode |= MODE_DEVICE | MODE_CHAR_DEVICE,
        S_IFDIR => mode |= MODE_DIR,
        S_IFIFO => mode |= MODE_NAMED_PIPE,
        S_IFLNK => mode |= MODE_SYMLINK,
        S_IFSOCK => mode |= MODE_SOCKET,
        _ => {}
    }
    if st_mode & S_ISGID != 0 {
        mode |= MODE_SETGID;
    }
    if st_mode & S_ISUID != 0 {
        mode |= MODE_SETUID;
    }
    if st_mode & S_ISVTX != 0 {
        mode |= MODE_STICKY;
    }
    mode
}

/// Go's `FileMode.String()` of Go mode bits.
pub(crate) fn go_mode_string(mode: u32) -> String {
    let mut out = String::with_capacity(12);
    for (i, &c) in TYPE_LETTERS.iter().enumerate() {
        if mode & (1 << (31 - i)) != 0 {
            out.push(char::from(c));
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        out.push(if mode & (1 << (8 - i)) != 0 { c } else { '-' });
    }
    out
}

/// `FileMode.String()` for a Unix `st_mode`.
pub(crate) fn mode_string(st_mode: u32) -> String {
    go_mode_string(go_mode(st_mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S_IFREG: u32 = 0o100000;

    #[test]
    fn strings_match_go() {
        assert_eq!(mode_string(S_IFREG | 0o644), "-rw-r--r--");
        assert_eq!(mode_string(S_IFREG), "----------");
        assert_eq!(mode_string(S_IFDIR | 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(S_IFLNK | 0o777), "Lrwxrwxrwx");
        assert_eq!(mode_string(S_IFSOCK | 0o600), "Srw-------");
        assert_eq!(mode_string(S_IFCHR | 0o666), "Dcrw-rw-rw-");
        assert_eq!(mode_string(S_IFBLK | 0o660), "Drw-rw----");
        assert_eq!(mode_string(S_IFIFO | 0o644), "prw-r--r--");
        assert_eq!(mode_string(S_IFDIR | S_ISVTX | 0o777), "dtrwxrwxrwx");
        assert_eq!(mode_string(S_IFREG | S_ISUID | 0o755), "urwxr-xr-x");
        assert_eq!(mode_string(S_IFREG | S_ISGID | 0o755), "grwxr-xr-x");
        assert_eq!(
            mode_string(S_IFDIR | S_ISUID | S_ISGID | S_ISVTX | 0o700),
            "dugtrwx------"
        );
        // Every Go letter in order, for the raw formatter.
        assert_eq!(go_mode_string(0xfff8_0000 | 0o777), "dalTLDpSugct?rwxrwxrwx");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn mode_bits_are_libcs() {
        let ours = [
            S_IFMT, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFSOCK, S_IFREG, S_ISUID, S_ISGID, S_ISVTX,
        ];
        let libc = [
            libc::S_IFMT,
            libc::S_IFBLK,
            libc::S_IFCHR,
            libc::S_IFDIR,
            libc::S_IFIFO,
            libc::S_IFLNK,
            libc::S_IFSOCK,
            libc::S_IFREG,
            libc::S_ISUID,
            libc::S_ISGID,
            libc::S_ISVTX,
        ];
        assert_eq!(ours, libc);
    }
}
