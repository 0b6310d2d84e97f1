//! Figures for files.list and files.extract_tar against a real release
//! daemon: wall time per call and the daemon's peak RSS (VmHWM). Prints
//! numbers only; nothing here asserts on timing.
//!
//! Run: `cargo bench -p remora --bench files`
//! (REMORA_BENCH_MIB / REMORA_BENCH_FILES size the archive; default 100/5000.)

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

#[path = "../tests/it/common/mod.rs"]
mod common;

use common::TestDaemon;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// The daemon's pid: the process whose command line holds our socket path.
fn daemon_pid(socket: &Path) -> Option<u32> {
    let needle = socket.to_str()?.as_bytes().to_vec();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = fs::read(entry.path().join("cmdline")) {
            if cmdline.split(|&b| b == 0).any(|arg| arg == needle.as_slice()) {
                return Some(pid);
            }
        }
    }
    None
}

/// A `/proc/<pid>/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Deterministic incompressible bytes (xorshift64*).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    // Spread small seeds over the whole state first (splitmix64 step).
    let mut x = (seed.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (seed >> 7)) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bench_list(d: &TestDaemon, pid: u32) {
    let dir = d.root().join("list10k");
    fs::create_dir(&dir).unwrap();
    for i in 0..10_000 {
        if i % 10 == 0 {
            fs::create_dir(dir.join(format!("dir-{i:05}"))).unwrap();
        } else {
            fs::write(dir.join(format!("file-{i:05}.txt")), b"").unwrap();
        }
    }
    let params = format!(r#"{{"path":"{}"}}"#, dir.display());
    let mut c = d.connect();
    let first = c.call(0, "files.list", &params);
    assert!(first.contains("file-09999.txt"), "unexpected reply");
    let mut times = Vec::new();
    for i in 1..=20 {
        let t = Instant::now();
        let reply = c.call(i, "files.list", &params);
        times.push(t.elapsed());
        assert!(reply.len() > 500_000);
    }
    times.sort();
    println!(
        "files.list 10,000 entries: median {:.1} ms, min {:.1} ms, max {:.1} ms (reply {} bytes); daemon VmHWM {} KiB",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        first.len(),
        status_kib(pid, "VmHWM:")
    );
}

fn bench_extract(d: &TestDaemon, pid: u32) {
    let mib: usize = std::env::var("REMORA_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let files: usize = std::env::var("REMORA_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let per_file = mib * 1024 * 1024 / files;
    let archive = d.root().join("big.tar.gz");
    let t = Instant::now();
    {
        let out = fs::File::create(&archive).unwrap();
        let gz = GzEncoder::new(std::io::BufWriter::new(out), Compression::fast());
        let mut b = tar::Builder::new(gz);
        for i in 0..files {
            let data = noise(i as u64 + 1, per_file);
            let mut h = tar::Header::new_ustar();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, format!("pkg/d{:02}/f{i:05}.bin", i % 50), data.as_slice())
                .unwrap();
        }
        b.into_inner().unwrap().finish().unwrap().flush().unwrap();
    }
    let size = fs::metadata(&archive).unwrap().len();
    println!(
        "built archive: {files} files x {per_file} B, {:.1} MiB gzip in {:.1} s",
        size as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let dest = d.root().join("dest");
    let params = format!(
        r#"{{"archivePath":"{}","destDir":"{}"}}"#,
        archive.display(),
        dest.display()
    );
    let before = status_kib(pid, "VmHWM:");
    let t = Instant::now();
    let reply = d.call("files.extract_tar", &params);
    let took = t.elapsed();
    assert_eq!(
        reply,
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"success":true,"fileCount":{files}}}}}"#)
    );
    println!(
        "files.extract_tar {:.1} MiB / {files} files: {:.0} ms ({:.0} MiB/s compressed); daemon VmHWM {} KiB before, {} KiB after",
        size as f64 / 1048576.0,
        ms(took),
        size as f64 / 1048576.0 / took.as_secs_f64(),
        before,
        status_kib(pid, "VmHWM:")
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: keep
    // the test run cheap.
    if !std::env::args().any(|a| a == "--bench") {
        println!("files bench: run with `cargo bench -p remora --bench files`");
        return;
    }
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket).expect("daemon pid");
    println!("daemon pid {pid}, VmHWM at start {} KiB", status_kib(pid, "VmHWM:"));
    bench_extract(&d, pid);
    bench_list(&d, pid);
}
