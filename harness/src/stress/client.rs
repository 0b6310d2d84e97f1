//! `harness stress-client` (hidden): the real processes scenarios start
//! and SIGKILL, plus the deterministic writer children run.
//!
//! - `pattern`: writes `--bytes` of the seeded pattern to stdout, then
//!   stays alive `--linger-ms` (a child that writes, then idles).
//! - `stream`: spawns a `pattern` child through the daemon, prints `ready`
//!   once its first frame arrived, then reads slowly until killed.
//! - `request`: spawns a child that ignores SIGTERM, sends a
//!   `process.killAndWait` with a ten-minute grace and half of another
//!   request line, prints `ready` and waits to be killed mid-request.
//! - `flood`: connects without ever sending a byte, `--pace-us` apart,
//!   holding at most `--hold` connections (the oldest dropped), prints
//!   `ready` after its first connection and floods until killed: the
//!   same-uid process of scenario `fresh-clients-under-flood`.
//! - `burst`: prints `ready`, then opens `--count` connections as fast as
//!   the kernel takes them and never speaks; prints `held <n> <µs>` (how
//!   many connects succeeded, and how long they all took) and holds them
//!   until its stdin closes: the process of scenario
//!   `client-after-a-burst`.

use super::wire::{self, Client};
use super::Error;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// Arguments of one client process.
pub struct Args<'a> {
    pub mode: &'a str,
    pub socket: Option<&'a Path>,
    pub id: &'a str,
    pub seed: u64,
    pub bytes: u64,
    pub linger_ms: u64,
    /// The `env` object for spawned children (JSON).
    pub env: &'a str,
    /// `flood`: connections held at once.
    pub hold: u64,
    /// `flood`: the pause between two connects, in microseconds.
    pub pace_us: u64,
    /// `burst`: connections opened at once.
    pub count: u64,
}

/// Runs a client mode; returns the exit code.
pub fn main(a: &Args) -> i32 {
    match run(a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("stress-client {}: {e}", a.mode);
            1
        }
    }
}

fn ready() {
    let mut o = std::io::stdout();
    let _ = o.write_all(b"ready\n");
    let _ = o.flush();
}

fn run(a: &Args) -> Result<(), Error> {
    if a.mode == "pattern" {
        let mut o = std::io::stdout().lock();
        wire::pattern(a.seed, a.bytes, |b| o.write_all(b).is_ok());
        let _ = o.flush();
        drop(o);
        std::thread::sleep(Duration::from_millis(a.linger_ms));
        return Ok(());
    }
    let socket = a.socket.ok_or(Error::NoSocket)?;
    if a.mode == "flood" {
        return flood(socket, a.hold.max(1) as usize, Duration::from_micros(a.pace_us));
    }
    if a.mode == "burst" {
        return burst(socket, a.count as usize);
    }
    let mut c = Client::connect(socket)?;
    c.set_timeout(Duration::from_secs(600));
    let me = std::env::current_exe()?;
    match a.mode {
        "stream" => {
            let p = wire::pattern_spawn_params(a.id, &me.to_string_lossy(), a.seed, a.bytes, a.linger_ms, a.env);
            c.call("1", "process.spawn", &p)?;
            c.wait_frames(a.id, 1)?;
            ready();
            loop {
                c.next()?;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        "request" => {
            let p = wire::spawn_params(a.id, "sh", &["-c", "trap '' TERM; echo up; exec sleep 1000"], a.env);
            c.call("1", "process.spawn", &p)?;
            c.wait_output(a.id, b"up")?;
            let kw = format!("{{\"id\":{},\"timeoutMs\":600000}}", wire::js(a.id));
            c.send("2", "process.killAndWait", &kw)?;
            c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server.pi")?;
            ready();
            loop {
                c.next()?;
            }
        }
        m => Err(Error::UnknownMode(m.to_string())),
    }
}

/// The `flood` mode: connect, hold, never speak, pause `pace`, until
/// killed.
fn flood(socket: &Path, hold: usize, pace: Duration) -> Result<(), Error> {
    let mut held = std::collections::VecDeque::with_capacity(hold);
    let mut announced = false;
    loop {
        match std::os::unix::net::UnixStream::connect(socket) {
            Ok(s) => {
                held.push_back(s);
                if held.len() > hold {
                    held.pop_front();
                }
                if !announced {
                    ready();
                    announced = true;
                }
            }
            // Out of descriptors or refused: let go of the oldest.
            Err(_) => {
                held.pop_front();
            }
        }
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
    }
}

/// The `burst` mode: `ready` first (the scenario's clock starts at it),
/// then `count` connects back to back, silent; `held <n> <µs>`; then hold
/// until stdin closes.
fn burst(socket: &Path, count: usize) -> Result<(), Error> {
    ready();
    let t = std::time::Instant::now();
    let held: Vec<std::os::unix::net::UnixStream> = (0..count)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(socket).ok())
        .collect();
    let took = t.elapsed().as_micros();
    let mut o = std::io::stdout();
    let _ = writeln!(o, "held {} {took}", held.len());
    let _ = o.flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(held);
    Ok(())
}
