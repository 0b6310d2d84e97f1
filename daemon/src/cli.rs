//! Command-line entry point: flag parsing and mode dispatch.
//!
//! (Minimal for now: `-serve` in the foreground. The lifecycle issue
//! replaces this with Go `flag` semantics, daemonizing and every mode.)

use crate::server::{self, Daemon, Options};
use std::io::Write;
use std::path::PathBuf;

/// Runs the binary; returns the process exit code.
pub fn main() -> i32 {
    crate::logging::init_from_env();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut socket = None;
    let mut token_file = None;
    let mut serve = false;
    let mut version = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let name = arg.trim_start_matches('-');
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (name, None),
        };
        match name {
            "serve" => serve = true,
            "version" => version = true,
            "socket" => socket = inline.or_else(|| iter.next().cloned()),
            "token-file" => token_file = inline.or_else(|| iter.next().cloned()),
            _ => {}
        }
    }
    if version {
        println!("{}", crate::version::banner());
        return 0;
    }
    if !serve {
        eprintln!("remora: one of --version/--install/--serve/--bridge/--stop is required");
        return 2;
    }
    let Some(token_file) = token_file else {
        eprintln!("remora: daemonized child requires --token-file or --token-fd");
        return 1;
    };
    let token = match std::fs::read(&token_file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "remora: read --token-file: {}",
                crate::goerr::path_error("open", &token_file, &e)
            );
            return 1;
        }
    };
    let _ = std::fs::remove_file(&token_file);
    let token = strip_line_end(token);
    let socket = PathBuf::from(socket.unwrap_or_else(|| "rpc.sock".into()));
    let listener = match server::bind_socket(&socket) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("remora: {e}");
            return 1;
        }
    };
    let daemon = Daemon::new(
        token,
        Options {
            socket_path: socket.clone(),
            keep_children: false,
        },
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("remora: runtime: {e}");
            return 1;
        }
    };
    println!("Remora remote server listening on {}", socket.display());
    let _ = std::io::stdout().flush();
    match runtime.block_on(server::run(listener, daemon)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("remora: {e}");
            1
        }
    }
}

/// A token is read as a line: one trailing `\n` or `\r\n` is removed,
/// everything else is kept verbatim.
pub fn strip_line_end(mut token: Vec<u8>) -> Vec<u8> {
    if token.ends_with(b"\n") {
        token.pop();
        if token.ends_with(b"\r") {
            token.pop();
        }
    }
    token
}
