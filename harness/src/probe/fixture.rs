//! Fixtures (files, directories, links, fifos, git repositories, tar
//! archives) and the snapshot of the fixture tree taken after a probe.

use crate::probe::{Ctx, Fixture, TarEntry, TarFormat, TarKind};
use crate::transcript::normalize::Normalizer;
use crate::transcript::Transcript;
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// A fixture that could not be built.
#[derive(Debug)]
pub enum Error {
    /// A file-system operation (`mkdir`, `write`, `chmod`, …) on a path.
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    NulInPath,
    /// `git` or `sh` could not run.
    Command {
        what: &'static str,
        source: std::io::Error,
    },
    /// `git` or `sh` ran and failed.
    Failed {
        what: &'static str,
        status: ExitStatus,
        stderr: String,
    },
    Tar(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::NulInPath => f.write_str("fifo path contains NUL"),
            Error::Command { what, source } => write!(f, "{what}: {source}"),
            Error::Failed { what, status, stderr } => write!(f, "{what} fixture failed ({status}): {stderr}"),
            Error::Tar(e) => write!(f, "tar: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Fixed identity and dates so git object ids are stable.
pub const GIT_DATE: &str = "2024-01-01T00:00:00+0000";

fn resolve(root: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

fn ensure_parent(p: &Path) -> std::io::Result<()> {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    Ok(())
}

/// Builds one fixture step. Paths are relative to the fixture root.
pub fn build(step: &Fixture, ctx: &Ctx, root: &Path, run: &Path) -> Result<(), Error> {
    let io = |op: &'static str, p: &Path, source: std::io::Error| Error::Io {
        op,
        path: p.to_path_buf(),
        source,
    };
    match step {
        Fixture::File { path, mode, content } => {
            let p = resolve(root, &path.expand_str(ctx));
            ensure_parent(&p).map_err(|e| io("mkdir", &p, e))?;
            std::fs::write(&p, content.expand(ctx)).map_err(|e| io("write", &p, e))?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).map_err(|e| io("chmod", &p, e))
        }
        Fixture::Dir { path, mode } => {
            let p = resolve(root, &path.expand_str(ctx));
            std::fs::create_dir_all(&p).map_err(|e| io("mkdir", &p, e))?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).map_err(|e| io("chmod", &p, e))
        }
        Fixture::Symlink { path, target } => {
            let p = resolve(root, &path.expand_str(ctx));
            ensure_parent(&p).map_err(|e| io("mkdir", &p, e))?;
            std::os::unix::fs::symlink(target.expand_str(ctx), &p).map_err(|e| io("symlink", &p, e))
        }
        Fixture::Hardlink { path, target } => {
            let p = resolve(root, &path.expand_str(ctx));
            ensure_parent(&p).map_err(|e| io("mkdir", &p, e))?;
            std::fs::hard_link(resolve(root, &target.expand_str(ctx)), &p).map_err(|e| io("link", &p, e))
        }
        Fixture::Fifo { path } => {
            let p = resolve(root, &path.expand_str(ctx));
            ensure_parent(&p).map_err(|e| io("mkdir", &p, e))?;
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| Error::NulInPath)?;
            // SAFETY: `c` is a valid NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
                return Err(io("mkfifo", &p, std::io::Error::last_os_error()));
            }
            Ok(())
        }
        Fixture::Chmod { mode, path } => {
            let p = resolve(root, &path.expand_str(ctx));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).map_err(|e| io("chmod", &p, e))
        }
        Fixture::Git { args } => {
            let mut cmd = Command::new("git");
            cmd.args([
                "-c",
                "user.name=Probe Author",
                "-c",
                "user.email=probe@example.invalid",
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "advice.detachedHead=false",
            ]);
            cmd.args(args.iter().map(|a| a.expand_str(ctx)));
            run_fixture_cmd(cmd, root, run, "git")
        }
        Fixture::Sh { command } => {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(command.expand_str(ctx));
            run_fixture_cmd(cmd, root, run, "sh")
        }
        Fixture::Tar { path, format, entries } => {
            let p = resolve(root, &path.expand_str(ctx));
            ensure_parent(&p).map_err(|e| io("mkdir", &p, e))?;
            let bytes = build_tar(entries, *format, ctx).map_err(Error::Tar)?;
            std::fs::write(&p, bytes).map_err(|e| io("write", &p, e))
        }
    }
}

fn run_fixture_cmd(mut cmd: Command, root: &Path, run: &Path, what: &'static str) -> Result<(), Error> {
    cmd.current_dir(root)
        .env_clear()
        .envs(crate::dut::base_env(run))
        .env("GIT_AUTHOR_DATE", GIT_DATE)
        .env("GIT_COMMITTER_DATE", GIT_DATE)
        .env("GIT_AUTHOR_NAME", "Probe Author")
        .env("GIT_AUTHOR_EMAIL", "probe@example.invalid")
        .env("GIT_COMMITTER_NAME", "Probe Author")
        .env("GIT_COMMITTER_EMAIL", "probe@example.invalid")
        .env("ROOT", root)
        .stdin(Stdio::null());
    let out = cmd.output().map_err(|source| Error::Command { what, source })?;
    if !out.status.success() {
        return Err(Error::Failed {
            what,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Encodes a fixture archive. Names are written into the header verbatim
/// (no sanitising), so hostile archives can be described.
pub fn build_tar(entries: &[TarEntry], format: TarFormat, ctx: &Ctx) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_ustar();
        let name = e.name.expand(ctx);
        if name.len() > 100 {
            return Err(std::io::Error::other("tar entry name longer than 100 bytes"));
        }
        h.as_old_mut().name = [0; 100];
        h.as_old_mut().name[..name.len()].copy_from_slice(&name);
        h.set_mode(e.mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        let mut data = Vec::new();
        let set_link = |h: &mut tar::Header, t: &[u8]| -> std::io::Result<()> {
            if t.len() > 100 {
                return Err(std::io::Error::other("link target longer than 100 bytes"));
            }
            h.as_old_mut().linkname = [0; 100];
            h.as_old_mut().linkname[..t.len()].copy_from_slice(t);
            Ok(())
        };
        match &e.kind {
            TarKind::File(c) => {
                data = c.expand(ctx);
                h.set_entry_type(tar::EntryType::Regular);
            }
            TarKind::Dir => h.set_entry_type(tar::EntryType::Directory),
            TarKind::Symlink(t) => {
                h.set_entry_type(tar::EntryType::Symlink);
                set_link(&mut h, &t.expand(ctx))?;
            }
            TarKind::Hardlink(t) => {
                h.set_entry_type(tar::EntryType::Link);
                set_link(&mut h, &t.expand(ctx))?;
            }
            TarKind::CharDev(ma, mi) => {
                h.set_entry_type(tar::EntryType::Char);
                h.set_device_major(*ma)?;
                h.set_device_minor(*mi)?;
            }
            TarKind::BlockDev(ma, mi) => {
                h.set_entry_type(tar::EntryType::Block);
                h.set_device_major(*ma)?;
                h.set_device_minor(*mi)?;
            }
            TarKind::Fifo => h.set_entry_type(tar::EntryType::Fifo),
        }
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, data.as_slice())?;
    }
    let tar_bytes = b.into_inner()?;
    let gz = || -> std::io::Result<Vec<u8>> {
        let mut enc = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::default());
        enc.write_all(&tar_bytes)?;
        enc.finish()
    };
    Ok(match format {
        TarFormat::Gzip => gz()?,
        TarFormat::Plain => tar_bytes,
        TarFormat::Truncated => {
            let g = gz()?;
            g[..g.len() / 2].to_vec()
        }
        TarFormat::Garbage => b"this is not a gzip stream\n".to_vec(),
    })
}

fn sha_hex(b: &[u8]) -> String {
    let d = Sha256::digest(b);
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Describes one file's contents: inline when short text, else size+hash.
pub fn describe_content(b: &[u8]) -> String {
    if b.len() <= 96 && std::str::from_utf8(b).is_ok() {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        format!("sha256:{}", sha_hex(b))
    }
}

/// Appends one entry per path under `root` (sorted) to `t`, keyed
/// `<prefix>fs <relative path>`.
pub fn snapshot(root: &Path, norm: &Normalizer, prefix: &str, t: &mut Transcript) {
    let mut items = Vec::new();
    walk(root, root, false, norm, &mut items);
    if items.is_empty() {
        t.push(format!("{prefix}fs"), "empty".to_string());
    }
    for (rel, desc) in items {
        let rel = String::from_utf8_lossy(&norm.paths_only(rel.as_bytes())).into_owned();
        t.push(format!("{prefix}fs {rel}"), norm.paths_only(desc.as_bytes()));
    }
}

fn walk(root: &Path, dir: &Path, in_git: bool, norm: &Normalizer, out: &mut Vec<(String, String)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let p = dir.join(&name);
        let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let ft = md.file_type();
        let perm = format!("{:04o}", md.mode() & 0o7777);
        let git_here = in_git || name == ".git";
        if in_git {
            let n = name.to_string_lossy();
            if n == "objects" || n == "logs" || n == "index" || n.ends_with(".lock") {
                continue;
            }
        }
        use std::os::unix::fs::FileTypeExt;
        let desc = if ft.is_symlink() {
            let target = std::fs::read_link(&p)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("symlink -> {target}")
        } else if ft.is_dir() {
            format!("dir {perm}")
        } else if ft.is_file() {
            if in_git && name != ".git" {
                format!("file {perm}")
            } else {
                let data = norm.paths_only(&std::fs::read(&p).unwrap_or_default());
                // Hash contents after path normalisation so absolute paths
                // written by git (worktree `gitdir:` files) compare equal.
                format!("file {perm} {} {}", data.len(), describe_content(&data))
            }
        } else if ft.is_fifo() {
            format!("fifo {perm}")
        } else if ft.is_socket() {
            format!("socket {perm}")
        } else if ft.is_char_device() {
            format!("chardev {perm}")
        } else if ft.is_block_device() {
            format!("blockdev {perm}")
        } else {
            "unknown".to_string()
        };
        out.push((rel, desc));
        if ft.is_dir() {
            walk(root, &p, git_here, norm, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Template;

    #[test]
    fn hostile_tar_names_are_verbatim() {
        let entries = vec![
            TarEntry {
                name: Template::lit("../evil"),
                mode: 0o755,
                kind: TarKind::File(Template::lit("x")),
            },
            TarEntry {
                name: Template::lit("/abs"),
                mode: 0o644,
                kind: TarKind::Symlink(Template::lit("/etc/passwd")),
            },
        ];
        let bytes = build_tar(&entries, TarFormat::Plain, &Ctx::default()).unwrap();
        let mut a = tar::Archive::new(bytes.as_slice());
        let names: Vec<Vec<u8>> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path_bytes().into_owned())
            .collect();
        assert_eq!(names, vec![b"../evil".to_vec(), b"/abs".to_vec()]);
        let gz = build_tar(&entries, TarFormat::Gzip, &Ctx::default()).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        let again = build_tar(&entries, TarFormat::Gzip, &Ctx::default()).unwrap();
        assert_eq!(gz, again, "archives are deterministic");
    }

    #[test]
    fn snapshot_lists_types_modes_and_hashes() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::write(root.join("a.txt"), "hi\n").unwrap();
        std::fs::set_permissions(root.join("a.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("a.txt", root.join("sub/l")).unwrap();
        std::fs::write(root.join("sub/p"), format!("gitdir: {}/x", root.display())).unwrap();
        let norm = Normalizer::new(&[(root.to_string_lossy().into_owned(), "$ROOT".into())], &[]);
        let mut t = Transcript::default();
        snapshot(root, &norm, "", &mut t);
        let got: Vec<String> = t
            .entries
            .iter()
            .map(|e| format!("{} = {}", e.key, String::from_utf8_lossy(&e.value)))
            .collect();
        assert_eq!(got[0], "fs a.txt = file 0600 3 \"hi\\n\"");
        assert!(got[1].starts_with("fs sub = dir "), "{got:?}");
        assert_eq!(got[2], "fs sub/l = symlink -> a.txt");
        assert!(got[3].contains("gitdir: $ROOT/x"), "{got:?}");
    }
}
