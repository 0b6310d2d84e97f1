//! Command-line entry point: flag parsing and mode selection.
//!
//! Modes, when several are given, are taken in this order: `-version`,
//! `-install`, `-probe-cli`, `-serve`, `-bridge`, `-stop`, `-doctor` (the
//! first one set wins). Every mode but `-version` is carried out by
//! [`crate::launch::modes`] (Unix; Windows has its own, issue 43).

use crate::base::flagtable::Flags;
use crate::launch::flags::{self, ParseError};
use crate::launch::modes;
use std::ffi::OsString;

// The first line of each is the reference's text, kept byte for byte for
// whatever matches it; the second says what to do, with the flags as
// they are written.
const NO_MODE: &str = "remora: one of --version/--install/--serve/--bridge/--stop is required
remora: choose a mode: -serve, -bridge, -stop, -install, -probe-cli PATH, -doctor or -version (remora -h describes each)";

/// Runs the binary; returns the process exit code.
pub fn main() -> i32 {
    // A spawned child on its way to its program: touch nothing (no
    // environment, signal or log change) before the exec.
    // (And the daemon's spawner: it changes nothing of its own either, so
    // its children start as the daemon's would.)
    if let Some(code) = modes::helper_role() {
        return code;
    }
    // Before anything else, and before any thread exists: environment
    // writes are not thread-safe, and the sentinel must never reach a child.
    let daemon_child = modes::take_daemon_child();
    crate::base::logging::init_from_env();
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| "remora".to_string());
    let mut flags = match flags::parse(args.get(1..).unwrap_or_default()) {
        Ok(f) => f,
        Err(ParseError::Help) => {
            eprint!("{}", flags::usage(&argv0));
            return 0;
        }
        Err(ParseError::Invalid(message)) => {
            eprint!("{message}\n{}", flags::usage_after_error(&argv0));
            return 2;
        }
    };
    // `remora.conf` beside the binary fills what the command line left
    // unset; its warnings are logged by the modes that keep a log.
    let settings = crate::launch::settings::load_beside_executable();
    let provenance =
        crate::launch::settings::apply(&mut flags, &settings, std::env::var("REMORA_LOG_LEVEL").ok().as_deref());
    if let Some(level) = flags.log_level {
        crate::base::logging::set_threshold(level);
    }
    if flags.print_config {
        print!(
            "{}",
            crate::launch::settings::print_config(&flags, &settings, &provenance)
        );
        println!(
            "# {}",
            crate::launch::serveopts::served_build_line(&flags.reference_build)
        );
        return 0;
    }
    if flags.install || (flags.serve && daemon_child) {
        for warning in &settings.warnings {
            crate::log_warn!("[daemon] settings: {warning}");
        }
    }
    if flags.serve && daemon_child {
        crate::log_info!(
            "[daemon] {}",
            crate::launch::settings::summary_line(&flags, &provenance)
        );
    }
    run(&flags, daemon_child)
}

fn run(flags: &Flags, daemon_child: bool) -> i32 {
    if flags.version {
        println!("{}", crate::base::version::banner(&flags.reference_build));
        return 0;
    }
    if flags.install {
        return modes::install(flags);
    }
    if !flags.probe_cli.is_empty() {
        return modes::probe_cli(flags);
    }
    if flags.serve {
        return modes::serve(flags, daemon_child);
    }
    if flags.bridge {
        return modes::bridge(flags);
    }
    if flags.stop {
        return modes::stop(flags);
    }
    if flags.doctor {
        return modes::doctor(flags);
    }
    eprintln!("{NO_MODE}");
    2
}
