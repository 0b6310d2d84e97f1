//! Parser tests: directives, templates, escapes and error positions.

use super::*;

fn p(text: &str) -> Probe {
    parse(Path::new("t.probe"), text).unwrap()
}

fn ctx() -> Ctx {
    Ctx {
        root: "/r".into(),
        token: b"tok".to_vec(),
        socket: "/s.sock".into(),
        run: "/run".into(),
        home: "/run/home".into(),
    }
}

#[test]
fn comments_blank_lines_and_desc() {
    let pr = p("# c\n\ndesc one\ndesc two\nconnect c1\n");
    assert_eq!(pr.desc, "one two");
    assert_eq!(pr.name, "t");
    assert_eq!(pr.steps.len(), 1);
    assert_eq!(pr.steps[0].line, 5);
}

#[test]
fn send_is_raw_with_templates() {
    let pr = p(r#"send c1 {"a":"x\n","p":"$ROOT/f","t":"$TOKEN","d":"$b64(hi\n)"}"#);
    let StepKind::Send { line, .. } = &pr.steps[0].kind else {
        panic!()
    };
    assert_eq!(
        String::from_utf8(line.expand(&ctx())).unwrap(),
        r#"{"a":"x\n","p":"/r/f","t":"tok","d":"aGkK"}"#
    );
}

#[test]
fn raw_quoted_escapes_and_repeat() {
    let pr = p(r#"raw c1 "a\xff\n" "$repeat(3,ab)" "\$x""#);
    let StepKind::Raw { bytes, .. } = &pr.steps[0].kind else {
        panic!()
    };
    assert_eq!(bytes.expand(&ctx()), b"a\xff\nababab$x");
}

#[test]
fn sendn_fills_to_exact_length() {
    let pr = p(r#"sendn c1 40 {"pad":"$FILL"}"#);
    let StepKind::Send { line, len, .. } = &pr.steps[0].kind else {
        panic!()
    };
    assert_eq!(*len, Some(40));
    let base = line.expand(&ctx()).len();
    assert_eq!(line.expand_fill(&ctx(), 40 - base).len(), 40);
}

#[test]
fn call_with_and_without_params() {
    let pr = p("call c1 7 server.ping\ncall c2 \"x\" files.stat {\"path\": \"$ROOT\"}\n");
    assert_eq!(
        pr.steps[0].kind,
        StepKind::Call {
            conn: "c1".into(),
            id: "7".into(),
            method: "server.ping".into(),
            params: None
        }
    );
    let StepKind::Call {
        params: Some(t), id, ..
    } = &pr.steps[1].kind
    else {
        panic!()
    };
    assert_eq!(id, "\"x\"");
    assert_eq!(t.expand(&ctx()), br#"{"path": "/r"}"#);
}

#[test]
fn fixtures_and_tar_block() {
    let pr = p("file a 0600 \"x\"\nfile b \"y\"\ntar t.tgz\n  file ../e 0755 \"z\"\n  symlink l /etc\n  chardev c 1 3\nend\nrun -- -version\n");
    assert!(matches!(
        pr.steps[0].kind,
        StepKind::Fixture(Fixture::File { mode: 0o600, .. })
    ));
    assert!(matches!(
        pr.steps[1].kind,
        StepKind::Fixture(Fixture::File { mode: 0o644, .. })
    ));
    let StepKind::Fixture(Fixture::Tar { entries, format, .. }) = &pr.steps[2].kind else {
        panic!()
    };
    assert_eq!(*format, TarFormat::Gzip);
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0].mode, 0o755);
    assert_eq!(entries[2].kind, TarKind::CharDev(1, 3));
    assert_eq!(pr.steps[3].line, 8);
}

#[test]
fn run_options() {
    let pr = p("run stdin=\"a\\n\" env=CLAUDE_RPC_TOKEN=$TOKEN timeout=500 -- -stop -socket $SOCKET\nrun env=X=\"a b\" stdin=\"c d\" -- -x\n");
    let StepKind::Run {
        stdin,
        env,
        args,
        timeout_ms,
    } = &pr.steps[0].kind
    else {
        panic!()
    };
    assert_eq!(stdin.as_ref().unwrap().expand(&ctx()), b"a\n");
    assert_eq!(env[0].0, "CLAUDE_RPC_TOKEN");
    assert_eq!(env[0].1.expand(&ctx()), b"tok");
    assert_eq!(*timeout_ms, Some(500));
    assert_eq!(args.len(), 3);
    assert_eq!(args[2].expand(&ctx()), b"/s.sock");
    let StepKind::Run { stdin, env, .. } = &pr.steps[1].kind else {
        panic!()
    };
    assert_eq!(stdin.as_ref().unwrap().expand(&ctx()), b"c d");
    assert_eq!(env[0].1.expand(&ctx()), b"a b");
}

#[test]
fn accepts() {
    let pr = p("accept L3 * | because\naccept-next reason two\ncall c1 1 server.ping\n");
    assert_eq!(
        pr.accepts[0],
        Accept {
            pattern: "L3 *".into(),
            reason: "because".into()
        }
    );
    assert_eq!(
        pr.accepts[1],
        Accept {
            pattern: "L3 *".into(),
            reason: "reason two".into()
        }
    );
}

#[test]
fn token_directive() {
    let pr = p("token \" spaced tok \\r\\n\"\n");
    assert_eq!(pr.token_file, b" spaced tok \r\n");
    assert_eq!(pr.token(), b" spaced tok ");
}

#[test]
fn errors_name_file_and_line() {
    let e = parse(Path::new("x.probe"), "desc ok\n\nbogus thing\n").unwrap_err();
    assert_eq!(e.to_string(), "x.probe:3: unknown directive \"bogus\"");
    let e = parse(Path::new("x.probe"), "send c1 $NOPE\n").unwrap_err();
    assert!(e.to_string().starts_with("x.probe:1: unknown template variable"), "{e}");
    let e = parse(Path::new("x.probe"), "raw c1 \"abc\n").unwrap_err();
    assert!(e.to_string().contains("unterminated"), "{e}");
    let e = parse(Path::new("x.probe"), "tar a\n file x\n").unwrap_err();
    assert!(e.to_string().contains("without `end`"), "{e}");
    let e = parse(Path::new("x.probe"), "await c1 {bad\n").unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    let e = parse(Path::new("x.probe"), "accept-next why\n").unwrap_err();
    assert!(e.to_string().contains("applies to nothing"), "{e}");
}

#[test]
fn globbing() {
    assert!(glob_match("L3 *", "L3 c1 reply 1"));
    assert!(!glob_match("L3 *", "L30 c1 reply 1"));
    assert!(glob_match("*reply*", "L3 c1 reply 1"));
    assert!(glob_match("fs a?b", "fs a.b"));
    assert!(glob_match("*", ""));
}
