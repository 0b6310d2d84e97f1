//! `harness derive` and the reference-derived corpus, end to end with the
//! real remora: a golden array whose count does not match the probe is
//! refused; a wrong frame planted in a golden file makes `harness check`
//! fail (and the unplanted one passes); re-deriving from an unchanged
//! source is byte-identical, also to the committed transcript.

use crate::common::{remora, run, workspace};
use std::path::Path;

const PROBE: &str = "ref-socket-files";
const GOLDEN: &str = "claustrum/testdata/socket_files.golden.json";

/// A probes dir holding the one probe, and a sources dir holding its recipe
/// and the golden file (`edit` applied to the golden's text).
fn setup(dir: &Path, edit: impl Fn(String) -> String) {
    let ws = workspace();
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::copy(
        ws.join(format!("probes/{PROBE}.probe")),
        dir.join(format!("probes/{PROBE}.probe")),
    )
    .unwrap();
    let golden = dir.join("sources").join(GOLDEN);
    std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
    std::fs::copy(
        ws.join(format!("corpora/sources/{PROBE}.derive")),
        dir.join(format!("sources/{PROBE}.derive")),
    )
    .unwrap();
    let text = std::fs::read_to_string(ws.join("corpora/sources").join(GOLDEN)).unwrap();
    std::fs::write(golden, edit(text)).unwrap();
}

fn derive(dir: &Path) -> std::process::Output {
    let bin = remora();
    run(&[
        "derive",
        "--quiet",
        "--binary",
        bin.to_str().unwrap(),
        "--probes",
        dir.join("probes").to_str().unwrap(),
        "--sources",
        dir.join("sources").to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ])
}

/// `harness check` of the derived transcript: exit code and JSON report.
fn check(dir: &Path) -> (i32, serde_json::Value) {
    let bin = remora();
    let json = dir.join("r.json");
    let out = run(&[
        "check",
        "--quiet",
        "--binary",
        bin.to_str().unwrap(),
        "--probes",
        dir.join("probes").to_str().unwrap(),
        "--transcripts",
        dir.join("out").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn a_golden_array_whose_count_does_not_match_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Drop the last frame: five frames for six replies.
    setup(dir.path(), |t| {
        let v: Vec<serde_json::Value> = serde_json::from_str(&t).unwrap();
        serde_json::to_string_pretty(&v[..v.len() - 1]).unwrap()
    });
    let out = derive(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains("the source has 5 frame(s), the probe's run has 6 repl(ies)"),
        "stderr: {err}"
    );
    assert!(
        !dir.path().join(format!("out/{PROBE}.txt")).exists(),
        "nothing written for a refused derive"
    );
}

#[test]
fn a_planted_wrong_frame_fails_check_and_the_true_one_passes() {
    let good = tempfile::tempdir().unwrap();
    setup(good.path(), |t| t);
    assert!(derive(good.path()).status.success());
    let (code, report) = check(good.path());
    assert_eq!(code, 0, "the true golden matches remora: {report}");
    assert_eq!(report["derived"]["transcripts"], 1);
    assert_eq!(report["derived"]["frames"], 6);
    assert_eq!(report["derived"]["identical"], 6);

    let bad = tempfile::tempdir().unwrap();
    setup(bad.path(), |t| {
        assert!(t.contains("\"content\": \"hi\\n\""));
        t.replace("\"content\": \"hi\\n\"", "\"content\": \"ho\\n\"")
    });
    assert!(derive(bad.path()).status.success());
    let (code, report) = check(bad.path());
    assert_eq!(code, 1, "a wrong frame must fail the run: {report}");
    assert_eq!(report["probes"][0]["status"], "differs");
    assert_eq!(report["derived"]["unexplained"], 1);
    assert_eq!(report["derived"]["identical"], 5);
}

#[test]
fn rederiving_an_unchanged_source_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), |t| t);
    let out = derive(dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = dir.path().join(format!("out/{PROBE}.txt"));
    let first = std::fs::read(&path).unwrap();
    let out = derive(dir.path());
    assert!(String::from_utf8_lossy(&out.stdout).contains("(1 unchanged, 0 refused)"));
    assert_eq!(std::fs::read(&path).unwrap(), first);
    let committed = std::fs::read(workspace().join(format!("corpora/transcripts/{PROBE}.txt"))).unwrap();
    assert_eq!(first, committed, "the committed transcript is what derive writes");
}
