//! Sensitivity of `harness stress`: remora behind `harness mutant-proxy`
//! with one robustness fault each must break the scenario that targets
//! it, while the unaltered proxy passes the same scenarios. The JSON and
//! HTML shapes are checked on a two-binary run.

use crate::common;
use serde_json::Value;

/// Runs `harness stress` at scale 0.1; returns the exit code, the JSON
/// report and the terminal output.
fn stress(candidate: &std::path::Path, reference: Option<&std::path::Path>, only: &[&str]) -> (i32, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let mut args: Vec<String> = vec!["stress".into(), "--quiet".into(), "--scale".into(), "0.1".into()];
    args.extend(["--candidate".into(), candidate.display().to_string()]);
    if let Some(r) = reference {
        args.extend(["--reference".into(), r.display().to_string()]);
    }
    for o in only {
        args.extend(["--only".into(), o.to_string()]);
    }
    args.extend(["--json".into(), json.display().to_string()]);
    args.extend(["--html".into(), html.display().to_string()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::run(&a);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no report: {text}"))).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    for s in v["scenarios"].as_array().unwrap() {
        assert!(
            page.contains(&format!("<h2 id=\"{}\">", s["name"].as_str().unwrap())),
            "html lacks {}",
            s["name"]
        );
    }
    (out.status.code().unwrap_or(-1), v, text)
}

fn scenario<'a>(rep: &'a Value, name: &str) -> &'a Value {
    rep["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
}

/// The names of the candidate's broken invariants in `name`.
fn broken(rep: &Value, name: &str) -> Vec<String> {
    scenario(rep, name)["candidate"]["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["holds"] == false)
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

fn caught(kind: &str, name: &str, invariant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cand = common::mutant(dir.path(), kind);
    let (code, rep, text) = stress(&cand, None, &[name]);
    assert_eq!(
        scenario(&rep, name)["status"],
        "broken",
        "{kind} not caught by {name}:\n{text}"
    );
    assert_eq!(code, 1, "{text}");
    let b = broken(&rep, name);
    assert!(
        b.iter().any(|n| n == invariant),
        "{kind}: broken {b:?}, wanted {invariant:?}:\n{text}"
    );
}

#[test]
fn a_descriptor_leaked_per_connection_breaks_connection_churn() {
    caught("leak-fd", "connection-churn", "descriptors back to baseline");
}

#[test]
fn a_stream_frame_dropped_under_load_breaks_streaming_integrity() {
    caught(
        "drop-frame",
        "streaming-integrity",
        "every stream whole: SHA-256 matches, seqs strictly +1 from 1, exit frame last",
    );
}

#[test]
fn a_grandchild_left_on_shutdown_breaks_daemon_faults() {
    caught(
        "leave-grandchild",
        "daemon-faults",
        "nothing left after SIGTERM and the grace",
    );
}

#[test]
fn dying_on_a_2_mib_line_breaks_garbage() {
    caught("die-on-long-line", "garbage", "the daemon never dies");
}

#[test]
fn the_unaltered_proxy_passes_the_same_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let cand = common::mutant(dir.path(), "none");
    let names = ["connection-churn", "streaming-integrity", "daemon-faults", "garbage"];
    let (code, rep, text) = stress(&cand, None, &names);
    for n in names {
        assert_eq!(scenario(&rep, n)["status"], "ok", "{n}:\n{text}");
    }
    assert_eq!(code, 0, "{text}");
}

#[test]
fn two_binaries_side_by_side() {
    let remora = common::remora();
    let (code, rep, text) = stress(&remora, Some(&remora), &["process-churn"]);
    assert_eq!(code, 0, "{text}");
    let s = scenario(&rep, "process-churn");
    assert!(s["reference"]["invariants"].as_array().unwrap().len() >= 3, "{s}");
    let f = s["figures"].as_array().unwrap();
    let spawns = f.iter().find(|f| f["name"] == "spawns per second").expect("figure");
    assert!(
        spawns["reference"].as_f64().unwrap() > 0.0 && spawns["ratio"].as_f64().unwrap() > 0.0,
        "{spawns}"
    );
    assert!(
        text.contains("process-churn") && text.contains("ratio = candidate/reference"),
        "{text}"
    );
}

#[test]
fn unknown_scenario_is_an_error() {
    let out = common::run(&[
        "stress",
        "--candidate",
        common::remora().to_str().unwrap(),
        "--only",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario \"nope\""));
}
