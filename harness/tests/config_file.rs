//! The broker's configuration file, environment and flags (issue 16), against real onelog
//! processes: a TOML file with Kafka's property names, `ONELOG_*` variables over it, flags over
//! both, each value reported by DescribeConfigs as a static broker config and acted on; and
//! every kind of bad configuration stops start-up with a message that names the key, the value,
//! where it was set and what is allowed, or the line of a file that does not parse, or the
//! listener whose port is taken.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::process::onelog_binary;
use harness::raw_ops::create_topics;
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::UNKNOWN_TOPIC_OR_PARTITION;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{DescribeConfigsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// DescribeConfigs' ConfigSource codes.
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
/// How long a broker with a bad configuration may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

const FILE: &str = "\
# onelog broker configuration: Kafka's property names
auto.create.topics.enable = false
num.partitions = 3
log.retention.ms = 1000

[log.segment]
bytes = 1048576
";

/// (value, source) of each broker config named, from this node's DescribeConfigs.
async fn describe_broker(client: &mut RawClient, keys: &[&str]) -> Result<Vec<(String, String, i8)>> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"))
        .with_configuration_keys(Some(keys.iter().map(|k| StrBytes::from_string(k.to_string())).collect()));
    let response =
        client.request(4, &DescribeConfigsRequest::default().with_resources(vec![resource])).await?;
    let result = response.results.first().context("no result")?;
    ensure!(result.error_code == 0, "DescribeConfigs: {:?}", result.error_message);
    Ok(result
        .configs
        .iter()
        .map(|c| {
            (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), c.config_source)
        })
        .collect())
}

/// The file sets configs, an `ONELOG_*` variable overrides the file and a flag overrides both;
/// DescribeConfigs reports each as a static broker config and the broker acts on them.
#[tokio::test(flavor = "multi_thread")]
async fn the_file_then_the_environment_then_flags_set_kafka_configs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broker.toml");
    std::fs::write(&path, FILE).expect("write the file");
    let options = BrokerOptions::default()
        .arg("--config-file")
        .arg(path.display())
        .env("ONELOG_LOG_RETENTION_MS", "2000")
        .config("num.partitions", 2);
    let broker = Broker::start(options).expect("onelog");
    let result = layered(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn layered(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let keys = [
        "auto.create.topics.enable",
        "delete.topic.enable",
        "log.retention.ms",
        "log.segment.bytes",
        "num.partitions",
    ];
    let described = describe_broker(&mut client, &keys).await?;
    let expected = [
        ("auto.create.topics.enable", "false", STATIC_BROKER_CONFIG),
        ("delete.topic.enable", "true", DEFAULT_CONFIG),
        ("log.retention.ms", "2000", STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1048576", STATIC_BROKER_CONFIG),
        ("num.partitions", "2", STATIC_BROKER_CONFIG),
    ];
    let expected: Vec<(String, String, i8)> =
        expected.iter().map(|(k, v, s)| (k.to_string(), v.to_string(), *s)).collect();
    ensure!(described == expected, "DescribeConfigs {described:?}, expected {expected:?}");

    // Acted on: the flag's partition count for a topic created without one, and no
    // auto-creation (the file's setting).
    let created = create_topics(&mut client, &[("defaulted", -1)]).await?;
    ensure!(created == vec![("defaulted".to_string(), 0)], "{created:?}");
    let named = |name: &str| {
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(name.into()))))
    };
    let request = MetadataRequest::default()
        .with_topics(Some(vec![named("defaulted"), named("never-created")]))
        .with_allow_auto_topic_creation(true);
    let metadata = client.request(9, &request).await?;
    let by_name =
        |name: &str| metadata.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name));
    ensure!(by_name("defaulted").is_some_and(|t| t.partitions.len() == 2), "{metadata:?}");
    ensure!(
        by_name("never-created").is_some_and(|t| t.error_code == UNKNOWN_TOPIC_OR_PARTITION),
        "auto-creation is off: {metadata:?}"
    );
    Ok(())
}

/// Without `--config-file`, `onelog.toml` in the working directory is read.
#[tokio::test(flavor = "multi_thread")]
async fn onelog_toml_in_the_working_directory_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("onelog.toml"), "num.partitions = 4\n").expect("write the file");
    let broker = Broker::start(BrokerOptions::default().current_dir(dir.path())).expect("onelog");
    let result = async {
        let mut client = RawClient::connect_negotiated(broker.addr()).await?;
        let described = describe_broker(&mut client, &["num.partitions"]).await?;
        ensure!(
            described == vec![("num.partitions".into(), "4".into(), STATIC_BROKER_CONFIG)],
            "{described:?}"
        );
        Ok(())
    }
    .await;
    broker.unwrap_or_dump(result);
}

/// Runs onelog with `args` (and a data directory, and any free port unless `args` name one), which must exit non-zero within
/// [`EXIT_TIMEOUT`]; returns what it printed.
fn start_fails(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let data = cwd.join("data");
    let mut command = Command::new(onelog_binary("debug")?);
    command.arg("--data-dir").arg(&data);
    if !args.contains(&"--kafka-listen") {
        command.arg("--kafka-listen").arg("127.0.0.1:0");
    }
    let mut child = command
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            anyhow::bail!("onelog {args:?} still running after {EXIT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut printed = String::new();
    child.stdout.take().context("stdout")?.read_to_string(&mut printed)?;
    child.stderr.take().context("stderr")?.read_to_string(&mut printed)?;
    ensure!(!status.success(), "onelog {args:?} started: {printed}");
    Ok(printed)
}

fn assert_mentions(printed: &str, parts: &[&str]) {
    for part in parts {
        assert!(printed.contains(part), "expected {part:?} in:\n{printed}");
    }
}

/// Regression for issue 16's bad-input list: each bad configuration stops start-up (exit
/// non-zero, nothing served) with a message that says what to fix.
#[test]
fn bad_configuration_stops_start_up_and_says_what_to_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path();
    let file = |name: &str, text: &str| {
        let path = cwd.join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };

    // A file that does not parse: its name and the line.
    let broken = file("broken.toml", "num.partitions = 3\n\nlog.retention.ms = = 5\n");
    let printed = start_fails(cwd, &["--config-file", &broken], &[]).expect("run");
    assert_mentions(&printed, &["broken.toml", "line 3"]);

    // An unknown key: the key, where, and the known one it resembles.
    let typo = file("typo.toml", "log.retention.msx = 5\n");
    let printed = start_fails(cwd, &["--config-file", &typo], &[]).expect("run");
    assert_mentions(
        &printed,
        &["log.retention.msx", "typo.toml line 1", "unknown broker config", "did you mean log.retention.ms"],
    );

    // A value out of range: the key, the value, the line and the range.
    let range = file("range.toml", "# partitions\nnum.partitions = 0\n");
    let printed = start_fails(cwd, &["--config-file", &range], &[]).expect("run");
    assert_mentions(&printed, &["num.partitions=0", "range.toml line 2", "[1, 2147483647]"]);

    // A bad value from the environment names the variable.
    let env = [("ONELOG_TRANSACTION_MAX_TIMEOUT_MS", "soon")];
    let printed = start_fails(cwd, &[], &env).expect("run");
    assert_mentions(
        &printed,
        &["transaction.max.timeout.ms=soon", "ONELOG_TRANSACTION_MAX_TIMEOUT_MS", "must be an integer"],
    );

    // A flag's wrong type.
    let printed = start_fails(cwd, &["--config", "auto.create.topics.enable=yes"], &[]).expect("run");
    assert_mentions(&printed, &["auto.create.topics.enable=yes", "command line", "true or false"]);

    // A named file that is not there.
    let printed = start_fails(cwd, &["--config-file", "absent.toml"], &[]).expect("run");
    assert_mentions(&printed, &["absent.toml", "no such file"]);

    // A Raft group placement that cannot be: the setting and the problem (issue 32).
    let args = ["--config", "onelog.raft.groups=2", "--config", "onelog.raft.replication.factor=2"];
    let printed = start_fails(cwd, &args, &[]).expect("run");
    assert_mentions(&printed, &["onelog.raft.replication.factor 2 must be between 1 and the 1 nodes"]);
    let args = ["--config", "onelog.raft.groups=2", "--config", "onelog.raft.group.3.voters=1"];
    let printed = start_fails(cwd, &args, &[]).expect("run");
    assert_mentions(&printed, &["onelog.raft.group.3.voters names group 3", "the cluster has 2 groups"]);

    // A listener whose port is taken: the listener and the port.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let at = format!("PLAINTEXT://127.0.0.1:{port}");
    let printed = start_fails(cwd, &["--kafka-listen", &at], &[]).expect("run");
    assert_mentions(&printed, &["Kafka listener", &port, "(listeners)", "in use"]);
}
