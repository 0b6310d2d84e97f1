//! `process.*`: spawn, stdin, kill, killAndWait, reattach.
//!
//! The handlers validate params in the documented order and translate the
//! supervisor's answers ([`crate::process`]) into the wire's result
//! structs. Result structs are declared in wire field order; optional
//! fields are `omitempty` in Go, hence `skip_serializing_if`.

use super::{Follow, Outcome};
use crate::methods::launcher::LauncherParam;
use crate::process::{KilledBy, Launcher, ProcessManager, SpawnError, SpawnSpec, StdinResult, Termination};
use crate::protocol::method::ProcessMethod;
use crate::protocol::metrics::Metrics;
use crate::protocol::params::{ProcessParams, StdinParams};
use crate::protocol::rpc::{RpcError, STDIN_BACKPRESSURE, STDIN_OFFSET_GAP};
use crate::sys::process as sys;
use base64::Engine;
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::time::Duration;

const MSG_ID_REQUIRED: &str = "Process ID is required";
const MSG_COMMAND_REQUIRED: &str = "Command is required";
const MSG_NOT_FOUND: &str = "Process not found";
const MSG_NOT_RUNNING: &str = "Process not running";
const MSG_BAD_BASE64: &str = "Invalid base64 data";
const MSG_OFFSET_GAP: &str = crate::protocol::rpc::MSG_STDIN_OFFSET_GAP;

/// killAndWait grace when `timeoutMs` is absent or not positive.
const DEFAULT_GRACE_MS: i64 = 3000;

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Serialize)]
struct SpawnResult {
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<i32>,
    #[serde(rename = "startTime", skip_serializing_if = "Option::is_none")]
    start_time: Option<f64>,
}

/// The result of an accepted `process.stdin` call,
/// `{"success":true,"applied":N}` with `"duplicate":true` after it when set
/// (Go `omitempty`). Small and owned, so the quick path's reply carries it
/// to the connection's writer, which encodes it in place
/// ([`StdinAck::write_json`]): one encoder for both paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StdinAck {
    pub applied: u64,
    pub duplicate: bool,
}

impl StdinAck {
    /// Appends the result object as Go encodes the reference's struct
    /// (fields `success`, `applied`, `duplicate`, in that order).
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        // Writing into a Vec cannot fail.
        let _ = write!(out, r#"{{"success":true,"applied":{}"#, self.applied);
        if self.duplicate {
            out.extend_from_slice(br#","duplicate":true"#);
        }
        out.push(b'}');
    }
}

#[derive(Serialize)]
struct KillReply {
    success: bool,
}

#[derive(Serialize)]
struct KillAndWaitReply {
    found: bool,
    died: bool,
    #[serde(rename = "alreadyExited", skip_serializing_if = "is_false")]
    already_exited: bool,
    #[serde(skip_serializing_if = "is_false")]
    escalated: bool,
}

#[derive(Serialize)]
struct ReattachReply {
    found: bool,
    running: bool,
    #[serde(rename = "firstSeq")]
    first_seq: u64,
    #[serde(rename = "lastSeq")]
    last_seq: u64,
    #[serde(rename = "stdinApplied")]
    stdin_applied: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<i32>,
    #[serde(rename = "startTime", skip_serializing_if = "Option::is_none")]
    start_time: Option<f64>,
}

/// A `process.*` request's managed-launcher part: `None` for builds
/// without [`crate::protocol::build::Switch::ManagedLauncher`] (the
/// `launcher` param is then an unknown key), else the bound param.
pub(crate) type Managed = Option<LauncherParam>;

pub(crate) async fn handle(
    method: ProcessMethod,
    params: ProcessParams,
    managed: Managed,
    processes: &ProcessManager,
    metrics: &Metrics,
) -> Outcome {
    match method {
        ProcessMethod::Spawn => spawn(params, managed, processes).await,
        ProcessMethod::Stdin => match stdin(params.stdin(), processes, metrics) {
            Ok(ack) => {
                let mut result = Vec::with_capacity(48);
                ack.write_json(&mut result);
                Outcome::Result(result)
            }
            Err(error) => Outcome::Error(error.into()),
        },
        ProcessMethod::Kill => kill(params, processes),
        ProcessMethod::KillAndWait => kill_and_wait(params, processes).await,
        ProcessMethod::Reattach => reattach(params, processes, metrics),
    }
}

async fn spawn(p: ProcessParams, managed: Managed, processes: &ProcessManager) -> Outcome {
    if p.id.is_empty() {
        return Outcome::invalid_params(MSG_ID_REQUIRED);
    }
    if p.command.is_empty() {
        return Outcome::invalid_params(MSG_COMMAND_REQUIRED);
    }
    let launcher = managed.as_ref().and_then(|m| m.launcher.as_deref());
    if let Some(launcher) = launcher {
        if let Err(error) = crate::methods::launcher::check_spawn_launcher(launcher, &p.command) {
            crate::log_warn!(
                "[process.Manager] Failed to start process {}: {}",
                crate::base::logging::Untrusted(&p.id),
                crate::base::logging::Untrusted(&error.message)
            );
            return Outcome::Error(error);
        }
    }
    if processes.is_shutting_down() {
        // Teardown may already have run: a child started now would leak.
        return Outcome::NoReply;
    }
    // The launcher's program and its own arguments (the check above
    // refused an empty one).
    let launcher = launcher
        .and_then(|argv| argv.split_first())
        .map(|(program, args)| Launcher {
            program,
            args,
            not_started: crate::methods::launcher::not_started,
        });
    let spec = SpawnSpec {
        id: &p.id,
        command: &p.command,
        args: &p.args,
        cwd: &p.cwd,
        env: &p.env.0,
        no_agent_socket: p.disable_shell_agent_socket,
        launcher,
        strip_env: crate::methods::launcher::stripped_env(managed.is_some(), launcher.is_some()),
    };
    let process = match processes.spawn(&spec).await {
        Ok(process) => process,
        Err(SpawnError::Failed(message)) => return Outcome::internal(message),
        Err(SpawnError::Launcher(message)) => {
            return Outcome::Error(RpcError::new(crate::methods::launcher::LAUNCHER_NOT_STARTED, message))
        }
        Err(SpawnError::ShuttingDown) => return Outcome::NoReply,
    };
    let result = SpawnResult {
        success: true,
        pid: p.want_pid.then_some(process.pid),
        start_time: p.want_pid.then_some(process.start_time),
    };
    // The reply goes out with the follow, "after frame 0": it is written
    // before any frame of the new process, and the connection is
    // subscribed from seq 1.
    Outcome::Follow {
        follow: Follow {
            log: process.log.clone(),
            after: 0,
            reply_after: 0,
        },
        result: crate::base::gojson::to_go_json(&result),
    }
}

/// Go's `base64.StdEncoding.DecodeString`: padding required, `\r` and `\n`
/// skipped anywhere, non-zero trailing bits tolerated. The bytes come back
/// in a buffer of exactly their size, which the stdin queue then owns
/// (it charges a chunk its length, so the length is all it may hold).
fn decode_go_base64(data: &str) -> Option<Vec<u8>> {
    if data.bytes().any(|b| b == b'\r' || b == b'\n') {
        let cleaned: Vec<u8> = data.bytes().filter(|&b| b != b'\r' && b != b'\n').collect();
        return decode_exact(&cleaned);
    }
    decode_exact(data.as_bytes())
}

/// Decodes with Go's rules into a buffer of the decoded size: one
/// allocation (none for empty input). The size is computed from the
/// padding only as a hint; whatever the engine says about the input is
/// the verdict.
fn decode_exact(input: &[u8]) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::DecodeSliceError;
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let padding = input.iter().rev().take(2).take_while(|&&b| b == b'=').count();
    let size = (input.len() / 4 * 3).saturating_sub(padding);
    let mut out = vec![0u8; size];
    match ENGINE.decode_slice(input, &mut out) {
        Ok(written) if written == size => Some(out),
        Err(DecodeSliceError::DecodeError(_)) => None,
        // The hint was off (only for input the engine then judges):
        // decode the general way.
        _ => ENGINE.decode(input).ok().map(|mut bytes| {
            bytes.shrink_to_fit();
            bytes
        }),
    }
}

/// A `process.stdin` refusal whose code and text are fixed: the quick
/// path's reply carries only which one (a byte), and the writer encodes
/// the line, so a refused call (a client retrying against a full queue,
/// say) allocates no error text or reply line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdinRefusal {
    BadBase64,
    NotFound,
    NotRunning,
    OffsetGap,
    QueueFull,
}

impl StdinRefusal {
    /// The wire error: code and message.
    pub(crate) fn code_and_message(self) -> (i64, &'static str) {
        match self {
            StdinRefusal::BadBase64 => (crate::protocol::rpc::INVALID_PARAMS, MSG_BAD_BASE64),
            StdinRefusal::NotFound => (crate::protocol::rpc::INVALID_PARAMS, MSG_NOT_FOUND),
            StdinRefusal::NotRunning => (crate::protocol::rpc::INVALID_PARAMS, MSG_NOT_RUNNING),
            StdinRefusal::OffsetGap => (STDIN_OFFSET_GAP, MSG_OFFSET_GAP),
            StdinRefusal::QueueFull => (STDIN_BACKPRESSURE, crate::protocol::rpc::MSG_STDIN_BACKPRESSURE),
        }
    }
}

/// Why a `process.stdin` call did not go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StdinError {
    Refused(StdinRefusal),
    /// The child's stdin broke earlier; the text names the OS error.
    Failed(RpcError),
}

impl From<StdinError> for RpcError {
    fn from(e: StdinError) -> RpcError {
        match e {
            StdinError::Refused(r) => {
                let (code, message) = r.code_and_message();
                RpcError::new(code, message)
            }
            StdinError::Failed(e) => e,
        }
    }
}

/// `process.stdin`, on either path: base64, then the process, then the
/// verdict of [`crate::process::stdin`] as the process applies it.
pub(crate) fn stdin(p: StdinParams<'_>, processes: &ProcessManager, metrics: &Metrics) -> Result<StdinAck, StdinError> {
    let Some(data) = decode_go_base64(p.data) else {
        return Err(StdinError::Refused(StdinRefusal::BadBase64));
    };
    let Some(process) = processes.get(p.id) else {
        return Err(StdinError::Refused(StdinRefusal::NotFound));
    };
    let (result, enqueued) = process.write_stdin(p.offset, data);
    metrics.stdin_bytes_in.fetch_add(enqueued as u64, Ordering::Relaxed);
    match result {
        StdinResult::Accepted { applied, duplicate } => Ok(StdinAck { applied, duplicate }),
        StdinResult::NotRunning => Err(StdinError::Refused(StdinRefusal::NotRunning)),
        StdinResult::Gap => Err(StdinError::Refused(StdinRefusal::OffsetGap)),
        StdinResult::QueueFull => Err(StdinError::Refused(StdinRefusal::QueueFull)),
        StdinResult::Broken(why) => Err(StdinError::Failed(RpcError::internal(why))),
    }
}

fn kill(p: ProcessParams, processes: &ProcessManager) -> Outcome {
    let Some(process) = processes.get(&p.id) else {
        return Outcome::invalid_params(MSG_NOT_FOUND);
    };
    process.signal_if_running(sys::parse_signal(&p.signal), KilledBy::Client);
    Outcome::ok(&KillReply { success: true })
}

/// The grace of a killAndWait: non-positive means the default, and
/// anything above `cap_ms` (30000 ms, as the reference clamps it) is
/// `cap_ms`.
pub(crate) fn grace_ms(timeout_ms: i64, cap_ms: i64) -> i64 {
    if timeout_ms <= 0 {
        DEFAULT_GRACE_MS.min(cap_ms)
    } else {
        timeout_ms.min(cap_ms)
    }
}

async fn kill_and_wait(p: ProcessParams, processes: &ProcessManager) -> Outcome {
    if p.id.is_empty() {
        return Outcome::invalid_params(MSG_ID_REQUIRED);
    }
    let reply = |found, died, already_exited, escalated| {
        Outcome::ok(&KillAndWaitReply {
            found,
            died,
            already_exited,
            escalated,
        })
    };
    let Some(process) = processes.get(&p.id) else {
        return reply(false, false, false, false);
    };
    let cap_ms = i64::try_from(processes.kill_grace_cap().as_millis()).unwrap_or(i64::MAX);
    let grace = Duration::from_millis(grace_ms(p.timeout_ms, cap_ms).unsigned_abs());
    let signal = sys::parse_signal(&p.signal);
    match process
        .terminate(signal, grace, p.escalate.unwrap_or(true), KilledBy::Client)
        .await
    {
        Termination::AlreadyExited => reply(true, true, true, false),
        Termination::Died => reply(true, true, false, false),
        Termination::Survived => reply(true, false, false, false),
        Termination::Escalated { died } => reply(true, died, false, true),
    }
}

fn reattach(p: ProcessParams, processes: &ProcessManager, metrics: &Metrics) -> Outcome {
    // The reference's record (process-reattach.md) answers a missing or
    // empty id like spawn and killAndWait do; seed 000 is silent on it.
    if p.id.is_empty() {
        return Outcome::invalid_params(MSG_ID_REQUIRED);
    }
    let Some(process) = processes.get(&p.id) else {
        return Outcome::ok(&ReattachReply {
            found: false,
            running: false,
            first_seq: 0,
            last_seq: 0,
            stdin_applied: 0,
            pid: None,
            start_time: None,
        });
    };
    metrics.reattaches.fetch_add(1, Ordering::Relaxed);
    // lastSeq before running: the exit frame is appended only after the
    // exit is recorded, so a lastSeq that covers the exit frame always
    // pairs with running:false. (running:false with the exit frame not yet
    // covered is possible while the pipes drain; it is delivered live.)
    // Every connection that followed the process is cut at this lastSeq
    // (and closed once this connection follows): a reattach transfers.
    let last_seq = process.log.cut_followers();
    let running = !process.exited();
    let result = ReattachReply {
        found: true,
        running,
        first_seq: process.log.first_seq(),
        last_seq,
        stdin_applied: process.stdin_applied(),
        pid: p.want_pid.then_some(process.pid),
        start_time: p.want_pid.then_some(process.start_time),
    };
    // Replay seq > fromSeq; a fromSeq beyond the log replays nothing but
    // must not swallow future frames, so the cursor never starts past
    // lastSeq.
    let after = p.from_seq.min(last_seq);
    Outcome::Follow {
        follow: Follow {
            log: process.log.clone(),
            after,
            reply_after: last_seq,
        },
        result: crate::base::gojson::to_go_json(&result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_go_std_encoding() {
        assert_eq!(decode_go_base64("aGkK"), Some(b"hi\n".to_vec()));
        assert_eq!(decode_go_base64(""), Some(Vec::new()));
        assert_eq!(decode_go_base64("aGk="), Some(b"hi".to_vec()));
        assert_eq!(decode_go_base64("aG\r\nk="), Some(b"hi".to_vec()));
        assert_eq!(
            decode_go_base64("aGl="),
            Some(b"hi".to_vec()),
            "trailing bits tolerated"
        );
        assert_eq!(decode_go_base64("aGk"), None, "padding required");
        assert_eq!(decode_go_base64("aGk=aGk="), None);
        assert_eq!(decode_go_base64("a-_="), None, "URL alphabet rejected");
        assert_eq!(decode_go_base64("!!!!"), None);
    }

    /// Go's decoder as the engine gives it, without the size hint.
    fn decode_plainly(data: &str) -> Option<Vec<u8>> {
        use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
        let engine = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new()
                .with_decode_allow_trailing_bits(true)
                .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
        );
        let cleaned: Vec<u8> = data.bytes().filter(|&b| b != b'\r' && b != b'\n').collect();
        engine.decode(cleaned).ok()
    }

    proptest::proptest! {
        /// The sized decode answers as the engine does, in a buffer no
        /// larger than the bytes (what the stdin queue charges).
        #[test]
        fn the_sized_decode_is_the_engines(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            cut in 0usize..4,
            noise in proptest::sample::select(vec!["", "=", "==", "\r\n", "A", "-", "===", "=A"]),
            at in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let text = &text[..text.len().saturating_sub(cut)];
            let at = at.index(text.len() + 1);
            let text = format!("{}{noise}{}", &text[..at], &text[at..]);
            let got = decode_go_base64(&text);
            proptest::prop_assert_eq!(&got, &decode_plainly(&text), "{}", text);
            if let Some(got) = got {
                proptest::prop_assert_eq!(got.capacity(), got.len());
            }
        }
    }

    #[test]
    fn the_ack_encodes_as_the_reference_struct() {
        #[derive(Serialize)]
        struct StdinReply {
            success: bool,
            applied: u64,
            #[serde(skip_serializing_if = "is_false")]
            duplicate: bool,
        }
        for (applied, duplicate) in [(0, false), (9, true), (u64::MAX, false), (u64::MAX, true)] {
            let mut out = Vec::new();
            StdinAck { applied, duplicate }.write_json(&mut out);
            let want = crate::base::gojson::to_go_json(&StdinReply {
                success: true,
                applied,
                duplicate,
            });
            assert_eq!(out, want);
        }
    }

    #[test]
    fn grace_defaults_and_caps() {
        assert_eq!(grace_ms(0, 30_000), 3000);
        assert_eq!(grace_ms(-100, 30_000), 3000);
        assert_eq!(grace_ms(50, 30_000), 50);
        assert_eq!(grace_ms(8000, 30_000), 8000);
        assert_eq!(grace_ms(30_000, 30_000), 30_000);
        assert_eq!(grace_ms(30_001, 30_000), 30_000);
        assert_eq!(grace_ms(i64::MAX, 30_000), 30_000);
    }
}
