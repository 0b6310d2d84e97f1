//! `harness fuzz-diff`: remora against itself finds nothing; a planted
//! difference (remora behind a mutant proxy that alters -32602 messages
//! only) is found, shrunk to a tiny probe, and that probe reproduces the
//! difference under `harness diff`.

use crate::common;
use std::path::Path;

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn probe_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "probe"));
    v.sort();
    v
}

/// `harness fuzz-diff` with remora as the reference; `extra` adds flags
/// (`--iterations`, `--jobs`, `--cases`).
fn fuzz_diff(candidate: &Path, seed: &str, out_dir: &Path, extra: &[&str]) -> std::process::Output {
    let remora = common::remora();
    let mut args = vec![
        "fuzz-diff",
        "--reference",
        remora.to_str().unwrap(),
        "--candidate",
        candidate.to_str().unwrap(),
        "--seed",
        seed,
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    common::run(&args)
}

#[test]
fn remora_against_itself_finds_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let out = fuzz_diff(
        &common::remora(),
        "11",
        dir.path(),
        &["--iterations", "40", "--jobs", "2"],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("seed 11: 40 case(s)") && t.contains(": 0 difference(s)"),
        "{t}"
    );
    assert!(t.contains("0 error(s), 0 file(s) written"), "{t}");
    assert!(probe_files(dir.path()).is_empty());
}

#[test]
fn a_planted_difference_is_found_shrunk_and_reproduced() {
    let remora = common::remora();
    let bin = remora.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mutant = common::mutant(dir.path(), "invalid-params");
    let out_dir = dir.path().join("found");
    let run = |seed: &str| fuzz_diff(&mutant, seed, &out_dir, &["--iterations", "2", "--jobs", "2"]);
    let out = run("1");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let files = probe_files(&out_dir);
    assert!(!files.is_empty(), "no probe written:\n{t}");
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("1-"), "{name}");
        let body = std::fs::read_to_string(f).unwrap();
        assert!(body.starts_with("# fuzz-diff seed 1 iteration "), "{body}");
        assert!(body.contains("-32602"), "the header says what differed:\n{body}");
        // Steps: every line that is not a comment or a header directive.
        let steps = body
            .lines()
            .filter(|l| {
                !l.is_empty()
                    && !l.starts_with('#')
                    && !l.starts_with("desc ")
                    && !l.starts_with("timeout ")
                    && !l.starts_with("mask ")
            })
            .count();
        assert!(steps <= 3, "not shrunk ({steps} steps):\n{body}");
    }
    // The written probes parse (list exits 2 on a parse error) …
    let list = common::run(&["list", "--probes", out_dir.to_str().unwrap()]);
    assert!(list.status.success(), "{}", text(&list));
    // … and reproduce the difference under `harness diff`.
    let diff = common::run(&[
        "diff",
        "--quiet",
        "--probes",
        out_dir.to_str().unwrap(),
        "--reference",
        bin,
        "--candidate",
        mutant.to_str().unwrap(),
    ]);
    let dt = text(&diff);
    assert_eq!(diff.status.code(), Some(1), "{dt}");
    assert!(dt.contains("DIFFERS") && dt.contains("invalid params"), "{dt}");
    assert!(dt.contains(&format!("{} differ", files.len())), "{dt}");
    // Same seed, same file names.
    let before: Vec<_> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    std::fs::remove_dir_all(&out_dir).unwrap();
    let again = run("1");
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let after: Vec<_> = probe_files(&out_dir)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert_eq!(before.len(), after.len());
    // The shrunk cases are the same (the run count in the header may vary
    // only if a run flaked, which would itself be a failure above).
    assert_eq!(before, after);
}

/// A mutant that answers one method differently every time
/// (`server.capabilities` without `plugins.prune`) is a difference: it
/// differs in every fresh rerun, is shrunk, and the probe's header shows
/// what differed. It is never counted or written as flaky.
#[test]
fn a_planted_real_difference_is_reported_as_a_difference_not_as_flaky() {
    let dir = tempfile::tempdir().unwrap();
    let mutant = common::mutant(dir.path(), "forget-prune");
    let out_dir = dir.path().join("found");
    // Seed 4 asks server.capabilities in one of its six cases.
    let out = fuzz_diff(&mutant, "4", &out_dir, &["--iterations", "6", "--jobs", "2"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains(": 1 difference(s) (0 flaky, 0 state-dependent, 1 in every fresh rerun)"),
        "{t}"
    );
    assert!(t.contains("differed in 4/4 fresh reruns, shrinking"), "{t}");
    assert!(!t.contains("FLAKY") && !t.contains("\nflaky: "), "{t}");
    let files = probe_files(&out_dir);
    assert_eq!(files.len(), 1, "{t}");
    let body = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!body.contains("FLAKY"), "{body}");
    assert!(body.contains("in 4/4 fresh reruns"), "{body}");
    assert!(body.contains("# differed (1 entry):"), "{body}");
    assert!(body.contains("\"method\":\"server.capabilities\""), "{body}");
}

/// A difference that comes and goes between runs (a mutant that alters
/// error messages on every other start, a race at rate one half) is
/// reported as flaky with its rate, written unshrunk, and not counted as
/// reproduced.
#[test]
fn a_difference_that_comes_and_goes_is_flaky_with_its_rate() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mutant = dir.path().join("mutant-every-other-start");
    std::fs::write(
        &mutant,
        format!(
            "#!/bin/sh\nMUTANT_STATE='{}'; export MUTANT_STATE\nexec '{}' mutant-proxy --kind every-other-start -- '{}' \"$@\"\n",
            dir.path().join("starts").display(),
            common::harness(),
            common::remora().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&mutant, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out_dir = dir.path().join("found");
    let out = fuzz_diff(&mutant, "2", &out_dir, &["--iterations", "1", "--jobs", "1"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains(": 1 difference(s) (1 flaky, 0 state-dependent, 0 in every fresh rerun)"),
        "{t}"
    );
    assert!(t.contains("\nflaky: case 0 differed in 2/4 fresh reruns\n"), "{t}");
    let body = std::fs::read_to_string(probe_files(&out_dir).first().expect("a probe written")).unwrap();
    assert!(
        body.contains("# FLAKY: differed on live daemons, then in 2/4 fresh reruns"),
        "{body}"
    );
    assert!(!body.contains("# differed (0 entries)"), "{body}");
}

/// A difference that needs earlier cases on the same daemons (the mutant
/// alters error messages only from its 13th connection on) is reported as
/// state-dependent, with a `--cases` replay that reproduces it, while the
/// case alone, on fresh daemons, is identical.
#[test]
fn a_state_dependent_difference_is_reported_with_a_replay_that_reproduces_it() {
    let dir = tempfile::tempdir().unwrap();
    let mutant = common::mutant(dir.path(), "late-error-byte");
    let fuzz = |out: &str, extra: &[&str]| {
        let out_dir = dir.path().join(out);
        let mut args = vec!["--jobs", "1"];
        args.extend_from_slice(extra);
        let o = fuzz_diff(&mutant, "5", &out_dir, &args);
        (o.status.code(), text(&o), probe_files(&out_dir))
    };
    let (code, t, files) = fuzz("found", &["--iterations", "24"]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("(0 flaky, ") && !t.contains(", 0 state-dependent)"), "{t}");
    assert!(!t.contains("reproduced on fresh daemons"), "{t}");
    let body = std::fs::read_to_string(files.first().expect("a probe written")).unwrap();
    assert!(body.contains("# STATE-DEPENDENT: identical on fresh daemons"), "{body}");
    assert!(
        body.contains("# preceding case "),
        "the preceding cases are attached:\n{body}"
    );
    let replay = body
        .lines()
        .find_map(|l| l.strip_prefix("# replay: harness fuzz-diff --reference R --candidate C --seed 5 --cases "))
        .unwrap_or_else(|| panic!("no replay line:\n{body}"))
        .to_string();
    let last = replay.rsplit(',').next().unwrap().to_string();
    assert!(replay.contains(','), "no preceding case kept: {replay}");

    // The replay reproduces it; the case alone does not.
    let (code, t, _) = fuzz("replayed", &["--cases", &replay]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("1 state-dependent"), "{t}");
    let (code, t, _) = fuzz("alone", &["--cases", &last]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains(": 0 difference(s)"), "{t}");
}

#[test]
fn generated_cases_are_deterministic() {
    let gen = |seed: &str| {
        common::run(&[
            "fuzz-diff",
            "--reference",
            "x",
            "--candidate",
            "x",
            "--print",
            "--seed",
            seed,
            "--iterations",
            "50",
        ])
    };
    let (a, b, c) = (gen("5"), gen("5"), gen("6"));
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    assert_ne!(a.stdout, c.stdout);
    let t = String::from_utf8_lossy(&a.stdout);
    assert_eq!(t.matches("### 5-").count(), 50);
}

/// `--fresh` (two new daemons per case) counts coverage as the live mode
/// does: the same seed's cases reach the same methods and outcomes.
#[test]
fn fresh_mode_records_the_same_coverage_as_live_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let remora = common::remora();
    let coverage = |mode: &str, extra: &[&str]| {
        let file = dir.path().join(format!("{mode}.tsv"));
        let mut args = vec![
            "--iterations",
            "12",
            "--jobs",
            "2",
            "--coverage",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = fuzz_diff(&remora, "11", &dir.path().join(mode), &args);
        let t = text(&out);
        assert!(out.status.success(), "{mode}: {t}");
        let line = t
            .lines()
            .find(|l| l.starts_with("coverage: "))
            .unwrap_or("")
            .to_string();
        (line, std::fs::read_to_string(&file).unwrap())
    };
    let (live_line, live) = coverage("live", &[]);
    let (fresh_line, fresh) = coverage("fresh", &["--fresh"]);
    assert!(
        !fresh.is_empty() && !fresh_line.starts_with("coverage: 0/"),
        "--fresh recorded no coverage: {fresh_line}"
    );
    assert_eq!(fresh_line, live_line);
    assert_eq!(fresh, live, "the same cases, different outcomes per mode");
}
