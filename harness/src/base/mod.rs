//! The foundation: what every module of the harness shares.
//!
//! | module | owns |
//! | --- | --- |
//! | [`error`] | `IoAt`, an I/O error with its path, and `At::at` to attach it |
//! | [`stats`] | the percentile of measured samples |
//! | [`sync`] | locks that survive a panicked holder |

pub(crate) mod error;
pub(crate) mod stats;
pub(crate) mod sync;
