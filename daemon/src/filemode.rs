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

/// Converts a Unix `st_mode` to Go's `FileMode` bits.
pub fn go_mode(st_mode: u32) -> u32 {
    let mut mode = st_mode & 0o777;
    match st_mode & libc::S_IFMT {
        libc::S_IFBLK => mode |= MODE_DEVICE,
        libc::S_IFCHR => mode |= MODE_DEVICE | MODE_CHAR_DEVICE,
        libc::S_IFDIR => mode |= MODE_DIR,
        libc::S_IFIFO => mode |= MODE_NAMED_PIPE,
        libc::S_IFLNK => mode |= MODE_SYMLINK,
        libc::S_IFSOCK => mode |= MODE_SOCKET,
        _ => {}
    }
    if st_mode & libc::S_ISGID != 0 {
        mode |= MODE_SETGID;
    }
    if st_mode & libc::S_ISUID != 0 {
        mode |= MODE_SETUID;
    }
    if st_mode & libc::S_ISVTX != 0 {
        mode |= MODE_STICKY;
    }
    mode
}

/// Go's `FileMode.String()` of Go mode bits.
pub fn go_mode_string(mode: u32) -> String {
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
pub fn mode_string(st_mode: u32) -> String {
    go_mode_string(go_mode(st_mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_match_go() {
        assert_eq!(mode_string(libc::S_IFREG | 0o644), "-rw-r--r--");
        assert_eq!(mode_string(libc::S_IFREG), "----------");
        assert_eq!(mode_string(libc::S_IFDIR | 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(libc::S_IFLNK | 0o777), "Lrwxrwxrwx");
        assert_eq!(mode_string(libc::S_IFSOCK | 0o600), "Srw-------");
        assert_eq!(mode_string(libc::S_IFCHR | 0o666), "Dcrw-rw-rw-");
        assert_eq!(mode_string(libc::S_IFBLK | 0o660), "Drw-rw----");
        assert_eq!(mode_string(libc::S_IFIFO | 0o644), "prw-r--r--");
        assert_eq!(mode_string(libc::S_IFDIR | libc::S_ISVTX | 0o777), "dtrwxrwxrwx");
        assert_eq!(mode_string(libc::S_IFREG | libc::S_ISUID | 0o755), "urwxr-xr-x");
        assert_eq!(mode_string(libc::S_IFREG | libc::S_ISGID | 0o755), "grwxr-xr-x");
        assert_eq!(
            mode_string(libc::S_IFDIR | libc::S_ISUID | libc::S_ISGID | libc::S_ISVTX | 0o700),
            "dugtrwx------"
        );
        // Every Go letter in order, for the raw formatter.
        assert_eq!(go_mode_string(0xfff8_0000 | 0o777), "dalTLDpSugct?rwxrwxrwx");
    }
}
