//! Replays every committed fuzz corpus file (and every saved crash) through
//! the same checks the cargo-fuzz targets run, on stable Rust, so CI
//! exercises the corpora without a fuzzer.

use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../corpora/fuzz")
        .join(target)
}

/// Runs `check` on every file under `corpora/fuzz/<target>/` (including
/// `crashes/`); returns how many inputs ran.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let mut count = 0;
    let mut dirs = vec![corpus_dir(target)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(outcome.is_ok(), "{target}: {} fails its check", path.display());
                count += 1;
            }
        }
    }
    count
}

#[test]
fn ndjson_framing_corpus() {
    assert!(replay("ndjson_framing", remora::fuzzing::ndjson_framing) > 10);
}

#[test]
fn request_envelope_corpus() {
    assert!(replay("request_envelope", remora::fuzzing::request_envelope) > 10);
}

#[test]
fn params_decode_corpus() {
    assert!(replay("params_decode", remora::fuzzing::params_decode) > 10);
}

#[test]
fn tar_extract_corpus() {
    assert!(replay("tar_extract", remora::fuzzing::tar_extract) > 10);
}

#[test]
fn stdin_offset_corpus() {
    assert!(replay("stdin_offset", remora::fuzzing::stdin_offset) > 10);
}

#[test]
fn dispatch_line_corpus() {
    assert!(replay("dispatch_line", remora::fuzzing::dispatch_line) > 10);
}

#[test]
fn homeguard_paths_corpus() {
    assert!(replay("homeguard_paths", remora::fuzzing::homeguard_paths) > 10);
}
