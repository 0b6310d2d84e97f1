//! `process.stdin` answers the same bytes on both of its paths: the
//! quick one (`rpc/quick.rs`, a plain envelope scanned in place) and the
//! full decoder, which takes any request in an unusual form (an escaped
//! character, a case-folded or repeated member, an unknown member, an id
//! Go re-encodes). Two `head` children get the same stdin calls, one in
//! the plain form and one in forced full-path forms; every reply must be
//! byte-identical, and both children must receive the same stream.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::{Client, TestDaemon, TOKEN};
use base64::Engine;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One stdin call: the target process, its base64 text and its offset.
struct Call<'a> {
    process: &'a str,
    data: String,
    offset: Option<u64>,
}

impl Call<'_> {
    fn params_members(&self) -> (String, String, String) {
        let offset = self.offset.map(|o| format!(r#","offset":{o}"#)).unwrap_or_default();
        (
            format!(r#""id":"{}""#, self.process),
            format!(r#""data":"{}""#, self.data),
            offset,
        )
    }

    /// The plainest form, which the quick path takes.
    fn plain(&self, rid: u64) -> String {
        let (id, data, offset) = self.params_members();
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{rid},\"method\":\"process.stdin\",\"params\":{{{id},{data}{offset}}},\"auth\":\"{TOKEN}\"}}\n"
        )
    }

    /// A form the quick path gives up on (chosen by `variant`), which Go
    /// decodes to the same request.
    fn unusual(&self, rid: u64, variant: usize) -> String {
        let (id, data, offset) = self.params_members();
        let envelope = |id_json: &str, method: &str, params: &str, extra: &str| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id_json},\"method\":\"{method}\",\"params\":{params},\"auth\":\"{TOKEN}\"{extra}}}\n"
            )
        };
        let plain_params = format!("{{{id},{data}{offset}}}");
        let rid_text = rid.to_string();
        match variant % 7 {
            // An escaped character in the method.
            0 => envelope(&rid_text, "process.std\\u0069n", &plain_params, ""),
            // A case-folded params member: Go binds it to `data`.
            1 => envelope(
                &rid_text,
                "process.stdin",
                &format!("{{{id},{}{offset}}}", data.replacen("\"data\"", "\"Data\"", 1)),
                "",
            ),
            // A member process.stdin does not read.
            2 => envelope(
                &rid_text,
                "process.stdin",
                &format!("{{{id},\"cwd\":\"/\",{data}{offset}}}"),
                "",
            ),
            // An unknown envelope member.
            3 => envelope(&rid_text, "process.stdin", &plain_params, ",\"extra\":[1]"),
            // A repeated member: the last one counts.
            4 => envelope(
                &rid_text,
                "process.stdin",
                &format!("{{\"data\":\"!!\",{id},{data}{offset}}}"),
                "",
            ),
            // An id Go writes back without its fraction.
            5 => envelope(&format!("{rid}.0"), "process.stdin", &plain_params, ""),
            // An escaped character in the process id.
            _ => envelope(
                &rid_text,
                "process.stdin",
                &format!(
                    "{{{},{data}{offset}}}",
                    id.replacen(
                        &format!("\"{}\"", self.process),
                        &format!("\"\\u00{:02x}{}\"", self.process.as_bytes()[0], &self.process[1..]),
                        1
                    )
                ),
                "",
            ),
        }
    }
}

fn send(c: &mut Client, line: &str, rid: u64) -> String {
    c.send_raw(line.as_bytes());
    c.reply_for(rid)
}

fn spawn_head(c: &mut Client, process: &str, bytes: usize) {
    let reply = c.call(
        1,
        "process.spawn",
        &format!(r#"{{"id":"{process}","command":"head","args":["-c","{bytes}"]}}"#),
    );
    assert_eq!(reply, r#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#);
}

/// A stdin call as (a process other than the connection's, data, offset).
type Step<'a> = (Option<&'a str>, String, Option<u64>);

/// Sends each step in the plain form to `q` on `quick` and in an unusual
/// form to `f` on `full` (cycling through the forms); asserts the two
/// replies are the same bytes and returns them. `next` is the next
/// request id and form.
fn run(steps: &[Step<'_>], quick: &mut Client, full: &mut Client, next: &mut (u64, usize)) -> Vec<String> {
    let mut replies = Vec::new();
    for (other, data, offset) in steps {
        next.0 += 1;
        let (rid, variant) = *next;
        let call = |process| Call {
            process,
            data: data.clone(),
            offset: *offset,
        };
        let quick_reply = send(quick, &call(other.unwrap_or("q")).plain(rid), rid);
        let full_reply = send(full, &call(other.unwrap_or("f")).unusual(rid, variant), rid);
        assert_eq!(quick_reply, full_reply, "call {rid}, form {}", variant % 7);
        replies.push(quick_reply);
        next.1 += 1;
    }
    replies
}

#[test]
fn quick_and_full_paths_answer_stdin_byte_for_byte() {
    let d = TestDaemon::start();
    let mut quick = d.connect();
    let mut full = d.connect();
    let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
    // The stream each child must receive: "abcdefgh\n" then `big`.
    let mut stream = b"abcdefgh\n".to_vec();
    stream.extend_from_slice(&big);
    spawn_head(&mut quick, "q", stream.len());
    spawn_head(&mut full, "f", stream.len());

    // (data, offset) for the children while they run; the process is
    // named per connection, a ghost call names none.
    let running: Vec<Step<'_>> = vec![
        (Some("ghost"), b64(b"x"), None),
        (None, "!!".to_string(), None),
        (None, b64(b"abc"), None),
        (None, b64(b"def"), Some(3)),
        (None, b64(b"abc"), Some(0)),
        (None, b64(b"zz"), Some(10)),
        (None, b64(b"efgh"), Some(4)),
        (None, String::new(), None),
        (None, b64(b"\n"), Some(8)),
        (None, "aGk".to_string(), None),
        (None, b64(&big), Some(9)),
    ];
    let mut next = (10, 0);
    let replies = run(&running, &mut quick, &mut full, &mut next);
    assert_eq!(
        replies,
        [
            r#"{"jsonrpc":"2.0","id":11,"error":{"code":-32602,"message":"Process not found"}}"#,
            r#"{"jsonrpc":"2.0","id":12,"error":{"code":-32602,"message":"Invalid base64 data"}}"#,
            r#"{"jsonrpc":"2.0","id":13,"result":{"success":true,"applied":3}}"#,
            r#"{"jsonrpc":"2.0","id":14,"result":{"success":true,"applied":6}}"#,
            r#"{"jsonrpc":"2.0","id":15,"result":{"success":true,"applied":6,"duplicate":true}}"#,
            r#"{"jsonrpc":"2.0","id":16,"error":{"code":-32003,"message":"stdin offset gap: offset ahead of applied bytes"}}"#,
            r#"{"jsonrpc":"2.0","id":17,"result":{"success":true,"applied":8}}"#,
            r#"{"jsonrpc":"2.0","id":18,"result":{"success":true,"applied":8}}"#,
            r#"{"jsonrpc":"2.0","id":19,"result":{"success":true,"applied":9}}"#,
            r#"{"jsonrpc":"2.0","id":20,"error":{"code":-32602,"message":"Invalid base64 data"}}"#,
            r#"{"jsonrpc":"2.0","id":21,"result":{"success":true,"applied":600009}}"#,
        ]
    );
    // `head` exits once it has the whole stream: both got it exactly.
    assert_eq!(stdout_of(&frames_until_exit(&mut quick, "q")), stream);
    assert_eq!(stdout_of(&frames_until_exit(&mut full, "f")), stream);

    let exited: Vec<Step<'_>> = vec![
        (None, b64(b"x"), Some(700_000)),
        (None, b64(b"abc"), Some(0)),
        (None, b64(b"x"), None),
        (None, String::new(), Some(600_009)),
        (None, "%".to_string(), Some(1)),
    ];
    let replies = run(&exited, &mut quick, &mut full, &mut next);
    assert_eq!(
        replies,
        [
            r#"{"jsonrpc":"2.0","id":22,"error":{"code":-32003,"message":"stdin offset gap: offset ahead of applied bytes"}}"#,
            r#"{"jsonrpc":"2.0","id":23,"result":{"success":true,"applied":600009,"duplicate":true}}"#,
            r#"{"jsonrpc":"2.0","id":24,"error":{"code":-32602,"message":"Process not running"}}"#,
            r#"{"jsonrpc":"2.0","id":25,"error":{"code":-32602,"message":"Process not running"}}"#,
            r#"{"jsonrpc":"2.0","id":26,"error":{"code":-32602,"message":"Invalid base64 data"}}"#,
        ]
    );
}
