//! Checks the `-listen-pipe` transport (`daemon/src/sys/windows/pipe.rs`,
//! compiled as it is) under Wine: the pipe is created with its
//! owner-only DACL and remote clients rejected, and two clients in turn
//! each get their line answered on their own instance. Exits non-zero on
//! any failure. Run by `ci/wine-smoke`.

// pipe.rs builds its DACL with `super::acl`, the daemon's
// `sys/windows/acl.rs`.
#[allow(dead_code)]
#[path = "../../../../daemon/src/sys/windows/acl.rs"]
mod acl;
#[path = "../../../../daemon/src/sys/windows/pipe.rs"]
mod pipe;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::main(flavor = "current_thread")]
async fn main() {
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
