//! Peak memory of `-install` with a 200 MiB (decompressed) CLI.
//!
//! Each scenario runs in a fresh child process (this binary re-executed
//! with `REMORA_BENCH_INSTALL_CHILD` set), which calls
//! `remora::install::install` and then reports its own `VmHWM` from
//! `/proc/self/status`. The baseline is the already-present fast path;
//! the figure of interest is each scenario's peak minus that baseline.
//! Prints figures only; nothing is asserted.
//!
//! `cargo bench -p remora --bench install` (set `REMORA_BENCH_MIB` to
//! change the size).

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

use remora::install::{install, InstallOptions};
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CHILD_ENV: &str = "REMORA_BENCH_INSTALL_CHILD";

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
        return;
    }
    if let Err(e) = parent() {
        eprintln!("bench failed: {e}");
        std::process::exit(1);
    }
}

/// The child: install as told, then print `<VmHWM kB>\t<facts line>`.
fn child(spec: &str) {
    let f: Vec<&str> = spec.split('\n').collect();
    let get = |i: usize| f.get(i).copied().unwrap_or_default().to_string();
    let options = InstallOptions {
        cli_dir: get(0),
        cli_version: get(1),
        cli_zst: get(2),
        cli_url: get(3),
        cli_checksum: get(4),
        cli_keep: 3,
        ..InstallOptions::default()
    };
    let facts = install(&options);
    println!("{}\t{}", vm_hwm_kib().unwrap_or(0), facts.line());
}

fn vm_hwm_kib() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes a zstd blob of a runnable `#!/bin/sh` CLI padded to `mib` MiB of
/// varied text (compresses roughly like a binary, ~3:1), streaming.
fn make_blob(path: &Path, mib: usize) -> io::Result<()> {
    let out = BufWriter::new(File::create(path)?);
    let mut enc = zstd::stream::write::Encoder::new(out, 3)?;
    enc.write_all(b"#!/bin/sh\necho \"bench-cli 9.9.9\"\nexit 0\n")?;
    let total = mib * 1024 * 1024;
    let mut written = 0usize;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut line = String::with_capacity(128);
    while written < total {
        line.clear();
        // xorshift64: cheap varied bytes so the blob is not trivially tiny.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        line.push_str(&format!("# {written:012} {x:016x} {:08x} padding padding\n", x >> 40));
        enc.write_all(line.as_bytes())?;
        written += line.len();
    }
    enc.finish()?.flush()
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Serves `blob` on every request (streamed from disk); returns the URL.
fn serve(blob: PathBuf) -> io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/cli.zst", listener.local_addr()?);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut req = [0u8; 4096];
            let _ = stream.read(&mut req);
            let Ok(mut f) = File::open(&blob) else { continue };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
            let _ = stream
                .write_all(head.as_bytes())
                .and_then(|_| io::copy(&mut f, &mut stream).map(|_| ()));
        }
    });
    Ok(url)
}

struct Run {
    hwm_kib: u64,
    secs: f64,
    facts: String,
}

fn run_child(spec: &str) -> io::Result<Run> {
    let start = Instant::now();
    let out = Command::new(std::env::current_exe()?).env(CHILD_ENV, spec).output()?;
    let secs = start.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (hwm, facts) = text.trim_end().split_once('\t').unwrap_or(("0", text.trim_end()));
    Ok(Run {
        hwm_kib: hwm.parse().unwrap_or(0),
        secs,
        facts: facts.to_string(),
    })
}

fn parent() -> io::Result<()> {
    let mib: usize = std::env::var("REMORA_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let tmp = tempfile::tempdir()?;
    let blob = tmp.path().join("cli.zst");
    let t = Instant::now();
    make_blob(&blob, mib)?;
    let blob_len = fs::metadata(&blob)?.len();
    let sum = sha256_file(&blob)?;
    println!(
        "blob: {mib} MiB decompressed, {:.1} MiB compressed (made in {:.1}s)",
        blob_len as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );

    // Baseline: the fast path on a tiny present CLI.
    let present = tmp.path().join("present");
    fs::create_dir_all(&present)?;
    fs::write(present.join("1.0"), "#!/bin/sh\nexit 0\n")?;
    fs::set_permissions(present.join("1.0"), fs::Permissions::from_mode(0o755))?;
    let d = |p: &Path| p.to_string_lossy().into_owned();
    let base = run_child(&format!("{}\n1.0\n\n\n", d(&present)))?;

    let url = serve(blob.clone())?;
    let mut rows = vec![("present (baseline)", base.hwm_kib, base.secs, base.facts.clone())];
    for (name, via_zst, checksum) in [
        ("-cli-zst, no checksum", true, false),
        ("-cli-zst + checksum", true, true),
        ("-cli-url + checksum", false, true),
    ] {
        let dir = tmp.path().join(name.replace([' ', ',', '+'], "_"));
        let upload = tmp.path().join("upload.zst");
        let _ = fs::remove_file(&upload);
        // A hard link: consuming the upload must not eat the master copy.
        fs::hard_link(&blob, &upload)?;
        let spec = format!(
            "{}\n9.9.9\n{}\n{}\n{}",
            d(&dir),
            if via_zst { d(&upload) } else { String::new() },
            if via_zst { String::new() } else { url.clone() },
            if checksum { sum.as_str() } else { "" },
        );
        let r = run_child(&spec)?;
        rows.push((name, r.hwm_kib, r.secs, r.facts));
        let _ = fs::remove_dir_all(&dir);
    }

    println!("{:<24} {:>10} {:>12} {:>8}", "scenario", "VmHWM", "over base", "time");
    for (name, hwm, secs, facts) in &rows {
        println!(
            "{name:<24} {:>7.1} MiB {:>8.1} MiB {secs:>7.2}s",
            *hwm as f64 / 1024.0,
            (*hwm as f64 - base.hwm_kib as f64) / 1024.0
        );
        if facts.contains("cliError") {
            println!("  !! {facts}");
        }
    }
    Ok(())
}
