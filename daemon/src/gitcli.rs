//! Running the `git` CLI for the `git.*` methods.
