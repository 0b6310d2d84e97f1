use super::*;
use std::os::unix::fs::PermissionsExt;

fn argv(words: &[&str]) -> Result<Vec<String>, String> {
    Ok(words.iter().map(|w| w.to_string()).collect())
}

#[test]
fn argv_list_form_splits_on_the_three_spaces_and_groups_quotes() {
    assert_eq!(parse_value("/usr/bin/env"), argv(&["/usr/bin/env"]));
    assert_eq!(parse_value("  /opt/w  --flag x "), argv(&["/opt/w", "--flag", "x"]));
    assert_eq!(parse_value("/opt/w\u{a0}a\u{feff}b"), argv(&["/opt/w", "a", "b"]));
    assert_eq!(
        parse_value("\"/opt/my launcher\" --name \"a b\"c"),
        argv(&["/opt/my launcher", "--name", "a bc"])
    );
    // A tab is not a separator.
    assert_eq!(parse_value("/opt/w\ta"), argv(&["/opt/w\ta"]));
    // Metacharacters are refused unquoted only.
    assert_eq!(parse_value("\"/opt/a;b\" x"), argv(&["/opt/a;b", "x"]));
    for bad in ["/opt/w; rm", "/opt/w | x", "a&b", "$HOME/w", "(x)", "`x`", "a<b", "a>b"] {
        assert_eq!(parse_value(bad), Err(METACHAR.to_string()), "{bad}");
    }
    assert_eq!(parse_value("/opt/w \"x"), Err(UNTERMINATED.to_string()));
    assert_eq!(parse_value("/opt/w \"\""), Err(EMPTY_TOKEN.to_string()));
    assert_eq!(parse_value(""), Err(NO_LAUNCHER.to_string()));
    assert_eq!(parse_value(" \u{a0}\u{feff}"), Err(NO_LAUNCHER.to_string()));
}

#[test]
fn json_form_is_an_array_of_non_empty_strings() {
    assert_eq!(parse_value(r#"["/opt/w","a b"]"#), argv(&["/opt/w", "a b"]));
    // Metacharacters are fine in the JSON form: it is an argv already.
    assert_eq!(parse_value(r#"["/opt/w",";"]"#), argv(&["/opt/w", ";"]));
    assert_eq!(parse_value("[]"), Err(NO_LAUNCHER.to_string()));
    assert_eq!(parse_value(r#"["/opt/w",""]"#), Err(EMPTY_ELEMENT.to_string()));
    assert_eq!(parse_value(r#"["/opt/w",1]"#), Err(NOT_STRINGS.to_string()));
    assert_eq!(parse_value("[1] x"), Err(NOT_JSON_ARRAY.to_string()));
    assert_eq!(parse_value("[/opt/w"), Err(NOT_JSON_ARRAY.to_string()));
}

#[test]
fn argv_checks_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("wrap");
    std::fs::write(&exe, "#!/bin/sh\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = exe.to_str().unwrap().to_string();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    let plain = plain.to_str().unwrap().to_string();
    let check = |argv: &[&str], cli: &str| check_argv(&argv.iter().map(|s| s.to_string()).collect::<Vec<_>>(), cli);
    assert_eq!(check(&[&exe, "x"], "/opt/claude"), Ok(()));
    assert_eq!(check(&[], "/c"), Err(NO_LAUNCHER.to_string()));
    assert_eq!(check(&["wrap"], "/c"), Err(NOT_ABSOLUTE.to_string()));
    assert_eq!(
        check(&["/opt/claude/cli"], "/opt/claude/cli"),
        Err("launcher `/opt/claude/cli` is Claude Code's own path".to_string())
    );
    assert_eq!(
        check(&["/fx/bin/x.js"], "/c"),
        Err("launcher `/fx/bin/x.js` is a script the SDK would run in place of Claude Code".to_string())
    );
    assert_eq!(
        check(&["/fx/nope"], "/c"),
        Err("launcher `/fx/nope` does not exist or is not an executable regular file".to_string())
    );
    assert!(check(&[&plain], "/c")
        .unwrap_err()
        .ends_with("is not an executable regular file"));
    let d = dir.path().to_str().unwrap();
    assert!(check(&[d], "/c")
        .unwrap_err()
        .ends_with("is not an executable regular file"));
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn files_in_order_later_wins_env_key_wins_within_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(resolve_in(d, "/c"), Resolution::None);
    write(
        &d.join(BASE_FILE),
        r#"{"processWrapper":"/bin/sh -c","env":{"CLAUDE_CODE_PROCESS_WRAPPER":"/bin/true"}}"#,
    );
    assert_eq!(
        resolve_in(d, "/c"),
        Resolution::Usable {
            argv: vec!["/bin/true".into()],
            source: display(&d.join(BASE_FILE))
        }
    );
    // An empty env value is unset: processWrapper counts.
    write(
        &d.join(BASE_FILE),
        r#"{"processWrapper":"/bin/sh -c","env":{"CLAUDE_CODE_PROCESS_WRAPPER":""}}"#,
    );
    assert!(matches!(resolve_in(d, "/c"), Resolution::Usable { argv, .. } if argv == ["/bin/sh", "-c"]));
    let drop = d.join(DROP_IN_DIR);
    write(&drop.join("20-b.json"), r#"{"processWrapper":"wrap"}"#);
    write(&drop.join("10-a.json"), r#"{"processWrapper":"/bin/true"}"#);
    write(&drop.join("30-none.json"), r#"{"other":1}"#);
    write(&drop.join(".40-hidden.json"), "not json");
    write(&drop.join("50-upper.JSON"), "not json");
    assert_eq!(
        resolve_in(d, "/c"),
        Resolution::Unusable {
            source: display(&drop.join("20-b.json")),
            reason: NOT_ABSOLUTE.into()
        }
    );
    write(&drop.join("60-bad.json"), "[1]");
    assert_eq!(
        resolve_in(d, "/c"),
        Resolution::Unreadable {
            reason: NOT_OBJECT.into(),
            path: display(&drop.join("60-bad.json"))
        }
    );
    write(&drop.join("60-bad.json"), "{");
    assert!(matches!(resolve_in(d, "/c"), Resolution::Unreadable { reason, .. } if reason == INVALID_JSON));
    std::fs::remove_file(drop.join("60-bad.json")).unwrap();
    std::fs::create_dir(drop.join("70-dir.json")).unwrap();
    assert!(matches!(resolve_in(d, "/c"), Resolution::Unreadable { reason, .. } if reason == IS_DIRECTORY));
    std::fs::remove_dir(drop.join("70-dir.json")).unwrap();
    std::os::unix::fs::symlink(d.join(BASE_FILE), drop.join("80-link.json")).unwrap();
    assert!(matches!(resolve_in(d, "/c"), Resolution::Unreadable { reason, .. } if reason == NOT_REGULAR));
    std::fs::remove_file(drop.join("80-link.json")).unwrap();
    nix::unistd::mkfifo(
        &drop.join("90-fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    assert!(matches!(resolve_in(d, "/c"), Resolution::Unreadable { reason, .. } if reason == NOT_REGULAR));
    std::fs::remove_file(drop.join("90-fifo.json")).unwrap();
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(2 << 20));
    write(&drop.join("95-big.json"), &big);
    assert!(matches!(resolve_in(d, "/c"), Resolution::Unreadable { reason, .. } if reason == TOO_LARGE));
}

#[test]
fn wire_shapes_keep_the_recorded_member_order() {
    let enc = |r: &Resolution| String::from_utf8(gojson::to_go_json(r)).unwrap();
    assert_eq!(enc(&Resolution::None), r#"{"status":"none"}"#);
    assert_eq!(
        enc(&Resolution::Usable {
            argv: vec!["/a".into(), "b".into()],
            source: "/s".into()
        }),
        r#"{"status":"usable","argv":["/a","b"],"source":"/s"}"#
    );
    assert_eq!(
        enc(&Resolution::Unusable {
            source: "/s".into(),
            reason: "r".into()
        }),
        r#"{"status":"unusable","source":"/s","reason":"r"}"#
    );
    assert_eq!(
        enc(&Resolution::Unreadable {
            reason: "r".into(),
            path: "/p".into()
        }),
        r#"{"status":"unreadable","reason":"r","path":"/p"}"#
    );
}

#[test]
fn the_override_applies_only_while_the_system_folder_holds_no_policy() {
    let system = tempfile::tempdir().unwrap();
    let sys = system.path();
    let asked = Some(OsString::from("/tmp/elsewhere"));
    assert_eq!(choose_dir(sys, None), (sys.to_path_buf(), None));
    assert_eq!(choose_dir(sys, Some(OsString::new())), (sys.to_path_buf(), None));
    assert_eq!(choose_dir(sys, asked.clone()), (PathBuf::from("/tmp/elsewhere"), None));
    // A drop-in folder without a drop-in holds no policy.
    write(&sys.join(DROP_IN_DIR).join(".hidden.json"), "{}");
    assert_eq!(choose_dir(sys, asked.clone()), (PathBuf::from("/tmp/elsewhere"), None));
    let note = format!(
        "[launcher] CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR ignored: {} holds this host's policy",
        sys.display()
    );
    write(&sys.join(DROP_IN_DIR).join("a.json"), "{}");
    assert_eq!(choose_dir(sys, asked.clone()), (sys.to_path_buf(), Some(note.clone())));
    std::fs::remove_file(sys.join(DROP_IN_DIR).join("a.json")).unwrap();
    write(&sys.join(BASE_FILE), "not even JSON");
    assert_eq!(choose_dir(sys, asked), (sys.to_path_buf(), Some(note)));
}
