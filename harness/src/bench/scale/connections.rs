//! The connections axis of `harness bench --scale`: what N idle
//! authenticated connections cost the daemon (RSS per connection) and
//! whether one more connection's pings slow down beside them. A
//! connection counts once it has had one authenticated ping answered;
//! then it stays open and silent.

use super::super::error::Unmeasured;
use super::processes::ping_p99;
use super::{ScaleFigure, Side};
use crate::dut::client::{read_line, req};
use crate::dut::procfs::rss_kib;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Opens one connection and has one authenticated ping answered on it.
fn authenticated(d: &crate::dut::Daemon) -> Result<UnixStream, Unmeasured> {
    let mut s = d.conn()?;
    s.write_all(req(1, "server.ping", "{}").as_bytes())?;
    let mut r = BufReader::new(s.try_clone()?);
    let l = read_line(&mut r)?;
    super::super::replies::check_pong(&l)?;
    Ok(s)
}

/// One binary's curve over `ns` (ascending) connections, in a daemon of
/// its own, into `side`.
pub(super) fn curve(bin: &Path, ns: &[usize], side: &mut Side) -> Result<(), Unmeasured> {
    let d = super::super::setup::start(bin, &[])?;
    let pid = d.pid().ok_or(Unmeasured::NoPid)?;
    // One connection first, so what every connection shares (the
    // runtime's first buffers) is in the base.
    drop(authenticated(&d)?);
    let base = rss_kib(pid).ok_or(Unmeasured::NoRss)? as f64;
    let mut held = Vec::new();
    for &n in ns {
        while held.len() < n {
            held.push(authenticated(&d)?);
        }
        if let Some(rss) = rss_kib(pid) {
            side.push(ScaleFigure::RssPerConnection, n, (rss as f64 - base) / n as f64);
        }
        if let Some(p99) = ping_p99(&d) {
            side.push(ScaleFigure::PingP99Connections, n, p99);
        }
        eprintln!("bench --scale: {n} connections");
    }
    Ok(())
}
