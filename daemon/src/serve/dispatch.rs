//! From a request line to what to send: envelope checks (see
//! [`crate::protocol::rpc`]), the params gate, the method table, and panic
//! isolation. The answer is a [`Reply`] the connection's writer carries
//! out; nothing here sees the connection.
//!
//! The connection's reader has one way in, [`Dispatcher::on_line`], and
//! gets back one [`Step`]: a reply answered on the reader (a quick or an
//! instant request), a task to run, or nothing. Which line is which is
//! decided here, in this order:
//!
//! 1. a plain `server.ping` or `process.stdin` ([`quick`]): answered
//!    without building a tree;
//! 2. a line of at most [`INSTANT_LINE_MAX`] bytes, or any line before the
//!    connection showed the token, is validated on the reader
//!    ([`check_line`]); a rejection, `server.ping` or `capabilities`
//!    ([`is_instant`]) is answered there too;
//! 3. everything else becomes a task: validated (if not yet) and run in a
//!    task of its own, as a Go daemon runs a goroutine per request.
//!
//! The params gate is the one place that decides `-32602 Invalid params`
//! for absent or mistyped params: it runs after method resolution, only for
//! the files/git/launcher/process namespaces; `server.*` ignores params entirely, and
//! `plugins.*` binds its own (its -32602 carries the decoder's detail).

use crate::base::gojson::Value;
use crate::base::logging::Quota;
use crate::methods::launcher::{LauncherParam, LauncherParams};
use crate::methods::process::{StdinAck, StdinError, StdinRefusal};
use crate::methods::{self, Follow, Outcome};
use crate::protocol::build::Switch;
use crate::protocol::method::{Method, ProcessMethod, ServerMethod};
use crate::protocol::metrics;
use crate::protocol::params::{GitParams, HomeExpansion, PathParams, ProcessParams};
use crate::protocol::rpc::quick::{Quick, ShortId};
use crate::protocol::rpc::{self, Checked, Request, RpcError};
use crate::serve::state::Daemon;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

/// What the connection's writer sends for one request.
pub(crate) enum Reply {
    /// One complete NDJSON line, newline included.
    Line(Vec<u8>),
    /// Stream a log, and write the reply `line` at the place in it the
    /// [`Follow`] names (spawn and reattach, whose reply is ordered with
    /// the stream).
    Follow { follow: Follow, line: Vec<u8> },
    /// The reply to a plain `server.ping` ([`rpc::quick`]), written by the
    /// writer straight into its buffer: no allocation per ping.
    Pong(ShortId),
    /// The success reply to a plain `process.stdin` ([`rpc::quick`]),
    /// written by the writer straight into its buffer.
    StdinAck(ShortId, PackedAck),
    /// A plain `process.stdin` refused with a fixed code and text
    /// ([`rpc::quick`]), written by the writer straight into its buffer.
    StdinRefused(ShortId, StdinRefusal),
}

/// A [`StdinAck`] stored byte-aligned, so [`Reply::StdinAck`] fits in the
/// room the largest variant already takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PackedAck {
    applied: [u8; 8],
    duplicate: bool,
}

impl PackedAck {
    pub(crate) fn new(ack: StdinAck) -> PackedAck {
        PackedAck {
            applied: ack.applied.to_ne_bytes(),
            duplicate: ack.duplicate,
        }
    }

    pub(crate) fn ack(&self) -> StdinAck {
        StdinAck {
            applied: u64::from_ne_bytes(self.applied),
            duplicate: self.duplicate,
        }
    }
}

/// The result of `server.ping`, as every ping reply carries it.
pub(crate) const PONG_RESULT: &[u8] = br#"{"pong":true}"#;

impl Reply {
    /// The bytes this reply holds until it is written: its line, or for
    /// the variants the writer encodes, their own size.
    pub(crate) fn held_bytes(&self) -> usize {
        match self {
            Reply::Line(line) | Reply::Follow { line, .. } => line.len(),
            Reply::Pong(_) | Reply::StdinAck(..) | Reply::StdinRefused(..) => std::mem::size_of::<Reply>(),
        }
    }

    /// Appends the reply's line to `out`, for the variants that are one
    /// line by themselves ([`Reply::Follow`] is ordered by the writer).
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Line(line) => out.extend_from_slice(line),
            Reply::Pong(id) => rpc::write_success_line(out, id.as_bytes(), PONG_RESULT),
            Reply::StdinAck(id, ack) => {
                rpc::write_success_line_with(out, id.as_bytes(), |out| ack.ack().write_json(out))
            }
            Reply::StdinRefused(id, refusal) => {
                let (code, message) = refusal.code_and_message();
                rpc::write_error_line(out, id.as_bytes(), code, message)
            }
            Reply::Follow { line, .. } => out.extend_from_slice(line),
        }
    }
}

/// What the connection's reader does with one line.
pub(crate) enum Step<T> {
    /// Send this now: the line was answered on the reader.
    Reply(Reply),
    /// Run this future in a task of its own and send what it returns.
    Task(T),
    /// Send nothing: a blank line, or a line whose validation or instant
    /// handler panicked (logged), or an instant request with no reply.
    Skip,
}

/// One line's [`Step`], and whether the line carried the right token
/// (the connection is then authenticated).
pub(crate) struct Dispatched<T> {
    pub step: Step<T>,
    pub authenticates: bool,
}

/// What every line of one connection is dispatched with: the daemon, the
/// connection's quota of unauthorized-request warnings, and which
/// handlers its requests reach.
pub(crate) struct Dispatcher {
    daemon: Arc<Daemon>,
    warnings: Arc<Quota>,
    handlers: Handlers,
}

impl Dispatcher {
    /// A dispatcher that logs at most `warnings` unauthorized requests.
    pub(crate) fn new(daemon: Arc<Daemon>, warnings: u32, handlers: Handlers) -> Dispatcher {
        Dispatcher {
            daemon,
            warnings: Arc::new(Quota::new(warnings)),
            handlers,
        }
    }

    /// Unauthorized requests that were past the warning quota (not logged).
    pub(crate) fn unlogged_warnings(&self) -> u64 {
        self.warnings.suppressed()
    }

    /// The reader's one way in: decides what one framed line (its `\n`
    /// and one `\r` already gone) becomes, answering quick and instant
    /// requests on the spot (see the module comment for the order).
    /// `authenticated`: whether the connection already showed the token.
    ///
    /// The task future owns what it needs, so it can outlive the line and
    /// run in a task of its own.
    pub(crate) async fn on_line(
        &self,
        line: &[u8],
        authenticated: bool,
    ) -> Dispatched<impl Future<Output = Option<Reply>> + Send + 'static> {
        // Only a line with nothing in it gets no reply. A line of spaces is
        // a line that does not decode: -32700 with id null, as 90fca6e6
        // and f6010b97 answer it.
        if line.is_empty() {
            return Dispatched {
                step: Step::Skip,
                authenticates: false,
            };
        }
        // Plain pings and stdin calls, of any length, are answered here
        // without a tree; a stdin call never waits, it is queued or
        // refused at once.
        if let Some(reply) = quick(line, &self.daemon, self.handlers) {
            return Dispatched {
                step: Step::Reply(reply),
                authenticates: true,
            };
        }
        // Until the token is seen, every line is checked here, one at a
        // time, so no unauthenticated request waits in a task.
        let (pending, authenticates) = if line.len() <= INSTANT_LINE_MAX || !authenticated {
            let Some(checked) = check_line(line, &self.daemon) else {
                return Dispatched {
                    step: Step::Skip,
                    authenticates: false,
                };
            };
            let authenticates = checked.authenticated();
            if is_instant(&checked) {
                let step = match answer_instant(checked, &self.daemon, &self.warnings, self.handlers).await {
                    Some(reply) => Step::Reply(reply),
                    None => Step::Skip,
                };
                return Dispatched { step, authenticates };
            }
            (Pending::Checked(checked), authenticates)
        } else {
            (Pending::Line(line.to_vec()), false)
        };
        let task = run_task(pending, self.daemon.clone(), self.warnings.clone(), self.handlers);
        Dispatched {
            step: Step::Task(task),
            authenticates,
        }
    }
}

/// A request line on its way to its task: short lines were already
/// validated on the reader (to find instant ones), long ones are parsed in
/// the task.
enum Pending {
    Checked(Checked),
    Line(Vec<u8>),
}

/// A request's task: validates a long line, runs the request, and returns
/// what to send, if anything.
async fn run_task(pending: Pending, daemon: Arc<Daemon>, warnings: Arc<Quota>, handlers: Handlers) -> Option<Reply> {
    let checked = match pending {
        Pending::Checked(checked) => checked,
        Pending::Line(line) => {
            let checked = check_line(&line, &daemon);
            // The line is not kept while the request runs.
            drop(line);
            checked?
        }
    };
    handle_checked(checked, &daemon, &warnings, handlers).await
}

/// Answers a plain `server.ping` or `process.stdin` ([`rpc::quick`])
/// without building a tree; `None` sends the line down the full path,
/// which answers any other line (and any such request in an unusual form)
/// itself. A stdin call is handed to the same handler as on the full path
/// ([`methods::process::stdin`]), so every verdict comes from one place;
/// its ack and its fixed refusals are encoded by the writer. Stdin
/// calls are left to the full path unless `handlers` is
/// [`Handlers::All`].
fn quick(line: &[u8], daemon: &Daemon, handlers: Handlers) -> Option<Reply> {
    match rpc::quick::request(line, &daemon.token)? {
        Quick::Ping(id) => {
            daemon
                .metrics
                .count_request(Method::Server(ServerMethod::Ping), metrics::Outcome::Ok);
            Some(Reply::Pong(id))
        }
        Quick::Stdin(id, params) if handlers == Handlers::All => {
            let method = Method::Process(ProcessMethod::Stdin);
            let verdict = std::panic::catch_unwind(AssertUnwindSafe(|| {
                methods::process::stdin(params, &daemon.processes, &daemon.metrics)
            }))
            .unwrap_or_else(|_| Err(StdinError::Failed(handler_panicked(method))));
            let (reply, class) = match verdict {
                Ok(ack) => (Reply::StdinAck(id, PackedAck::new(ack)), metrics::Outcome::Ok),
                Err(StdinError::Refused(refusal)) => (Reply::StdinRefused(id, refusal), metrics::Outcome::Error),
                Err(StdinError::Failed(error)) => (
                    Reply::Line(rpc::error_line_for_id_json(id.as_bytes(), &error)),
                    metrics::Outcome::Error,
                ),
            };
            daemon.metrics.count_request(method, class);
            Some(reply)
        }
        Quick::Stdin(..) => None,
    }
}

/// The error a request gets when its handler panicked (logged here).
fn handler_panicked(method: Method) -> RpcError {
    crate::log_error!("[Server] handler for {} panicked", method);
    RpcError::internal(format!("internal error in {}", method))
}

/// Lines longer than this are never decoded on the connection's reader
/// (only [`quick`]'s scan, which builds nothing, looks at them): they take
/// their in-flight permits first and are parsed in their own task, so the
/// reader never holds a big parsed tree beside the line waiting for a
/// permit. Instant requests are about 100 bytes.
pub(crate) const INSTANT_LINE_MAX: usize = 4096;

/// Answers an instant request on the connection's reader. A panic loses
/// this reply, never the connection.
async fn answer_instant(checked: Checked, daemon: &Daemon, warnings: &Quota, handlers: Handlers) -> Option<Reply> {
    match CatchUnwind(handle_checked(checked, daemon, warnings, handlers)).await {
        Ok(reply) => reply,
        Err(()) => {
            crate::log_error!("[Server] instant request panicked");
            None
        }
    }
}

/// Validates one non-blank request line ([`rpc::check`]). A panic is
/// caught here and the line dropped unanswered, on the reader as in a
/// request task.
fn check_line(line: &[u8], daemon: &Daemon) -> Option<Checked> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| {
        rpc::check(line, &daemon.token, daemon.options.build)
    })) {
        Ok(checked) => Some(checked),
        Err(_) => {
            crate::log_error!("[Server] request validation panicked");
            None
        }
    }
}

/// Whether a checked request is answered without waiting on anything but
/// the connection's reply queue: every envelope rejection, and the
/// `server.*` methods that only read state. The connection's reader runs
/// these itself instead of spawning a task, so a client pipelining
/// thousands of pings cannot queue thousands of tasks ahead of another
/// client's request, and a ping costs no task.
fn is_instant(checked: &Checked) -> bool {
    match checked {
        Checked::Rejected { .. } => true,
        Checked::Valid(request) => {
            matches!(
                request.method,
                Method::Server(ServerMethod::Ping | ServerMethod::Capabilities)
            )
        }
    }
}

/// Which handlers a validated request reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handlers {
    /// Every method runs: the daemon.
    All,
    /// `server.*` and `plugins.*` run; `files.*`, `git.*` and `process.*`
    /// stop after the params gate with an empty result. The fuzzing build
    /// drives arbitrary lines through dispatch this way, without letting
    /// them write files or spawn programs.
    #[cfg(feature = "fuzzing")]
    WithoutSideEffects,
}

/// Runs a request [`rpc::check`] has validated (or answers its rejection),
/// reaching only the given `handlers`; returns what to send, if anything.
/// Unauthorized requests are logged within the connection's `warnings`
/// quota.
async fn handle_checked(checked: Checked, daemon: &Daemon, warnings: &Quota, handlers: Handlers) -> Option<Reply> {
    let request = match checked {
        Checked::Valid(request) => request,
        Checked::Rejected {
            id,
            error,
            unauthorized,
        } => {
            if let Some(method) = unauthorized.filter(|_| warnings.allow()) {
                crate::log_warn!(
                    "[Server] Unauthorized request: method={}, id={}",
                    crate::base::logging::Untrusted(&method),
                    rpc::id_for_log(&id)
                );
            }
            daemon.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            return Some(Reply::Line(rpc::error_line(&id, &error)));
        }
    };
    let outcome = match CatchUnwind(dispatch(&request, daemon, handlers)).await {
        Ok(outcome) => outcome,
        Err(()) => Outcome::Error(handler_panicked(request.method)),
    };
    let (reply, class) = match outcome {
        Outcome::Result(result) => (
            Some(Reply::Line(rpc::success_line(&request.id, &result))),
            metrics::Outcome::Ok,
        ),
        Outcome::Error(error) => (
            Some(Reply::Line(rpc::error_line(&request.id, &error))),
            metrics::Outcome::Error,
        ),
        Outcome::NoReply => (None, metrics::Outcome::NoReply),
        Outcome::Follow { follow, result } => (
            Some(Reply::Follow {
                follow,
                line: rpc::success_line(&request.id, &result),
            }),
            // The follower answers with a success line: counted as `ok`.
            metrics::Outcome::Ok,
        ),
    };
    daemon.metrics.count_request(request.method, class);
    reply
}

/// Binds params for the namespace and runs the method.
///
/// The files/git/process handler futures are boxed: an `async fn` is as
/// large as its largest branch, and without the boxes every request task —
/// a `server.ping` too — would carry the biggest handler's state (this
/// cost 40% of pipelined ping throughput and tripled peak memory).
async fn dispatch(request: &Request, daemon: &Daemon, handlers: Handlers) -> Outcome {
    let effects = handlers == Handlers::All;
    match request.method {
        Method::Server(method) => {
            let state = methods::server::ServerState {
                instance: &daemon.instance,
                build: daemon.options.build,
                peer_check: daemon.options.peer_check,
                shutdown: &daemon.shutdown,
            };
            methods::server::handle(method, state).await
        }
        // Paths enter here: a leading `~` is expanded once, for every
        // handler (`params::HomeExpansion`).
        Method::Files(method) => {
            match bind_params(&request.params, PathParams::from_go_value).map(HomeExpansion::expand_home) {
                Ok(params) if effects => Box::pin(methods::files::handle(method, params, daemon.options.build)).await,
                Ok(_) => Outcome::Result(b"{}".to_vec()),
                Err(outcome) => outcome,
            }
        }
        Method::Git(method) => {
            match bind_params(&request.params, GitParams::from_go_value).map(HomeExpansion::expand_home) {
                Ok(params) if effects => Box::pin(methods::git::handle(method, params, daemon.options.build)).await,
                Ok(_) => Outcome::Result(b"{}".to_vec()),
                Err(outcome) => outcome,
            }
        }
        Method::Launcher(method) => match bind_params(&request.params, LauncherParams::from_go_value) {
            Ok(params) if effects => methods::launcher::handle(method, params, &daemon.launcher_log),
            Ok(_) => Outcome::Result(b"{}".to_vec()),
            Err(outcome) => outcome,
        },
        Method::Process(method) => {
            let bound = bind_params(&request.params, ProcessParams::from_go_value).and_then(|params| {
                // The `launcher` param exists only for builds with the
                // managed launcher; elsewhere it is an unknown key.
                let managed = if daemon.options.build.has(Switch::ManagedLauncher) {
                    Some(bind_params(&request.params, LauncherParam::from_go_value)?)
                } else {
                    None
                };
                Ok((params.expand_home(), managed))
            });
            match bound {
                Ok(_) if !effects => Outcome::Result(b"{}".to_vec()),
                Ok((params, managed)) => {
                    Box::pin(methods::process::handle(
                        method,
                        params,
                        managed,
                        &daemon.processes,
                        &daemon.metrics,
                    ))
                    .await
                }
                Err(outcome) => outcome,
            }
        }
        Method::Plugins(method) => {
            Box::pin(methods::plugins::handle(
                method,
                request.params.as_ref(),
                &daemon.options.socket_path,
                &daemon.processes,
            ))
            .await
        }
    }
}

/// The params gate: absent params or a failed Go-style decode are both
/// `-32602 Invalid params`.
pub(crate) fn bind_params<P>(
    params: &Option<Value>,
    decode: impl Fn(&Value) -> Result<P, crate::base::gojson::DecodeError>,
) -> Result<P, Outcome> {
    let invalid = || Outcome::invalid_params(rpc::MSG_INVALID_PARAMS);
    let value = params.as_ref().ok_or_else(invalid)?;
    decode(value).map_err(|_| invalid())
}

/// Turns a panic while polling the inner future into `Err(())`, so one
/// failing handler becomes a -32603 reply instead of a dead task.
struct CatchUnwind<F>(F);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning; the inner future is never moved.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_state_reads_and_rejections_run_on_the_reader() {
        let checked = |method: &str, auth: &str| {
            let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{}},"auth":"{auth}"}}"#);
            rpc::check(line.as_bytes(), b"t", crate::protocol::build::NEWEST)
        };
        // server.version is an unknown method (a rejection) since 7d193f89.
        for method in ["server.ping", "server.version", "server.capabilities"] {
            assert!(is_instant(&checked(method, "t")), "{method}");
        }
        for method in [
            "server.shutdown",
            "process.spawn",
            "process.killAndWait",
            "files.read",
            "git.status",
        ] {
            assert!(!is_instant(&checked(method, "t")), "{method}");
        }
        assert!(is_instant(&checked("process.spawn", "wrong")), "unauthorized");
        assert!(is_instant(&checked("nope.nothing", "t")), "unknown method");
        assert!(
            is_instant(&rpc::check(b"{not json", b"t", crate::protocol::build::NEWEST)),
            "parse error"
        );
    }

    /// The reader's one way in: each kind of line takes the step the
    /// module comment promises, and says whether it carried the token.
    #[tokio::test]
    async fn each_line_takes_one_step() {
        use crate::serve::state::Options;
        let daemon = Daemon::with_instance(
            b"t".to_vec(),
            Options::default(),
            crate::base::instance::Instance::new(),
        );
        let dispatcher = Dispatcher::new(daemon, 5, Handlers::All);
        // Go decoding ignores the unknown `pad` member: it only makes a
        // line long.
        let request = |method: &str, auth: &str, pad: usize| {
            let pad = "x".repeat(pad);
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"path":"/nonexistent/x","pad":"{pad}"}},"auth":"{auth}"}}"#
            )
            .into_bytes()
        };
        let line_of = |reply: &Reply| {
            let mut out = Vec::new();
            reply.write_line(&mut out);
            String::from_utf8(out).unwrap()
        };
        let step = |d: &Dispatched<_>| match &d.step {
            Step::Reply(Reply::Pong(_)) => "pong",
            Step::Reply(_) => "reply",
            Step::Task(_) => "task",
            Step::Skip => "skip",
        };

        let blank = dispatcher.on_line(b"", false).await;
        assert_eq!((step(&blank), blank.authenticates), ("skip", false));
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"t"}"#;
        let quick = dispatcher.on_line(ping, false).await;
        assert_eq!((step(&quick), quick.authenticates), ("pong", true));
        let instant = dispatcher.on_line(&request("server.capabilities", "t", 0), false).await;
        assert_eq!((step(&instant), instant.authenticates), ("reply", true));
        // An unauthenticated line of any length is checked on the reader.
        let refused = dispatcher
            .on_line(&request("files.read", "no", 2 * INSTANT_LINE_MAX), false)
            .await;
        assert_eq!((step(&refused), refused.authenticates), ("reply", false));
        let Step::Reply(reply) = &refused.step else {
            unreachable!()
        };
        assert!(line_of(reply).contains(r#""code":-32001"#), "{}", line_of(reply));

        let short = dispatcher.on_line(&request("files.read", "t", 0), true).await;
        assert!(short.authenticates, "checked on the reader");
        // A long line from an authenticated connection is checked in its task.
        let long = dispatcher
            .on_line(&request("files.read", "t", 2 * INSTANT_LINE_MAX), true)
            .await;
        assert!(!long.authenticates, "not checked on the reader");
        for task in [short, long] {
            let Step::Task(task) = task.step else {
                panic!("files.read is a task");
            };
            let reply = task.await.expect("a reply");
            assert_eq!(
                line_of(&reply),
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":\"\",\"exists\":false}}\n"
            );
        }
    }

    #[tokio::test]
    async fn a_panicking_handler_is_caught() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let caught = CatchUnwind(async {
            tokio::task::yield_now().await;
            let input: Vec<u8> = Vec::new();
            // Deliberately index out of bounds, as a buggy handler might.
            input[usize::from(input.is_empty())]
        })
        .await;
        std::panic::set_hook(prev);
        assert!(caught.is_err());
        assert_eq!(CatchUnwind(async { 7 }).await, Ok(7));
    }

    #[test]
    fn quick_replies_do_not_grow_the_reply_queue() {
        // The quick path's inline id (and a stdin ack beside it) fits in
        // the room the largest variant takes, so the writer's queue
        // (REPLY_QUEUE replies) costs what it did.
        assert!(std::mem::size_of::<ShortId>() <= 48);
        assert!(std::mem::size_of::<(ShortId, PackedAck)>() <= 55);
        assert!(std::mem::size_of::<(ShortId, StdinRefusal)>() <= 55);
        assert!(std::mem::size_of::<Reply>() <= 56, "{}", std::mem::size_of::<Reply>());
    }

    #[test]
    fn params_gate() {
        let decode = PathParams::from_go_value;
        assert!(
            matches!(bind_params(&None, decode), Err(Outcome::Error(e)) if e.code == rpc::INVALID_PARAMS && e.message == "Invalid params")
        );
        assert!(bind_params(&Some(Value::Null), decode).is_ok());
        assert!(bind_params(&Some(Value::String("x".into())), decode).is_err());
        assert!(bind_params(&Some(Value::Array(vec![])), decode).is_err());
    }
}
