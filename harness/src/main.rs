//! `harness`: the differential probe harness for remora.
//!
//! It runs scripted probes (`probes/*.probe`, see `docs/PROBES.md`) against
//! daemon binaries that share the reference command line, normalises what
//! they produce into transcripts and compares them: binary against binary
//! (`diff`), binary against committed transcripts (`check`, `diff` without
//! `--reference`), or writes transcripts (`record`). `bench` compares
//! performance; `mutant-proxy` is the wire-altering wrapper the sensitivity
//! tests use. It runs daemons only as binaries: the remora crate is
//! linked for its method table alone (fuzz-diff's vocabulary).

mod base;
mod bench;
mod capture;
mod cli;
mod commands;
mod derive;
mod dut;
mod fuzzdiff;
mod fuzzgen;
mod mutant;
mod probe;
mod report;
mod runner;
mod stress;
mod transcript;

use clap::Parser;
use cli::{Cli, Cmd};
use commands::{corpus, tools};
use std::process::ExitCode;

/// Parses the command line and runs the one subcommand it names.
fn real_main() -> Result<ExitCode, commands::Error> {
    Ok(match Cli::parse().cmd {
        Cmd::List(a) => corpus::list(a)?,
        Cmd::Diff(a) => corpus::diff(a)?,
        Cmd::Check(a) => corpus::check(a)?,
        Cmd::Report(a) => corpus::render(a)?,
        Cmd::Record(a) => corpus::record(a)?,
        Cmd::Derive(a) => corpus::derive(a)?,
        Cmd::Bench(a) => tools::bench(a)?,
        Cmd::Capture(a) => tools::capture(a)?,
        Cmd::Import(a) => tools::import(a)?,
        Cmd::FuzzDiff(a) => tools::fuzz_diff(a)?,
        Cmd::Stress(a) => tools::stress(a)?,
        Cmd::StressClient(a) => tools::stress_client(a)?,
        Cmd::MutantProxy(a) => tools::mutant_proxy(a)?,
    })
}

fn main() -> ExitCode {
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}
