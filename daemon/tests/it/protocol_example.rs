//! The example session in `docs/PROTOCOL.md` ("Example session"), run as
//! written against a real daemon: each `$` command (with its `>`
//! continuation lines) in `bash`, with `remora` on the PATH and a fresh
//! temporary HOME, its stdout compared line by line with the lines the page
//! shows under it. The README copies the same session, so both stay true.

use crate::common;
use std::path::Path;
use std::process::Command;

/// The commands of the page's example and the output shown for each.
fn example() -> Vec<(String, Vec<String>)> {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/PROTOCOL.md")).unwrap();
    let from = page.find("\n## Example session\n").expect("an Example session heading");
    let block = &page[from..];
    let start = block.find("```console\n").expect("a console block") + "```console\n".len();
    let body = &block[start..start + block[start..].find("```").unwrap()];
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in body.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push((cmd.to_string(), Vec::new()));
        } else if let Some(more) = line.strip_prefix("> ") {
            let last = steps.last_mut().expect("a continuation after a command");
            last.0.push('\n');
            last.0.push_str(more);
        } else {
            steps
                .last_mut()
                .expect("output after a command")
                .1
                .push(line.to_string());
        }
    }
    steps
}

#[test]
fn the_example_session_runs_as_the_protocol_page_shows_it() {
    let steps = example();
    assert!(steps.len() >= 4, "{steps:?}");
    let home = tempfile::tempdir().unwrap();
    let socket = home.path().join(".remora/rpc.sock");
    // Whatever fails below, the daemon is stopped through its pid.
    let _stop = common::StopOnDrop::new(&socket, "secret");
    let bin_dir = Path::new(common::remora_bin()).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    for (cmd, shown) in steps {
        let out = Command::new("bash")
            .arg("-c")
            .arg(&cmd)
            .env("HOME", home.path())
            .env("PATH", &path)
            .env_remove("CLAUDE_RPC_TOKEN")
            .current_dir(home.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).replace(&home.path().display().to_string(), "/home/me");
        assert!(
            out.status.success(),
            "{cmd}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{cmd}");
        let got: Vec<&str> = stdout.lines().collect();
        let want: Vec<&str> = shown.iter().map(String::as_str).collect();
        // Replies may arrive in another order than the requests (the page
        // says so): compared as sets. Everything else, stream frames
        // included, in order.
        fn is_reply(l: &str) -> bool {
            l.starts_with("{\"jsonrpc\"")
        }
        let sorted_replies = |v: &[&str]| {
            let mut r: Vec<String> = v.iter().filter(|l| is_reply(l)).map(|l| l.to_string()).collect();
            r.sort_unstable();
            r
        };
        let others = |v: &[&str]| -> Vec<String> { v.iter().filter(|l| !is_reply(l)).map(|l| l.to_string()).collect() };
        assert_eq!(sorted_replies(&got), sorted_replies(&want), "{cmd}");
        assert_eq!(others(&got), others(&want), "{cmd}");
    }
    assert!(!socket.exists(), "the session's last step stops the daemon");
}
