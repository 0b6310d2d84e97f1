//! Checks the `-listen-pipe` transport (`daemon/src/sys/windows/pipe.rs`,
//! compiled as it is) under Wine: the pipe is created with its
//! owner-only DACL and remote clients rejected, and two clients in turn
//! each get their line answered on their own instance. Exits non-zero on
//! any failure. Run by `ci/wine-smoke`.
//!
//! `pipecheck echo <dir>` is instead a stand-in daemon for `remora.exe
//! -bridge` and `-stop` (`ci/wine-smoke` drives them): it serves a pipe,
//! names it in `<dir>/rpc.pipe` as `-listen-pipe` does, prints `ready`,
//! then answers every line of each client with the same line (a line
//! holding `"slow"` after 0.6 s, with a stream frame before it), one
//! client after another, until a line asks for `server.shutdown`: then it
//! closes that client and exits, leaving `rpc.pipe` behind (stale).
//!
//! `pipecheck rpc <rpc.pipe> <line>...` is a client of a running
//! `remora.exe -serve -listen-pipe`: it reads the pipe's name from the
//! file, sends each line (a JSON-RPC request) and prints each answer; a
//! request the daemon closes the pipe on instead (`server.shutdown` has
//! no reply) must be the last, and prints `(pipe closed)`.

// pipe.rs builds its DACL with `super::acl`, the daemon's
// `sys/windows/acl.rs`.
#[allow(dead_code)]
#[path = "../../../../daemon/src/sys/windows/acl.rs"]
mod acl;
// The daemon's own helpers in that file are not used here.
#[allow(dead_code)]
#[path = "../../../../daemon/src/sys/windows/pipe.rs"]
mod pipe;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// `pipecheck rpc <rpc.pipe> <line>...`: one request per line, each
/// answer printed as it comes.
async fn rpc(pipe_file: &str, lines: &[String]) {
    let name = std::fs::read_to_string(pipe_file).expect("read rpc.pipe");
    let client = tokio::net::windows::named_pipe::ClientOptions::new()
        .open(name.trim())
        .expect("open the daemon's pipe");
    let (read, mut write) = tokio::io::split(client);
    let mut answers = BufReader::new(read);
    for line in lines {
        write.write_all(format!("{line}\n").as_bytes()).await.expect("send");
        write.flush().await.expect("flush");
        let mut answer = String::new();
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), answers.read_line(&mut answer))
            .await
            .expect("an answer in time")
            .expect("receive");
        if n == 0 {
            assert!(std::ptr::eq(line, &lines[lines.len() - 1]), "the daemon closed the pipe before answering {line}");
            println!("(pipe closed)");
            return;
        }
        print!("{answer}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "echo" {
        return echo(std::path::Path::new(&args[2])).await;
    }
    if args.get(1).map(String::as_str) == Some("rpc") && args.len() >= 4 {
        return rpc(&args[2], &args[3..]).await;
    }
    let name = pipe::pipe_name(&format!("pipecheck-{}", std::process::id()));
    let mut listener = pipe::PipeListener::bind(&name).expect("bind the pipe");
    assert_eq!(listener.name(), name);
    let server = tokio::spawn(async move {
        for _ in 0..2 {
            let conn = listener.accept().await.expect("accept");
            let (read, mut write) = tokio::io::split(conn);
            let mut line = String::new();
            BufReader::new(read).read_line(&mut line).await.expect("read");
            write.write_all(format!("echo {line}").as_bytes()).await.expect("write");
            write.flush().await.expect("flush");
        }
    });
    for i in 0..2 {
        let client = tokio::net::windows::named_pipe::ClientOptions::new()
            .open(&name)
            .expect("the next instance is there");
        let (read, mut write) = tokio::io::split(client);
        write.write_all(format!("ping {i}\n").as_bytes()).await.expect("send");
        let mut line = String::new();
        BufReader::new(read).read_line(&mut line).await.expect("receive");
        assert_eq!(line, format!("echo ping {i}\n"));
    }
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("server done")
        .expect("server ok");
    println!("pipecheck: {name}: 2 clients answered");
}

/// The stand-in daemon of `pipecheck echo <dir>`.
async fn echo(dir: &std::path::Path) {
    let name = pipe::pipe_name(&format!("echo-{}", std::process::id()));
    let mut listener = pipe::PipeListener::bind(&name).expect("bind the pipe");
    std::fs::write(dir.join("rpc.pipe"), format!("{name}\n")).expect("write rpc.pipe");
    println!("ready");
    loop {
        let conn = listener.accept().await.expect("accept");
        let (read, mut write) = tokio::io::split(conn);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("\"method\":\"server.shutdown\"") {
                return;
            }
            // A slow answer after a stream frame: a bridge draining after
            // stdin's EOF must wait for the answer, not stop at the frame.
            if line.contains("\"slow\"") {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                let frame = "{\"type\":\"stream\",\"processId\":\"p\",\"stream\":\"stdout\",\"seq\":1,\"data\":\"\"}\n";
                if write.write_all(frame.as_bytes()).await.is_err() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    }
}
