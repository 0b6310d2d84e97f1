//! `server.*`: ping, capabilities, shutdown. These take no params.

use super::Outcome;
use crate::base::instance::Instance;
use crate::base::shutdown::Shutdown;
use crate::base::version;
use crate::protocol::method::ServerMethod;
use crate::protocol::rpc::{FEATURES, METHODS};
use serde::Serialize;

#[derive(Serialize)]
struct Pong {
    pong: bool,
}

#[derive(Serialize)]
struct Capabilities<'a> {
    version: &'static str,
    methods: &'static [&'static str],
    /// Per boot; between `methods` and `features`.
    #[serde(rename = "instanceId")]
    instance_id: &'a str,
    #[serde(rename = "startedAt")]
    started_at: i64,
    features: &'static [&'static str],
}

pub(crate) async fn handle(method: ServerMethod, instance: &Instance, shutdown: &Shutdown) -> Outcome {
    match method {
        ServerMethod::Ping => Outcome::ok(&Pong { pong: true }),
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
