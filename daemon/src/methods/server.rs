//! `server.*`: ping, capabilities, shutdown. These take no params.

use super::Outcome;
use crate::base::instance::Instance;
use crate::base::shutdown::Shutdown;
use crate::base::version;
use crate::protocol::build::Build;
use crate::protocol::method::ServerMethod;
use serde::{Serialize, Serializer};

#[derive(Serialize)]
struct Pong {
    pong: bool,
}

/// The `server.capabilities` result, members in the reference's order.
#[derive(Serialize)]
struct Capabilities<'a> {
    version: &'static str,
    #[serde(serialize_with = "build_methods")]
    methods: &'static Build,
    /// Per boot; between `methods` and `features`.
    #[serde(rename = "instanceId")]
    instance_id: &'a str,
    #[serde(rename = "startedAt")]
    started_at: i64,
    /// As this host lists them ([`Build::features`]).
    #[serde(serialize_with = "build_features")]
    features: &'static Build,
    /// Last, in the builds that have it ([`crate::protocol::build::Switch::PeerCheck`]).
    #[serde(rename = "peerCheck", skip_serializing_if = "Option::is_none")]
    peer_check: Option<&'static str>,
}

fn build_methods<S: Serializer>(build: &&'static Build, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(build.methods())
}

fn build_features<S: Serializer>(build: &&'static Build, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(build.features(crate::sys::os::HOST))
}

/// What `server.*` answers from: the per-boot identity, the build answered
/// as and its peer-check state, and the stop signal.
pub(crate) struct ServerState<'a> {
    pub instance: &'a Instance,
    pub build: &'static Build,
    pub peer_check: Option<&'static str>,
    pub shutdown: &'a Shutdown,
}

pub(crate) async fn handle(method: ServerMethod, state: ServerState<'_>) -> Outcome {
    match method {
        ServerMethod::Ping => Outcome::ok(&Pong { pong: true }),
        ServerMethod::Capabilities => Outcome::ok(&Capabilities {
            version: version::ID,
            methods: state.build,
            instance_id: &state.instance.id,
            started_at: state.instance.started_at,
            features: state.build,
            peer_check: state.peer_check,
        }),
        ServerMethod::Shutdown => {
            crate::log_info!("[Server] Shutdown requested");
            state.shutdown.trigger();
            Outcome::NoReply
        }
    }
}
