//! Start-up latency of `remora -serve`: from spawning the launcher to its
//! readiness banner (printed only once the detached daemon's socket is
//! accepting), median over 20 runs. Prints figures; asserts nothing about
//! time.
//!
//! Run: `cargo bench -p remora --bench startup`

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 20;

fn main() {
    let bin = env!("CARGO_BIN_EXE_remora");
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("rpc.sock");
        let token = dir.path().join("token");
        std::fs::write(&token, "bench-token\n").expect("token");
        let started = Instant::now();
        let mut launcher = Command::new(bin)
            .args([
                "-serve",
                "-socket",
                socket.to_str().unwrap(),
                "-token-file",
                token.to_str().unwrap(),
            ])
            // Keep the login-shell probe cheap and identical across runs.
            .env("SHELL", "/bin/sh")
            .env("REMORA_LOG_LEVEL", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn remora");
        let mut banner = String::new();
        BufReader::new(launcher.stdout.take().unwrap())
            .read_line(&mut banner)
            .expect("banner");
        let elapsed = started.elapsed();
        assert!(banner.starts_with("Remora remote server listening on "), "{banner:?}");
        // The socket really accepts: stop the daemon through it.
        let mut conn = UnixStream::connect(&socket).expect("connect");
        conn.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.shutdown\",\"auth\":\"bench-token\"}\n")
            .expect("shutdown");
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = conn.read_to_end(&mut Vec::new());
        let _ = launcher.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        samples.push(elapsed);
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "startup (launch -> banner, socket accepting), {RUNS} runs: median {:.2} ms, min {:.2} ms, max {:.2} ms",
        ms(samples[RUNS / 2]),
        ms(samples[0]),
        ms(samples[RUNS - 1])
    );
}
