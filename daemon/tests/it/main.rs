//! The daemon's integration tests: one binary, one module per concern (the
//! layout of cargo's and rust-analyzer's test suites), so that
//! `cargo test` links remora into one test executable instead of one per
//! file. One module alone: `cargo test -p remora --test it <module>::`.
//!
//! The modules' tests run as threads of this one process. None of them
//! changes what the process shares (its environment, working directory,
//! umask, signal dispositions or resource limits): whatever a daemon or a
//! child needs is set on its `Command` (see `common`), and a test that
//! needs a process of its own re-runs this binary with its test's path
//! (`hostile_neighbours`, `install`).
//!
//! `../allocations.rs` is a binary of its own: it needs remora built with
//! the `alloc-count` feature.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly; the lint guards the daemon

mod common;
mod support;

mod agent_socket;
mod audit_three;
mod branch_guard;
mod build_profiles;
mod childrec;
mod ci_leftovers;
mod clauster_compat;
mod cli;
mod code_map;
mod daemon_log;
mod doc_index;
mod doctor;
mod exited_retention;
mod files;
mod fuzz_corpora;
mod git;
mod git_containment;
mod git_external_root;
mod git_include;
mod git_rollback;
mod git_upstream;
mod home_guard;
mod hostile_depth;
mod hostile_neighbours;
mod idle_exit;
mod import_circles;
mod install;
mod install_bounds;
mod install_cli;
mod install_launcher;
mod install_progress;
mod install_remote;
#[cfg(target_os = "linux")]
mod keep_children;
mod kill_reach;
mod launcher;
mod layers;
mod lifecycle;
mod memory;
mod offsets_tilde_and_error_texts;
mod plugins;
mod probe_cli_and_child_fd_limit;
mod process;
mod process_exit;
mod process_session;
mod protocol;
mod protocol_example;
mod reattach_transfer;
mod replay_budget;
mod replay_dir_trust;
mod settings_file;
mod signals;
mod spawner;
mod static_resolve;
mod stdin_paths;
mod stop;
mod tar;
mod tar_5fd08069;
mod unread_replies;
mod upstream_life;
mod version_id;
mod wire_log;
mod worktree_stale;
