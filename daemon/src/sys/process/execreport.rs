//! The exec report: how a freshly forked child tells its starter whether
//! its `execve` worked. One rule for both starters, the exec-child
//! trampoline (`agent/trampoline.rs`) and the spawner helper
//! (`spawner.rs`, Linux).
//!
//! The starter makes a close-on-exec pipe and keeps the read end. The
//! child keeps the write end; on success the exec closes it and the
//! starter reads end-of-file; on failure the child writes its errno as 4
//! little-endian bytes and exits. A report still pending after
//! [`EXEC_REPORT_WAIT_MS`] (a program on a stalled file system) counts as
//! started: the supervisor then sees whatever the child does.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// How long a starter waits for the verdict of an exec.
const EXEC_REPORT_WAIT_MS: i32 = 2000;

/// The report pipe, `(read, write)`, both close-on-exec: the child's copy
/// of `write` is made inheritable, if at all, only in the child.
pub(crate) fn exec_report_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::sys::os::pipe_cloexec()
}

/// The child's side: writes `errno` as the report. Async-signal-safe
/// (one `write`), so it may run between `fork` and `exec`.
pub(crate) fn write_exec_report(fd: RawFd, errno: i32) {
    let bytes = errno.to_le_bytes();
    // SAFETY: writes 4 bytes from a live buffer; a bad descriptor fails harmlessly.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// The starter's side: `Some(errno)` when the exec failed, `None` when the
/// program runs (the pipe closed empty, or short) or the wait ran out.
/// An interrupted wait or read is retried.
pub(crate) fn read_exec_report(read: &OwnedFd) -> Option<i32> {
    let mut pfd = libc::pollfd {
        fd: read.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll on one live descriptor.
        match unsafe { libc::poll(&mut pfd, 1, EXEC_REPORT_WAIT_MS) } {
            n if n > 0 => break,
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => return None,
        }
    }
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of a live buffer.
        let n = unsafe { libc::read(read.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    (got == buf.len()).then(|| i32::from_le_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_errno_is_read_back() {
        let (read, write) = exec_report_pipe().unwrap();
        write_exec_report(write.as_raw_fd(), libc::ENOENT);
        drop(write);
        assert_eq!(read_exec_report(&read), Some(libc::ENOENT));
    }

    #[test]
    fn a_pipe_closed_empty_means_the_program_runs() {
        let (read, write) = exec_report_pipe().unwrap();
        drop(write);
        assert_eq!(read_exec_report(&read), None);
    }

    #[test]
    fn a_short_report_is_not_an_errno() {
        let (read, write) = exec_report_pipe().unwrap();
        // SAFETY: writes 2 bytes from a live buffer to our own pipe.
        unsafe { libc::write(write.as_raw_fd(), [1u8, 0].as_ptr().cast(), 2) };
        drop(write);
        assert_eq!(read_exec_report(&read), None);
    }
}
