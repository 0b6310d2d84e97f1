//! `process.*`: spawn, stdin, kill, killAndWait, reattach.

use super::Outcome;
use crate::dispatch::Call;
use crate::params::ProcessParams;

pub async fn handle(method: &str, _params: ProcessParams, _call: &Call<'_>) -> Outcome {
    Outcome::internal(format!("{method} is not implemented yet"))
}
