//! Stability: remora diffed against itself, three repeats per side, must
//! report zero differences and nothing unstable. The probe selection covers
//! every family that is deterministic by construction (the process families
//! are sampled); the full suite is `harness diff` itself.

use crate::common;

#[test]
fn remora_against_itself_three_times_is_identical() {
    let remora = common::remora();
    let bin = remora.to_str().unwrap();
    let mut args = vec![
        "diff",
        "--quiet",
        "--reference",
        bin,
        "--candidate",
        bin,
        "--repeat",
        "3",
        "--jobs",
        "2",
    ];
    for f in [
        "server-*",
        "envelope-*",
        "params-*",
        "files-stat-*",
        "files-read-*",
        "tar-zip-slip",
        "git-info-*",
        "cli-version",
        "cli-no-mode",
        "cli-token-*",
        "process-echo",
        "process-stdout-stderr",
        "stdin-echo",
        "reattach-after-exit",
        "bridge-ping",
    ] {
        args.push("--filter");
        args.push(f);
    }
    let out = common::run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "self-diff failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" 0 differ, 0 errors"), "{text}");
    assert!(!text.contains("unstable"), "{text}");
}

#[test]
fn record_then_check_round_trip_and_tamper_detection() {
    let remora = common::remora();
    let bin = remora.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let rec = common::run(&[
        "record",
        "--quiet",
        "--binary",
        bin,
        "--out",
        out_dir,
        "--filter",
        "server-ping",
    ]);
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    let path = dir.path().join("server-ping.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("L2 c1 reply 1\t{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pong\":true}}"),
        "{text}"
    );
    let chk = common::run(&[
        "check",
        "--quiet",
        "--binary",
        bin,
        "--transcripts",
        out_dir,
        "--filter",
        "server-ping",
    ]);
    assert!(chk.status.success(), "{}", String::from_utf8_lossy(&chk.stdout));
    // One changed byte in the committed transcript must fail the check and
    // point at the first differing byte.
    std::fs::write(&path, text.replace("\"pong\":true", "\"pong\":tru3")).unwrap();
    let chk = common::run(&[
        "check",
        "--quiet",
        "--binary",
        bin,
        "--transcripts",
        out_dir,
        "--filter",
        "server-ping",
    ]);
    let out = String::from_utf8_lossy(&chk.stdout);
    assert_eq!(chk.status.code(), Some(1), "{out}");
    assert!(out.contains("DIFFERS") && out.contains('^'), "{out}");
    // Without a transcript the probe is unrecorded, which does not fail.
    let chk = common::run(&[
        "check",
        "--quiet",
        "--binary",
        bin,
        "--transcripts",
        out_dir,
        "--filter",
        "server-version",
    ]);
    assert!(chk.status.success());
    assert!(String::from_utf8_lossy(&chk.stdout).contains("1 unrecorded"));
}

#[test]
fn parse_errors_name_the_probe_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.probe"),
        "desc x\ncall c1 1 server.ping\nfrobnicate\n",
    )
    .unwrap();
    let out = common::run(&["list", "--probes", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.probe:3: unknown directive \"frobnicate\""), "{err}");
}

#[test]
fn every_committed_probe_parses() {
    let out = common::run(&["list"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let n: usize = text.lines().last().unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(n >= 150, "only {n} probes");
}
