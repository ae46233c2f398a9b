use std::path::Path;

use super::*;

fn given(text: &str) -> Vec<(String, String, usize)> {
    parse_file(Path::new("t.toml"), text)
        .expect("parses")
        .into_iter()
        .map(|g| match g.origin {
            Origin::File { line, .. } => (g.key, g.value, line),
            other => panic!("origin {other:?}"),
        })
        .collect()
}

#[test]
fn dotted_quoted_and_sectioned_keys_flatten_to_kafka_names() {
    let text = "# comment\nlog.retention.ms = 1000\n\"message.max.bytes\" = 2048\n\n[auto.create.topics]\nenable = false\n";
    assert_eq!(
        given(text),
        vec![
            ("log.retention.ms".into(), "1000".into(), 2),
            ("message.max.bytes".into(), "2048".into(), 3),
            ("auto.create.topics.enable".into(), "false".into(), 6),
        ]
    );
}

#[test]
fn strings_and_lists_become_the_text_a_flag_would_give() {
    let text = "listeners = \"PLAINTEXT://127.0.0.1:9092\"\nonelog.peers = [\"2=a:1@b:2\", \"3=c:3@d:4\"]\n";
    assert_eq!(
        given(text),
        vec![
            ("listeners".into(), "PLAINTEXT://127.0.0.1:9092".into(), 1),
            ("onelog.peers".into(), "2=a:1@b:2,3=c:3@d:4".into(), 2),
        ]
    );
}

#[test]
fn a_syntax_error_names_the_file_and_line() {
    let err = parse_file(Path::new("t.toml"), "num.partitions = 3\nlog.retention.ms = = 5\n").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("t.toml") && text.contains("line 2"), "{text}");
}

#[test]
fn a_value_no_config_can_hold_names_its_key_and_line() {
    let err =
        parse_file(Path::new("t.toml"), "num.partitions = 3\nlog.retention.ms = 1979-05-27\n").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("log.retention.ms") && text.contains("t.toml line 2"), "{text}");
}

#[test]
fn env_names_follow_the_key() {
    assert_eq!(env_name("log.retention.ms"), "ONELOG_LOG_RETENTION_MS");
    assert_eq!(env_name("onelog.request.read.timeout.ms"), "ONELOG_REQUEST_READ_TIMEOUT_MS");
    let found = from_env(["node.id", "log.dirs"].into_iter(), |name| {
        (name == "ONELOG_NODE_ID").then(|| "7".to_string())
    });
    assert_eq!(
        found,
        vec![Given {
            key: "node.id".into(),
            value: "7".into(),
            origin: Origin::Env("ONELOG_NODE_ID".into())
        }]
    );
}

#[test]
fn a_flag_without_equals_is_refused() {
    assert!(from_flags(&["num.partitions".into()]).is_err());
    assert_eq!(from_flags(&["a.b=c=d".into()]).expect("ok")[0].value, "c=d");
}

#[test]
fn a_key_that_starts_another_must_be_quoted_and_the_error_says_so() {
    let clash = "max.connections = 5\nmax.connections.per.ip = 2\n";
    let text = format!("{:#}", parse_file(Path::new("t.toml"), clash).unwrap_err());
    assert!(text.contains("line 2") && text.contains("must be quoted"), "{text}");
    let quoted = "\"max.connections\" = 5\nmax.connections.per.ip = 2\n";
    let keys: Vec<String> = given(quoted).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, vec!["max.connections", "max.connections.per.ip"]);
}
