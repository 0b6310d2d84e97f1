//! `files.*`: stat, list, read, validate, extract_tar.

use super::Outcome;
use crate::dispatch::Call;
use crate::params::PathParams;

pub async fn handle(method: &str, _params: PathParams, _call: &Call<'_>) -> Outcome {
    Outcome::internal(format!("{method} is not implemented yet"))
}
