//! One function per `harness` subcommand, each taking its parsed arguments
//! from `cli` and returning the process exit code or an [`Error`]. The
//! probe-corpus commands (run, compare, record) are in `corpus`; the tools
//! that do not read the corpus (bench, stress, capture, fuzz-diff, the
//! mutant proxy) are in `tools`.

pub(crate) mod corpus;
mod error;
pub(crate) mod tools;

pub(crate) use error::Error;
