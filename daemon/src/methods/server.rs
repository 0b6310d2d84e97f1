//! `server.*`: ping, version, capabilities, shutdown. These take no params.

use super::Outcome;
use crate::instance::Instance;
use crate::method::ServerMethod;
use crate::rpc::{FEATURES, METHODS};
use crate::shutdown::Shutdown;
use crate::version;
use serde::Serialize;

#[derive(Serialize)]
struct Pong {
    pong: bool,
}

#[derive(Serialize)]
struct VersionInfo {
    version: &'static str,
    platform: &'static str,
    arch: &'static str,
}

#[derive(Serialize)]
struct Capabilities<'a> {
    version: &'static str,
    methods: &'static [&'static str],
    /// Per boot (reference `4534d86`); between `methods` and `features`.
    #[serde(rename = "instanceId")]
    instance_id: &'a str,
    #[serde(rename = "startedAt")]
    started_at: i64,
    features: &'static [&'static str],
}

pub async fn handle(method: ServerMethod, instance: &Instance, shutdown: &Shutdown) -> Outcome {
    match method {
        ServerMethod::Ping => Outcome::ok(&Pong { pong: true }),
        ServerMethod::Version => Outcome::ok(&VersionInfo {
            version: version::ID,
            platform: version::goos(),
            arch: version::goarch(),
        }),
        ServerMethod::Capabilities => Outcome::ok(&Capabilities {
            version: version::ID,
            methods: &METHODS,
            instance_id: &instance.id,
            started_at: instance.started_at,
            features: &FEATURES,
        }),
        ServerMethod::Shutdown => {
            crate::log_info!("[Server] Shutdown requested");
            shutdown.trigger();
            Outcome::NoReply
        }
    }
}
