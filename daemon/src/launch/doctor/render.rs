//! The doctor's text report: one section per concern, then the problems,
//! each with what to do. The JSON report (`-json`) is the same
//! [`super::Report`] serialised.

use super::Report;
use std::fmt::Write;

/// The report as a person reads it.
pub(crate) fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "remora doctor: user {} (uid {}), home {}",
        r.user.name, r.user.uid, r.user.home
    );
    let _ = writeln!(out, "\nsrv directories (~/.claude/remote/srv):");
    if r.srv.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for s in &r.srv {
        let _ = writeln!(out, "  {}", s.path);
        let Some(server) = &s.server else {
            let _ = writeln!(out, "    not a directory");
            continue;
        };
        let what = match (server.remora, &server.error) {
            (_, Some(error)) => format!("{} (`--version` {error})", server.kind),
            (Some(true), _) => "remora".to_string(),
            (Some(false), _) => "not remora".to_string(),
            (None, _) => server.kind.to_string(),
        };
        let _ = writeln!(out, "    server: {what}");
        if let Some(line) = &server.version_line {
            let _ = writeln!(out, "    --version: {line}");
        }
        if let Some(build) = &server.answers_as {
            let how = server.stamp.map(|s| format!(" (stamp {s})")).unwrap_or_default();
            let _ = writeln!(out, "    answers as build {build}{how}");
        }
        let _ = writeln!(
            out,
            "    server.reference: {}",
            if s.server_reference { "kept" } else { "none" }
        );
        let _ = writeln!(out, "    remora.conf: {}", s.remora_conf);
    }
    let _ = writeln!(out, "\ndaemons:");
    if r.daemons.is_empty() {
        let _ = writeln!(out, "  none running");
    }
    let unknown = || "?".to_string();
    for d in &r.daemons {
        let _ = writeln!(out, "  pid {} {}", d.pid, d.program);
        let _ = writeln!(out, "    socket: {}", d.socket);
        let _ = writeln!(
            out,
            "    uptime: {}  clients: {}  processes: {}",
            d.uptime_sec.map(duration_text).unwrap_or_else(unknown),
            d.clients.map(|n| n.to_string()).unwrap_or_else(unknown),
            d.processes.map(|n| n.to_string()).unwrap_or_else(unknown),
        );
        let replay = match (&d.replay_dir, d.replay_bytes) {
            (Some(dir), Some(bytes)) => format!("{} in {dir}", bytes_text(bytes)),
            (Some(dir), None) => format!("nothing in {dir}"),
            _ => "unknown".to_string(),
        };
        let _ = writeln!(out, "    replay disk use: {replay}");
        let reach = if d.reachable {
            "leads to it".to_string()
        } else if let Some(other) = d.answered_by {
            format!("leads to pid {other}")
        } else {
            "leads nowhere".to_string()
        };
        let _ = writeln!(out, "    socket path: {reach}  token file: {}", d.token);
        let _ = writeln!(
            out,
            "    run lock: {}  keep-children: {}  idle-exit-min: {}",
            if d.holds_run_lock { "held" } else { "not held" },
            d.keep_children,
            d.idle_exit_min
        );
        if let Some(scope) = &d.session_scope {
            let _ = writeln!(out, "    runs in login session scope {scope}");
        }
        if d.stale {
            let _ = writeln!(out, "    STALE: {}", d.why.as_deref().unwrap_or(""));
            let _ = writeln!(out, "    end it: {}", d.fix.as_deref().unwrap_or(""));
        } else if d.idle {
            let _ = writeln!(out, "    idle: no client, no process");
        }
    }
    let _ = writeln!(out, "\nstale sockets:");
    if r.stale_sockets.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for s in &r.stale_sockets {
        let _ = writeln!(out, "  {}: {}", s.socket, s.why);
        let _ = writeln!(out, "    end it: {}", s.fix);
    }
    let _ = writeln!(out, "\nlogind:");
    let _ = writeln!(
        out,
        "  systemd: {}  KillUserProcesses: {}  kills this user: {}  linger: {}",
        yes(r.logind.systemd),
        yes(r.logind.kill_user_processes),
        yes(r.logind.kills_user),
        yes(r.logind.linger)
    );
    let _ = writeln!(out, "  {}", r.logind.advice);
    let _ = writeln!(out, "\nccd-cli:");
    let _ = writeln!(out, "  {}: {}", r.ccd_cli.path, r.ccd_cli.kind);
    if let Some(hint) = &r.hint {
        let _ = writeln!(out, "\nhint: {hint}");
    }
    if r.problems.is_empty() {
        let _ = writeln!(out, "\nhealthy: nothing to do");
    } else {
        let _ = writeln!(out, "\n{} problem(s):", r.problems.len());
        for p in &r.problems {
            let _ = writeln!(out, "  [{}] {}: {}", p.section, p.subject, p.problem);
            let _ = writeln!(out, "    fix: {}", p.fix);
        }
    }
    out
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// `3d4h`, `2h5m`, `4m10s`, `12s`.
fn duration_text(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// Bytes in the largest unit that keeps a whole number before the point.
fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(duration_text(12), "12s");
        assert_eq!(duration_text(250), "4m10s");
        assert_eq!(duration_text(7500), "2h5m");
        assert_eq!(duration_text(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(bytes_text(10), "10 B");
        assert_eq!(bytes_text(1536), "1.5 KiB");
        assert_eq!(bytes_text(3 << 20), "3.0 MiB");
    }
}
