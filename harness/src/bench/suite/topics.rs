//! `txbench CreateTopics` (Java `CreateTopics`): creates the benches' topics with the admin
//! client on KAFKA_CONNECTION — TOPICS (default topic1,topic2), each with PARTITIONS partitions
//! (default 1), REPLICATION_FACTOR replicas (default 3) and the topic configs of TOPIC_CONFIG
//! ("k=v,k=v", e.g. max.message.bytes=2097152, which PAYLOAD_BYTES=1048576 needs). A topic that
//! exists already is reported on stderr ("exists NAME") and left as it is; any other failure
//! is reported ("failed NAME: …") and makes the command fail.

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::config::{pairs, parse, var};
use crate::kafka::client_config;

pub async fn create_topics() -> Result<()> {
    let bootstrap = var("KAFKA_CONNECTION").context("environment variable KAFKA_CONNECTION is required")?;
    let topics = var("TOPICS").unwrap_or_else(|| "topic1,topic2".to_owned());
    let partitions: i32 = parse("PARTITIONS", &var("PARTITIONS").unwrap_or_else(|| "1".to_owned()))?;
    let replication: i32 =
        parse("REPLICATION_FACTOR", &var("REPLICATION_FACTOR").unwrap_or_else(|| "3".to_owned()))?;
    let configs = pairs("TOPIC_CONFIG", &var("TOPIC_CONFIG").unwrap_or_default())?;
    let requested: Vec<NewTopic<'_>> = topics
        .split(',')
        .map(|name| {
            let topic = NewTopic::new(name.trim(), partitions, TopicReplication::Fixed(replication));
            configs.iter().fold(topic, |topic, (key, value)| topic.set(key, value))
        })
        .collect();
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap).create()?;
    let mut failed = false;
    for result in admin.create_topics(&requested, &AdminOptions::new()).await? {
        match result {
            Ok(name) => eprintln!("created {name}"),
            Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => eprintln!("exists {name}"),
            Err((name, code)) => {
                eprintln!("failed {name}: {code}");
                failed = true;
            }
        }
    }
    if failed {
        bail!("creating topics failed");
    }
    Ok(())
}
