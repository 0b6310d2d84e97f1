//! The checks behind the cargo-fuzz targets in `fuzz/`, compiled with the
//! `fuzzing` feature. Each entry point takes the raw fuzzer input, so the
//! fuzzers and the stable-Rust corpus replay test (`tests/it/fuzz_corpora.rs`)
//! run exactly the same code. Every check panics on a violated property.

use crate::base::gojson::{self, bind::GoEncode, Value};
use crate::base::ndjson::{Framed, LineBuffer};
use crate::process::stdin::{plan_stdin_write, StdinPlan};
use crate::protocol::params::{GitParams, PathParams, ProcessParams};
use crate::protocol::rpc::{self, Checked, Envelope};
use arbitrary::{Arbitrary, Unstructured};

mod dispatch_line;
mod homeguard_paths;
pub use dispatch_line::dispatch_line;
pub use homeguard_paths::homeguard_paths;

/// Structure-aware input for the framing target: the line cap to use,
/// byte segments (long runs are cheap to describe, so the cap is
/// reachable) and the sizes of the reads that deliver them.
///
/// The cap is 1..=[`FUZZ_CAP_MAX`] bytes, not the daemon's 1 MiB: the
/// framing code takes the cap as a parameter and has no other size
/// constant, so a small cap exercises the same boundaries (exactly at the
/// cap, one under, a `\r` counted, a read straddling it) with streams of
/// kilobytes. Streams of a megabyte made the target run at ~22 exec/s;
/// the real cap is checked by the unit tests in `frame.rs` and
/// [`tests::framing_model_agrees_on_the_cap`].
#[derive(Debug, Arbitrary)]
pub struct FramingInput {
    pub cap: u16,
    pub segments: Vec<Segment>,
    pub read_sizes: Vec<u16>,
}

/// The largest line cap the framing target picks.
pub const FUZZ_CAP_MAX: usize = 4096;

#[derive(Debug, Arbitrary)]
pub enum Segment {
    Bytes(Vec<u8>),
    Run { byte: u8, len: u32 },
}

/// How far past the cap the framing target's streams may run.
const STREAM_PAST_CAP: usize = 8192;

/// What the simple model says a stream frames into.
#[derive(Debug, PartialEq, Eq)]
pub struct Framing {
    pub lines: Vec<Vec<u8>>,
    pub too_long: bool,
}

/// The model: split on `\n`, drop one trailing `\r`, stop at the first line
/// of `cap` or more bytes; an unterminated tail is a line at EOF.
pub fn model_framing(stream: &[u8], cap: usize) -> Framing {
    let mut lines = Vec::new();
    let mut pieces = stream.split(|&b| b == b'\n').peekable();
    while let Some(piece) = pieces.next() {
        let last = pieces.peek().is_none();
        if piece.len() >= cap {
            return Framing { lines, too_long: true };
        }
        if last && piece.is_empty() {
            break;
        }
        lines.push(piece.strip_suffix(b"\r").unwrap_or(piece).to_vec());
    }
    Framing { lines, too_long: false }
}

/// Runs a `LineBuffer` capped at `cap` over `stream` delivered in reads of
/// the given sizes.
pub fn run_framing(stream: &[u8], read_sizes: &[u16], cap: usize) -> Framing {
    let mut buffer = LineBuffer::with_cap(cap);
    let mut lines = Vec::new();
    let mut offset = 0;
    let mut reads = read_sizes.iter().cycle();
    loop {
        loop {
            match buffer.next_line() {
                Some(Framed::Line(line)) => lines.push(line.to_vec()),
                Some(Framed::TooLong) => return Framing { lines, too_long: true },
                None => break,
            }
        }
        assert!(buffer.capacity() <= cap, "buffer grew past the cap");
        if offset == stream.len() {
            if let Some(line) = buffer.take_final() {
                lines.push(line.to_vec());
            }
            return Framing { lines, too_long: false };
        }
        // Reads are at least 1/2048 of the stream so a multi-MiB stream in
        // one-byte reads stays fast enough to fuzz.
        let floor = stream.len() / 2048 + 1;
        let want = reads.next().map_or(usize::MAX, |&n| usize::from(n).max(floor));
        let end = stream.len().min(offset.saturating_add(want));
        let taken = buffer.feed(&stream[offset..end]);
        assert!(taken > 0, "reader made no progress with {} pending", buffer.pending());
        offset += taken;
    }
}

/// Target `ndjson_framing`.
pub fn ndjson_framing(data: &[u8]) {
    let Ok(input) = FramingInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let cap = 1 + usize::from(input.cap) % FUZZ_CAP_MAX;
    let max_stream = cap + STREAM_PAST_CAP;
    let mut stream = Vec::new();
    for segment in &input.segments {
        match segment {
            Segment::Bytes(bytes) => stream.extend_from_slice(bytes),
            Segment::Run { byte, len } => {
                let len = (*len as usize).min(max_stream.saturating_sub(stream.len()));
                stream.resize(stream.len() + len, *byte);
            }
        }
        if stream.len() >= max_stream {
            stream.truncate(max_stream);
            break;
        }
    }
    assert_eq!(
        run_framing(&stream, &input.read_sizes, cap),
        model_framing(&stream, cap)
    );
}

const TOKEN: &[u8] = b"fuzz-token";

/// Target `request_envelope`: one line through parse → auth → version →
/// method. The reply must be one line of valid JSON with the envelope keys
/// in order, and a parse failure must carry `"id":null`.
pub fn request_envelope(data: &[u8]) {
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return;
    }
    let reply = match rpc::check(line, TOKEN, crate::protocol::build::NEWEST) {
        Checked::Valid(request) => {
            assert!(rpc::METHODS.contains(&request.method.name()));
            rpc::success_line(&request.id, b"{}")
        }
        Checked::Rejected {
            id,
            error,
            unauthorized,
        } => {
            if error.code == rpc::PARSE_ERROR {
                assert_eq!(id, Value::Null);
            }
            if let Some(method) = unauthorized {
                // The warning the daemon logs for it, at any nesting and
                // length: one line, bounded.
                let line = crate::base::logging::format_line(
                    crate::base::logging::Level::Warn,
                    format_args!(
                        "[Server] Unauthorized request: method={}, id={}",
                        crate::base::logging::Untrusted(&method),
                        rpc::id_for_log(&id)
                    ),
                );
                assert_eq!(line.matches('\n').count(), 1, "a log line split: {line:?}");
                assert!(line.len() <= 4096, "an unbounded log line: {} bytes", line.len());
            }
            rpc::error_line(&id, &error)
        }
    };
    assert_eq!(reply.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(reply.last(), Some(&b'\n'));
    // The reply must read back with the Go-compatible parser (serde_json
    // stops at 128 levels, and ids may nest far deeper).
    let parsed = gojson::parse(&reply).expect("reply is valid JSON");
    let Value::Object(members) = &parsed else {
        panic!("reply is not an object");
    };
    assert_eq!(
        members.first(),
        Some(&("jsonrpc".to_string(), Value::String("2.0".into())))
    );
    assert!(members.iter().any(|(k, _)| k == "id"));
    assert!(reply.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":"));
    // serde_json is stricter than Go (no invalid UTF-8, no lone surrogates,
    // 128 levels): whatever it accepts, the Go-compatible parser accepts.
    if serde_json::from_slice::<serde_json::Value>(line).is_ok() {
        assert!(
            gojson::parse(line).is_ok(),
            "serde_json accepted a line the Go parser rejected"
        );
    }
}

/// Target `params_decode`: any JSON value into every params struct. A
/// successful decode must survive an encode/decode round trip: typed params
/// come back equal, and the encoded form is a fixed point (the envelope's
/// untyped id may change form once, as Go re-encodes numbers via float64).
pub fn params_decode(data: &[u8]) {
    let Ok(value) = gojson::parse(data) else {
        return;
    };
    for same in [
        round_trip(&value, PathParams::from_go_value),
        round_trip(&value, GitParams::from_go_value),
        round_trip(&value, ProcessParams::from_go_value),
    ] {
        assert_ne!(same, Some(false), "typed params changed across a round trip");
    }
    round_trip(&value, Envelope::from_go_value);
}

/// Decodes, encodes, decodes again. Returns whether the two decodes are
/// equal (`None` if the first decode failed); asserts the fixed point.
fn round_trip<P: GoEncode + PartialEq>(
    value: &Value,
    decode: impl Fn(&Value) -> Result<P, gojson::DecodeError>,
) -> Option<bool> {
    let decoded = decode(value).ok()?;
    let encode = |p: &P| gojson::value_to_json(&p.to_go_value().unwrap_or(Value::Null));
    let text = encode(&decoded);
    let reparsed = gojson::parse(&text).expect("encoded params parse");
    let again = decode(&reparsed).expect("encoded params decode");
    assert_eq!(text, encode(&again), "encoding is not a fixed point");
    Some(decoded == again)
}

/// Input of the stdin-offset target: a starting high-water mark (anywhere
/// in u64, so the limits are reached) and a sequence of writes.
#[derive(Debug, Arbitrary)]
pub struct StdinInput {
    pub start_applied: u64,
    pub writes: Vec<StdinWrite>,
}

#[derive(Debug, Arbitrary)]
pub struct StdinWrite {
    pub offset: Option<u64>,
    pub len: u16,
}

/// The resumable-stdin rules written the obvious way, as the oracle.
fn model_stdin(applied: u64, offset: Option<u64>, len: usize) -> StdinPlan {
    // The bullets of the contract, in the order the document lists them:
    // append, gap, duplicate, partial overlap.
    let (applied, len) = (i128::from(applied), len as i128);
    let to_u64 = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
    match offset.map(i128::from) {
        None => StdinPlan::Write {
            skip: 0,
            new_applied: to_u64(applied + len),
        },
        Some(o) if o == applied => StdinPlan::Write {
            skip: 0,
            new_applied: to_u64(o + len),
        },
        Some(o) if o > applied => StdinPlan::Gap,
        Some(o) if o + len <= applied => StdinPlan::Duplicate,
        Some(o) => StdinPlan::Write {
            skip: (applied - o) as usize,
            new_applied: to_u64(o + len),
        },
    }
}

/// Writes the byte-stream replay of `stdin_offset` takes from one input,
/// and the largest chunk it cuts (lengths are taken modulo it). The plans
/// do not depend on scale; megabyte streams only made the target slow
/// (191 exec/s on 512cafc).
const STDIN_REPLAY_WRITES: usize = 256;
const STDIN_REPLAY_CHUNK: u64 = 4096;

/// Target `stdin_offset`. Two checks:
/// 1. from an arbitrary start (offsets near the u64 limit included)
///    every plan equals the model and `applied` never goes down;
/// 2. replaying writes cut from one logical byte stream (at offsets a
///    reconnecting client could send), the bytes delivered to the child are
///    always exactly the stream's first `applied` bytes.
pub fn stdin_offset(data: &[u8]) {
    let Ok(input) = StdinInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut applied = input.start_applied;
    for w in &input.writes {
        let plan = plan_stdin_write(applied, w.offset, usize::from(w.len), true);
        assert_eq!(
            plan,
            model_stdin(applied, w.offset, usize::from(w.len)),
            "{applied} {w:?}"
        );
        if let StdinPlan::Write { skip, new_applied } = plan {
            assert!(skip <= usize::from(w.len));
            assert!(new_applied >= applied, "applied went down");
            applied = new_applied;
        }
    }

    let stream_byte = |i: u64| (i.wrapping_mul(31) >> 3) as u8;
    let mut delivered: Vec<u8> = Vec::new();
    let mut checked = 0;
    let mut applied = 0u64;
    for w in input.writes.iter().take(STDIN_REPLAY_WRITES) {
        // Offsets a real client produces: anywhere up to a little past what
        // it knows was applied (a gap), or absent (legacy append).
        let offset = w.offset.map(|o| o % applied.saturating_add(64));
        let start = offset.unwrap_or(applied);
        let len = u64::from(w.len) % STDIN_REPLAY_CHUNK;
        let chunk: Vec<u8> = (start..start + len).map(stream_byte).collect();
        match plan_stdin_write(applied, offset, chunk.len(), true) {
            StdinPlan::Write { skip, new_applied } => {
                delivered.extend_from_slice(&chunk[skip..]);
                applied = new_applied;
            }
            StdinPlan::Duplicate => assert!(start + (chunk.len() as u64) <= applied && start < applied),
            StdinPlan::Gap => assert!(start > applied),
            StdinPlan::NotRunning => unreachable!("planned for a running process"),
        }
        assert_eq!(delivered.len() as u64, applied);
        // `delivered` only ever grows at its end, and what was there is
        // already checked: check what this write added.
        assert!(
            delivered[checked..]
                .iter()
                .zip(checked as u64..)
                .all(|(b, i)| *b == stream_byte(i)),
            "delivered bytes diverge"
        );
        checked = delivered.len();
    }
}

/// One entry of a generated archive. Names come from a small alphabet of
/// path pieces so that `..`, absolute names and nesting are common.
#[derive(Debug, Arbitrary)]
pub struct TarEntry {
    pub name: Vec<NamePiece>,
    pub kind: EntryKind,
    pub mode: u16,
    pub content: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum NamePiece {
    Slash,
    DotDot,
    Dot,
    A,
    B,
    Synced,
    Byte(u8),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Hardlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Other(u8),
}

impl EntryKind {
    /// The header typeflag byte this kind is written with.
    pub fn typeflag(self) -> u8 {
        match self {
            EntryKind::File => b'0',
            EntryKind::Dir => b'5',
            EntryKind::Symlink => b'2',
            EntryKind::Hardlink => b'1',
            EntryKind::CharDevice => b'3',
            EntryKind::BlockDevice => b'4',
            EntryKind::Fifo => b'6',
            EntryKind::Other(c) => c,
        }
    }
}

#[derive(Debug, Arbitrary)]
pub struct TarInput {
    pub entries: Vec<TarEntry>,
    /// Cut the compressed archive to this many bytes (when shorter).
    pub truncate: Option<u16>,
    /// Flip one byte of the compressed archive.
    pub flip: Option<(u16, u8)>,
    /// Pre-create destDir content (it must be wiped).
    pub stale_dest_file: bool,
}

fn entry_name(pieces: &[NamePiece]) -> Vec<u8> {
    let mut name = Vec::new();
    for piece in pieces.iter().take(12) {
        match piece {
            NamePiece::Slash => name.push(b'/'),
            NamePiece::DotDot => name.extend_from_slice(b".."),
            NamePiece::Dot => name.push(b'.'),
            NamePiece::A => name.push(b'a'),
            NamePiece::B => name.extend_from_slice(b"b/"),
            NamePiece::Synced => name.extend_from_slice(b".synced"),
            NamePiece::Byte(b) => name.push(*b),
        }
    }
    if name.is_empty() {
        name.push(b'a');
    }
    name.truncate(100);
    name
}

/// A ustar header written by hand, so that hostile names are possible.
fn ustar_header(name: &[u8], typeflag: u8, mode: u16, size: usize) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    let octal = |field: &mut [u8], value: u64| {
        let text = format!("{:0width$o}", value, width = field.len() - 1);
        let digits = field.len() - 1;
        field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    };
    octal(&mut h[100..108], u64::from(mode & 0o7777));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size as u64);
    octal(&mut h[136..148], 0);
    h[156] = typeflag;
    if typeflag == b'1' || typeflag == b'2' {
        h[157..158].copy_from_slice(b"a");
    }
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

/// Builds the gzip'd tar described by `input`.
pub fn build_archive(input: &TarInput) -> Vec<u8> {
    let mut tar = Vec::new();
    for entry in input.entries.iter().take(24) {
        let typeflag = entry.kind.typeflag();
        let content: &[u8] = if typeflag == b'0' { &entry.content } else { &[] };
        tar.extend_from_slice(&ustar_header(
            &entry_name(&entry.name),
            typeflag,
            entry.mode,
            content.len(),
        ));
        tar.extend_from_slice(content);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    tar.extend_from_slice(&[0u8; 1024]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).expect("in-memory gzip");
    let mut archive = gz.finish().expect("in-memory gzip");
    if let Some((at, byte)) = input.flip {
        if let Some(b) = archive.get_mut(usize::from(at)) {
            *b ^= byte.max(1);
        }
    }
    if let Some(len) = input.truncate {
        archive.truncate(usize::from(len));
    }
    archive
}

/// Target `tar_extract`: extraction never panics, never creates anything
/// outside destDir, never leaves a link, device or fifo, gives every file
/// 0600 and every directory 0700, consumes the archive, and on success
/// reports exactly the regular files on disk (the `.synced` marker aside).
pub fn tar_extract(data: &[u8]) {
    let Ok(input) = TarInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let scratch = TarScratch::stage(&input);
    let result = crate::tarx::extract(&scratch.archive, &scratch.dest, crate::tarx::Rules::default());
    scratch.assert_contained(&result);
    let dest = &scratch.dest;
    if !dest.exists() {
        assert!(!result.success);
        return;
    }
    assert!(!dest.join("stale").exists() || !result.success, "destDir not wiped");
    let files = count_extracted_files(dest);
    if result.success {
        assert!(dest.join(".synced").is_file());
        assert_file_count(&input, &result, dest, files);
    }
}

/// The directory one `tar_extract` run works in: the archive and destDir,
/// and a sibling of destDir that extraction must never write into.
struct TarScratch {
    dir: tempfile::TempDir,
    outside: std::path::PathBuf,
    dest: std::path::PathBuf,
    archive: std::path::PathBuf,
}

impl TarScratch {
    /// Writes the archive `input` describes, and the stale destDir content
    /// it asks for.
    fn stage(input: &TarInput) -> TarScratch {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside");
        let dest = dir.path().join("dest");
        let archive = dir.path().join("in.tgz");
        std::fs::create_dir(&outside).expect("mkdir");
        std::fs::write(&archive, build_archive(input)).expect("write archive");
        if input.stale_dest_file {
            std::fs::create_dir(&dest).expect("mkdir dest");
            std::fs::write(dest.join("stale"), b"old").expect("write stale");
        }
        TarScratch {
            dir,
            outside,
            dest,
            archive,
        }
    }

    /// The archive is consumed, and nothing but destDir (and the untouched
    /// sibling) is left in the scratch directory.
    fn assert_contained(&self, result: &crate::tarx::ExtractResult) {
        assert!(!self.archive.exists(), "archive not consumed: {result:?}");
        let mut top: Vec<_> = std::fs::read_dir(self.dir.path())
            .expect("readdir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        top.sort();
        assert!(
            top.iter().all(|n| n == "dest" || n == "outside"),
            "created outside destDir: {top:?}"
        );
        assert_eq!(
            std::fs::read_dir(&self.outside).expect("readdir").count(),
            0,
            "wrote into a sibling"
        );
    }
}

/// Walks destDir (a loop, not recursion): only directories (0700) and
/// single-link regular files (0600, the pre-existing `stale` aside).
/// Returns the number of regular files, the `.synced` marker not counted.
fn count_extracted_files(dest: &std::path::Path) -> u64 {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut files = 0u64;
    let mut stack = vec![dest.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readdir").flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).expect("lstat");
            let kind = meta.file_type();
            let mode = meta.permissions().mode() & 0o7777;
            if kind.is_dir() {
                assert_eq!(mode, 0o700, "{}", entry.path().display());
                stack.push(entry.path());
            } else if kind.is_file() {
                assert_eq!(meta.nlink(), 1, "hard link at {}", entry.path().display());
                if entry.path() == dest.join(".synced") {
                    continue;
                }
                if !(dir == dest && entry.file_name() == "stale") {
                    assert_eq!(mode, 0o600, "{}", entry.path().display());
                }
                files += 1;
            } else {
                panic!("extraction left a non-regular entry at {}", entry.path().display());
            }
        }
    }
    files
}

/// The paths under `dest` of the archive's regular entries, in order.
/// fileCount counts regular entries, as Go's loop does: an entry written
/// twice counts twice, and one landing on the root `.synced` counts
/// before the marker truncates it. Typeflag NUL is a regular file unless
/// the name ends in `/` (Go's TypeRegA).
fn regular_entry_paths(input: &TarInput, dest_bytes: &[u8]) -> Vec<Vec<u8>> {
    input
        .entries
        .iter()
        .take(24)
        // A header's name field ends at its first NUL, as tar readers
        // (Go's too) parse it.
        .map(|e| {
            let mut name = entry_name(&e.name);
            name.truncate(name.iter().position(|&b| b == 0).unwrap_or(name.len()));
            (e.kind, name)
        })
        .filter(|(kind, name)| match kind.typeflag() {
            b'0' => true,
            0 => !name.ends_with(b"/"),
            _ => false,
        })
        .map(|(_, name)| crate::base::gopath::join(&[dest_bytes, &name]))
        .collect()
}

/// A successful extraction's fileCount against the archive and the
/// `files` found on disk.
fn assert_file_count(input: &TarInput, result: &crate::tarx::ExtractResult, dest: &std::path::Path, files: u64) {
    let dest_bytes = dest.as_os_str().as_encoded_bytes();
    let marker = crate::base::gopath::join(&[dest_bytes, b".synced"]);
    let regular = regular_entry_paths(input, dest_bytes);
    let corrupted = input.flip.is_some() || input.truncate.is_some();
    if corrupted {
        // A damaged stream no longer describes `entries`; what holds is
        // that every file on disk was counted.
        assert!(result.file_count >= Some(files), "fileCount below the files on disk");
        return;
    }
    assert_eq!(
        result.file_count,
        Some(regular.len() as u64),
        "fileCount is not the regular entries"
    );
    // Metadata entries (long names, PAX) can rename what follows; the
    // on-disk comparison is exact only without them.
    let renames = input
        .entries
        .iter()
        .take(24)
        .any(|e| matches!(e.kind.typeflag(), b'L' | b'K' | b'x' | b'X' | b'g'));
    if !renames {
        let distinct: std::collections::BTreeSet<&Vec<u8>> = regular.iter().filter(|p| **p != marker).collect();
        assert_eq!(
            files,
            distinct.len() as u64,
            "files on disk differ from the archive's regular entries"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_model_agrees_on_the_cap() {
        use crate::base::ndjson::MAX_LINE;
        let mut stream = vec![b'a'; MAX_LINE - 1];
        stream.extend_from_slice(b"\nb\r\n");
        stream.extend(std::iter::repeat_n(b'c', MAX_LINE));
        let model = model_framing(&stream, MAX_LINE);
        assert!(model.too_long);
        assert_eq!(model.lines.len(), 2);
        assert_eq!(run_framing(&stream, &[1000, 7, 65535], MAX_LINE), model);
    }

    #[test]
    fn entry_points_accept_anything() {
        for data in [&b""[..], b"\xff\xfe", b"{\"jsonrpc\":\"2.0\"}", b"[[[[", b"null"] {
            ndjson_framing(data);
            request_envelope(data);
            params_decode(data);
            stdin_offset(data);
            tar_extract(data);
            dispatch_line(data);
            homeguard_paths(data);
        }
    }
}
