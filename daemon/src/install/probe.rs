//! Host probes: "does this CLI run?" and "which libc does this host use?".

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How many times a spawn failing with ETXTBSY is retried. The error is
/// transient: another thread of this process forked while the file was
/// still open for writing, and the fork holds the descriptor until it execs.
const TXTBSY_RETRIES: u32 = 50;

/// Whether `<cli> --version` exits 0 within `timeout`, run with stdin,
/// stdout and stderr on /dev/null. The CLI runs in its own process group so
/// a timeout kills whatever it started, too.
pub fn runnable(cli: &Path, timeout: Duration) -> bool {
    let mut child = None;
    for _ in 0..=TXTBSY_RETRIES {
        let spawned = Command::new(cli)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        match spawned {
            Ok(c) => {
                child = Some(c);
                break;
            }
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => return false,
        }
    }
    let Some(mut child) = child else {
        return false;
    };

    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) => {}
            Err(_) => break,
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    // Timed out (or waiting failed): kill the whole group, then reap.
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// The host's C library, `"musl"` or `"glibc"`, detected at run time (the
/// binary itself may be static and tells nothing).
///
/// The program interpreter (`PT_INTERP`) of `/bin/sh` decides: a path
/// containing `ld-musl` is musl, anything else glibc. Looking at what the
/// system's own programs are linked against is sturdier than looking for a
/// musl loader file, which a glibc distro may ship as an extra package.
/// When `/bin/sh` tells nothing (static busybox, unreadable), the presence
/// of `/lib/ld-musl-*.so.1` decides; otherwise glibc.
pub fn detect_libc() -> &'static str {
    for program in ["/bin/sh", "/usr/bin/env"] {
        if let Ok(Some(interp)) = elf_interpreter(Path::new(program)) {
            return if interp.contains("ld-musl") { "musl" } else { "glibc" };
        }
    }
    if musl_loader_present() {
        "musl"
    } else {
        "glibc"
    }
}

/// Whether `/lib/ld-musl-*.so.1` exists.
fn musl_loader_present() -> bool {
    let Ok(entries) = std::fs::read_dir("/lib") else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("ld-musl-") && n.ends_with(".so.1"))
    })
}

/// The `PT_INTERP` string of the ELF file at `path`, `None` for a static
/// or non-ELF file.
pub fn elf_interpreter(path: &Path) -> io::Result<Option<String>> {
    const PT_INTERP: u32 = 3;
    let mut f = File::open(path)?;
    let mut ident = [0u8; 64];
    let n = read_full(&mut f, &mut ident)?;
    if n < 52 || &ident[..4] != b"\x7fELF" {
        return Ok(None);
    }
    let is64 = match ident[4] {
        1 => false,
        2 => true,
        _ => return Ok(None),
    };
    let le = match ident[5] {
        1 => true,
        2 => false,
        _ => return Ok(None),
    };
    let u16_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1]];
        u64::from(if le {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        })
    };
    let u32_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        u64::from(if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        })
    };
    let u64_at = |b: &[u8], o: usize| -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[o..o + 8]);
        if le {
            u64::from_le_bytes(v)
        } else {
            u64::from_be_bytes(v)
        }
    };
    if is64 && n < 64 {
        return Ok(None);
    }
    let (phoff, phentsize, phnum) = if is64 {
        (u64_at(&ident, 32), u16_at(&ident, 54), u16_at(&ident, 56))
    } else {
        (u32_at(&ident, 28), u16_at(&ident, 42), u16_at(&ident, 44))
    };
    let min_entry = if is64 { 56 } else { 32 };
    if phentsize < min_entry || phentsize > 256 || phnum > 4096 {
        return Ok(None);
    }
    let mut entry = vec![0u8; phentsize as usize];
    for i in 0..phnum {
        f.seek(SeekFrom::Start(phoff.saturating_add(i * phentsize)))?;
        if read_full(&mut f, &mut entry)? < entry.len() {
            return Ok(None);
        }
        if u32_at(&entry, 0) != u64::from(PT_INTERP) {
            continue;
        }
        let (offset, size) = if is64 {
            (u64_at(&entry, 8), u64_at(&entry, 32))
        } else {
            (u32_at(&entry, 4), u32_at(&entry, 16))
        };
        if size == 0 || size > 4096 {
            return Ok(None);
        }
        let mut interp = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(offset))?;
        let got = read_full(&mut f, &mut interp)?;
        interp.truncate(got);
        let end = interp.iter().position(|b| *b == 0).unwrap_or(interp.len());
        return Ok(Some(String::from_utf8_lossy(&interp[..end]).into_owned()));
    }
    Ok(None)
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full(f: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_has_an_answer() {
        let libc = detect_libc();
        assert!(libc == "glibc" || libc == "musl");
        // The test binary itself is dynamically linked against the host libc
        // (or static, in which case there is no interpreter).
        let own = elf_interpreter(&std::env::current_exe().unwrap()).unwrap();
        if let Some(interp) = own {
            assert!(interp.starts_with('/'), "{interp}");
        }
    }

    #[test]
    fn non_elf_has_no_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("script");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        assert_eq!(elf_interpreter(&p).unwrap(), None);
        std::fs::write(&p, b"\x7fELF\x02\x01\x01").unwrap();
        assert_eq!(elf_interpreter(&p).unwrap(), None);
    }

    #[test]
    fn timeout_kills_and_fails() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slow");
        std::fs::write(&p, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = Instant::now();
        assert!(!runnable(&p, Duration::from_millis(300)));
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
