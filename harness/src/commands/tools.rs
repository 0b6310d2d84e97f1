//! The subcommands that do not read the probe corpus: `bench`, `stress`
//! (and its re-executed client), `capture`, `fuzz-diff` and
//! `mutant-proxy`.

use super::Error;
use crate::base::error::At;
use crate::cli::{
    absolute, workspace, BenchArgs, CaptureArgs, FuzzDiffArgs, MutantProxyArgs, StressArgs, StressClientArgs,
};
use crate::runner::RunConfig;
use crate::transcript::{compare, normalize};
use crate::{bench, capture, fuzzdiff, fuzzgen, mutant, stress};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A child's status as this process's exit code (clamped to 0..=255).
fn exit_code(status: i32) -> ExitCode {
    ExitCode::from(status.clamp(0, 255) as u8)
}

/// `harness stress`: load, fault and soak scenarios.
pub(crate) fn stress(a: StressArgs) -> Result<ExitCode, Error> {
    let StressArgs {
        reference,
        candidate,
        scale,
        only,
        soak,
        slower_than,
        json,
        html,
        quiet,
    } = a;
    let o = stress::Options {
        reference: reference.as_deref().map(absolute).transpose()?,
        candidate: absolute(&candidate)?,
        ctx: stress::Ctx {
            scale,
            harness: std::env::current_exe().map_err(Error::CurrentExe)?,
            soak_minutes: soak.unwrap_or(0.0),
        },
        only,
        slower_than,
        quiet,
    };
    let rep = stress::run(&o)?;
    print!("{}", stress::report::terminal(&rep));
    if let Some(p) = &json {
        let j = serde_json::to_string_pretty(&rep).map_err(Error::Json)?;
        std::fs::write(p, j).at(p)?;
        eprintln!("harness: JSON report written to {}", p.display());
    }
    if let Some(p) = &html {
        std::fs::write(p, stress::report::html(&rep)).at(p)?;
        eprintln!("harness: HTML report written to {}", p.display());
    }
    let slow_fail = slower_than.is_some() && rep.flagged();
    Ok(if rep.broken() || slow_fail {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `harness stress-client`: one client process of a stress scenario.
pub(crate) fn stress_client(a: StressClientArgs) -> Result<ExitCode, Error> {
    let args = stress::client::Args {
        mode: &a.mode,
        socket: a.socket.as_deref(),
        id: &a.id,
        seed: a.seed,
        bytes: a.bytes,
        linger_ms: a.linger_ms,
        env: &a.env,
        hold: a.hold,
        pace_us: a.pace_us,
        count: a.count,
    };
    Ok(exit_code(stress::client::main(&args)))
}

/// `harness mutant-proxy`: a binary behind a wire-altering proxy.
pub(crate) fn mutant_proxy(a: MutantProxyArgs) -> Result<ExitCode, Error> {
    Ok(exit_code(mutant::main(a.kind, &a.cmd)))
}

/// `harness capture`: a real client's session recorded as a probe.
pub(crate) fn capture(a: CaptureArgs) -> Result<ExitCode, Error> {
    let CaptureArgs {
        socket,
        listen,
        out,
        token_file,
        root,
        large,
    } = a;
    let token = match &token_file {
        Some(f) => {
            let mut t = std::fs::read(f).at(f)?;
            if t.ends_with(b"\n") {
                t.pop();
                if t.ends_with(b"\r") {
                    t.pop();
                }
            }
            t
        }
        None => std::env::var("CLAUDE_RPC_TOKEN").unwrap_or_default().into_bytes(),
    };
    let o = capture::CaptureOptions {
        socket: absolute(&socket)?,
        listen,
        out,
        token,
        root: root.map(|r| absolute(&r)).transpose()?,
        home: std::env::var_os("HOME").map(PathBuf::from),
        maps: Vec::new(),
        prelude: String::new(),
        large,
    };
    let p = capture::run(&o)?;
    eprintln!("harness capture: wrote {}", p.display());
    Ok(ExitCode::SUCCESS)
}

/// `harness import`: a wire log turned into a probe and its transcript.
pub(crate) fn import(a: crate::cli::ImportArgs) -> Result<ExitCode, Error> {
    let crate::cli::ImportArgs {
        log,
        out,
        binary,
        transcripts,
        root,
        home,
        socket,
        map,
        prelude,
        common,
    } = a;
    let prelude = match &prelude {
        Some(p) => std::fs::read_to_string(p).at(p)?,
        None => String::new(),
    };
    let o = capture::import::ImportOptions {
        log,
        out,
        transcripts: transcripts.unwrap_or_else(|| crate::cli::workspace().join("corpora/transcripts")),
        root,
        home,
        socket,
        maps: capture::import::parse_maps(&map)?,
        prelude,
        cfg: crate::cli::run_cfg(&binary, &common)?,
    };
    let (probe, transcript) = capture::import::run(&o)?;
    eprintln!("harness import: wrote {} and {}", probe.display(), transcript.display());
    Ok(ExitCode::SUCCESS)
}

/// `harness fuzz-diff`: generated request sequences run against two
/// binaries, each difference shrunk to a minimal probe.
pub(crate) fn fuzz_diff(a: FuzzDiffArgs) -> Result<ExitCode, Error> {
    let FuzzDiffArgs {
        reference,
        candidate,
        seed,
        iterations,
        minutes,
        seconds,
        out,
        jobs,
        shrink_budget,
        reruns,
        rename,
        accepted,
        quiet,
        print,
        cases,
        restart_every,
        fresh,
        coverage,
    } = a;
    if print {
        let seed = seed.unwrap_or(0);
        for n in 0..iterations.unwrap_or(10) {
            let c = fuzzgen::generate(seed, n);
            println!("### {}.probe\n{}", c.name(), c.render(&[]));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let renames = normalize::parse_renames(&rename)?;
    let cfg = |b: &Path| -> Result<RunConfig, Error> {
        Ok(RunConfig {
            bin: absolute(b)?,
            renames: renames.clone(),
            transport: crate::dut::Transport::Socket,
        })
    };
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    });
    let o = fuzzdiff::FuzzOptions {
        reference: cfg(&reference)?,
        candidate: cfg(&candidate)?,
        seed,
        iterations,
        minutes: minutes.or(seconds.map(|s| s / 60.0)),
        out: out.unwrap_or_else(|| workspace().join("fuzz/artifacts/fuzz-diff")),
        jobs,
        central: compare::load_accepted(&accepted.unwrap_or_else(|| workspace().join("probes/ACCEPTED")))?,
        shrink_budget,
        reruns: reruns as usize,
        quiet,
        cases,
        restart_every,
        fresh,
    };
    eprintln!("fuzz-diff: seed {seed}");
    let sm = fuzzdiff::run(&o);
    print!("{}", fuzzdiff::summary_text(seed, &sm));
    if let Some(p) = coverage {
        std::fs::write(&p, sm.coverage.full()).at(&p)?;
    }
    Ok(if sm.differences > 0 || sm.errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `harness bench`: performance of two binaries side by side.
pub(crate) fn bench(a: BenchArgs) -> Result<ExitCode, Error> {
    if let Some(ns) = &a.scale {
        let (reference, candidate) = (absolute(&a.reference)?, absolute(&a.candidate)?);
        let o = bench::scale::ScaleOptions {
            processes: ns.clone(),
            connections: a.scale_connections.clone(),
            stream_bytes: a.stream_bytes,
        };
        let curves = bench::scale::run(&reference, &candidate, &o);
        print!("{}", bench::scale::table(&curves));
        if let Some(dir) = &a.plots {
            for p in bench::scale::write_plots(&curves, dir).at(dir)? {
                eprintln!("bench --scale: wrote {}", p.display());
            }
        }
        if let Some(p) = a.json {
            let j = serde_json::to_string_pretty(&curves).map_err(Error::Json)?;
            std::fs::write(&p, j).at(&p)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let o = bench::BenchOptions {
        stream_bytes: a.stream_bytes,
        pings: a.pings,
        pipelined: a.pipelined,
        spawns: a.spawns,
        rounds: a.rounds,
        memory: (!a.no_memory).then_some(bench::MemoryOptions {
            exited: a.exited,
            stdin_mib: a.stdin_mib,
            flood_conns: a.flood_conns,
            flood_mib: a.flood_mib,
        }),
    };
    let measured = bench::run(&absolute(&a.reference)?, &absolute(&a.candidate)?, &o);
    print!("{}", bench::table(&measured));
    if let Some(p) = a.json {
        let j = serde_json::to_string_pretty(&measured).map_err(Error::Json)?;
        std::fs::write(&p, j).at(&p)?;
    }
    Ok(ExitCode::SUCCESS)
}
