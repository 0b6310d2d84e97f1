//! The subcommands that work on the probe corpus and its transcripts:
//! `list`, `diff`, `check`, `record`, `derive` and `report` (a saved
//! report rendered again).

use super::Error;
use crate::base::error::At;
use crate::cli::{
    load_probes, run_cfg, workspace, write_reports, CheckArgs, DeriveArgs, DiffArgs, ListArgs, RecordArgs, RenderArgs,
    ReportArgs,
};
use crate::derive::{changed_keys, derived_text, Recipe};
use crate::dut::Transport;
use crate::report;
use crate::runner::diff::{DiffOptions, Reference};
use crate::runner::{self, diff, RunConfig};
use crate::transcript::{self, compare, normalize};
use std::process::ExitCode;

/// `harness list`: every selected probe with its description.
pub(crate) fn list(a: ListArgs) -> Result<ExitCode, Error> {
    let (probes, _) = load_probes(&a.common)?;
    for p in &probes {
        println!("{:<44} {}", p.name, p.desc);
    }
    println!("{} probes", probes.len());
    Ok(ExitCode::SUCCESS)
}

/// `harness diff`: a candidate against a reference binary, or against the
/// committed transcripts when there is no `--reference`.
pub(crate) fn diff(a: DiffArgs) -> Result<ExitCode, Error> {
    let DiffArgs {
        reference,
        candidate,
        transcripts,
        repeat,
        slower_than,
        min_delta_ms,
        no_build,
        common,
        transport,
        report: ra,
    } = a;
    let (probes, dir) = load_probes(&common)?;
    let transport = transport.transport();
    let _wine_server = transport.wine_server();
    let (probes, skipped) = skip_for(probes, transport);
    let cand = match candidate {
        Some(c) => c,
        None => crate::cli::default_candidate(no_build)?,
    };
    let candidate = RunConfig {
        transport,
        ..run_cfg(&cand, &common)?
    };
    let reference = match reference {
        Some(r) => Reference::Binary(run_cfg(&r, &common)?),
        None => Reference::Transcripts(transcripts.unwrap_or_else(|| workspace().join("corpora/transcripts"))),
    };
    let ref_label = match &reference {
        Reference::Binary(c) => c.bin.display().to_string(),
        Reference::Transcripts(d) => format!("transcripts {}", d.display()),
    };
    // The title says what ran: `harness diff`, against a binary or the
    // committed transcripts (the reference label says which).
    let mode = "diff";
    let o = DiffOptions {
        reference,
        jobs: common.jobs,
        repeat: repeat.max(1),
        slower_than: slower_than.unwrap_or(1.5),
        min_delta_us: (min_delta_ms * 1000.0) as u64,
        central: compare::load_accepted(&common.accepted.clone().unwrap_or_else(|| dir.join("ACCEPTED")))?,
        progress: !common.quiet,
        candidate: candidate.clone(),
    };
    let results = diff::diff_all(&probes, &o);
    let rep = report::Report {
        mode: mode.into(),
        reference: ref_label,
        candidate: format!("{}{}", candidate.bin.display(), transport.label()),
        normalisation: normalize::rules(&candidate.renames),
        slower_than: o.slower_than,
        repeat: o.repeat,
        overall_ratio: report::overall_ratio(&results),
        derived: report::DerivedSummary::of(&results),
        probes: results,
        slow_fails: slower_than.is_some(),
        skipped,
    };
    write_reports(&rep, &ra)?;
    Ok(if rep.fails_run() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Splits off the probes `transport` cannot run ([`crate::probe::skips`]),
/// each named on stderr with its reason as the report will show it.
fn skip_for(
    probes: Vec<crate::probe::Probe>,
    transport: Transport,
) -> (Vec<crate::probe::Probe>, Vec<report::Skipped>) {
    let mut skipped = Vec::new();
    let mut run = Vec::new();
    for p in probes {
        match crate::probe::skips::reason(&p, transport) {
            Some(reason) => {
                eprintln!("skipped: {} ({reason})", p.name);
                skipped.push(report::Skipped { probe: p.name, reason });
            }
            None => run.push(p),
        }
    }
    (run, skipped)
}

/// `harness check`: a binary against the committed transcripts (CI).
pub(crate) fn check(a: CheckArgs) -> Result<ExitCode, Error> {
    let CheckArgs {
        binary,
        transcripts,
        common,
        transport,
        report: ra,
    } = a;
    let (probes, dir) = load_probes(&common)?;
    let transport = transport.transport();
    let _wine_server = transport.wine_server();
    let (probes, skipped) = skip_for(probes, transport);
    let candidate = RunConfig {
        transport,
        ..run_cfg(&binary, &common)?
    };
    let tdir = transcripts.unwrap_or_else(|| workspace().join("corpora/transcripts"));
    let o = DiffOptions {
        reference: Reference::Transcripts(tdir.clone()),
        jobs: common.jobs,
        repeat: 1,
        slower_than: 1.5,
        min_delta_us: 0,
        central: compare::load_accepted(&common.accepted.clone().unwrap_or_else(|| dir.join("ACCEPTED")))?,
        progress: !common.quiet,
        candidate: candidate.clone(),
    };
    let results = diff::diff_all(&probes, &o);
    let rep = report::Report {
        mode: "check".into(),
        reference: format!("transcripts {}", tdir.display()),
        candidate: format!("{}{}", candidate.bin.display(), transport.label()),
        normalisation: normalize::rules(&candidate.renames),
        slower_than: 1.5,
        repeat: 1,
        overall_ratio: None,
        derived: report::DerivedSummary::of(&results),
        probes: results,
        slow_fails: false,
        skipped,
    };
    write_reports(&rep, &ra)?;
    Ok(if rep.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `harness report`: a saved JSON report rendered again. Exits 0 once it
/// is written, whatever the report says.
pub(crate) fn render(a: RenderArgs) -> Result<ExitCode, Error> {
    let RenderArgs { json, html, verbose } = a;
    let text = std::fs::read_to_string(&json).at(&json)?;
    let rep: report::Report = serde_json::from_str(&text).map_err(|source| Error::NotAReport {
        path: json.clone(),
        source,
    })?;
    write_reports(
        &rep,
        &ReportArgs {
            json: None,
            html,
            verbose,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `harness record`: writes each probe's transcript as the binary answers
/// it, except the reference-derived ones, which are only compared.
pub(crate) fn record(a: RecordArgs) -> Result<ExitCode, Error> {
    let RecordArgs {
        binary,
        out,
        skip_if,
        common,
    } = a;
    let (probes, _) = load_probes(&common)?;
    let cfg = run_cfg(&binary, &common)?;
    let out = out.unwrap_or_else(|| workspace().join("corpora/transcripts"));
    std::fs::create_dir_all(&out).at(&out)?;
    let results = diff::parallel(
        &probes,
        common.jobs,
        !common.quiet,
        |p| runner::run(p, &cfg),
        |r| match r {
            Ok(_) => "ran".into(),
            Err(e) => format!("ERROR {e}"),
        },
    );
    let (mut written, mut skipped, mut failed, mut kept) = (0, 0, 0, 0);
    for (p, r) in probes.iter().zip(results) {
        match r {
            Ok(t) => {
                let text = t.to_text();
                let path = out.join(format!("{}.txt", p.name));
                // Expected bytes taken from the reference's own
                // record are never replaced by remora's output.
                if transcript::is_reference_derived(&path) {
                    kept += 1;
                    if text_entries_differ(&text, &path) {
                        eprintln!("{}: differs from its reference-derived transcript (kept)", p.name);
                        failed += 1;
                    }
                    continue;
                }
                if skip_if.iter().any(|s| text.contains(s.as_str())) {
                    skipped += 1;
                    let _ = std::fs::remove_file(&path);
                    continue;
                }
                std::fs::write(&path, text).at(&path)?;
                written += 1;
            }
            Err(e) => {
                eprintln!("{}: {e}", p.name);
                failed += 1;
            }
        }
    }
    println!(
        "recorded {written} transcript(s) in {} ({skipped} skipped, {kept} reference-derived kept, {failed} failed)",
        out.display()
    );
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `harness derive`: every selected probe with a recipe gets its
/// reference-derived transcript written; a refusal (counts or ids out of
/// step, an unmapped placeholder) fails the run and writes nothing for
/// that probe.
pub(crate) fn derive(a: DeriveArgs) -> Result<ExitCode, Error> {
    let DeriveArgs {
        binary,
        sources,
        out,
        common,
    } = a;
    let sources = sources.unwrap_or_else(|| workspace().join("corpora/sources"));
    let out = out.unwrap_or_else(|| workspace().join("corpora/transcripts"));
    let (probes, _) = load_probes(&common)?;
    let (probes, without): (Vec<_>, Vec<_>) = probes
        .into_iter()
        .partition(|p| sources.join(format!("{}.derive", p.name)).is_file());
    if probes.is_empty() {
        return Err(Error::NoRecipes(sources));
    }
    if !common.filter.is_empty() {
        for p in &without {
            eprintln!("{}: no recipe {}.derive (skipped)", p.name, p.name);
        }
    }
    let recipes = probes
        .iter()
        .map(|p| Recipe::load(&sources.join(format!("{}.derive", p.name))))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = run_cfg(&binary, &common)?;
    std::fs::create_dir_all(&out).at(&out)?;
    let runs = diff::parallel(
        &probes,
        common.jobs,
        !common.quiet,
        |p| runner::run(p, &cfg),
        |r| match r {
            Ok(_) => "ran".into(),
            Err(e) => format!("ERROR {e}"),
        },
    );
    let (mut written, mut unchanged, mut refused) = (0, 0, 0);
    for ((p, recipe), run) in probes.iter().zip(&recipes).zip(runs) {
        // A probe that did not run and a derivation refused are both refusals.
        let derived: Result<String, Box<dyn std::error::Error>> = match run {
            Ok(t) => derived_text(recipe, &t).map_err(Into::into),
            Err(e) => Err(e.into()),
        };
        let text = match derived {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {e}", p.name);
                refused += 1;
                continue;
            }
        };
        let path = out.join(format!("{}.txt", p.name));
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() == Some(text.as_str()) {
            unchanged += 1;
            continue;
        }
        if let Some(old) = &old {
            let keys = changed_keys(old, &text);
            println!(
                "{}: changed {}",
                p.name,
                if keys.is_empty() {
                    "header only".into()
                } else {
                    keys.join(", ")
                }
            );
        }
        std::fs::write(&path, &text).at(&path)?;
        written += 1;
    }
    println!(
        "derived {written} transcript(s) in {} ({unchanged} unchanged, {refused} refused)",
        out.display()
    );
    Ok(if refused > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether a freshly recorded transcript's entries differ from the ones in
/// the file at `path` (comments ignored).
fn text_entries_differ(text: &str, path: &std::path::Path) -> bool {
    let entries = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    std::fs::read_to_string(path).map_or(true, |old| entries(&old) != entries(text))
}
