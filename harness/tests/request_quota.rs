//! Per-principal quotas over SASL: the `user` quota entity is the authenticated principal's
//! name, so one tenant over its quota is throttled while another is not.
//!
//! User `greedy` gets `request_percentage=1` (1 % of one thread: 10 ms of thread time per
//! second) and sends Metadata requests back to back; its responses come to carry
//! `throttle_time_ms` (Kafka's ClientRequestQuotaManager), and the connection is muted for
//! that long. User `polite`, without a quota, sends the same on another connection and is
//! never throttled.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::raw_ops::create_topics_ok;
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_greedy="greedy-secret" user_polite="polite-secret";"#;

async fn login(cluster: &Cluster, user: &str) -> Result<RawClient> {
    let mut client = RawClient::connect(cluster.listener_addr(1, "SASL_PLAINTEXT")).await?;
    let handshake: SaslHandshakeResponse = client
        .request(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")))
        .await?;
    ensure!(handshake.error_code == 0, "SaslHandshake: {}", handshake.error_code);
    let token = format!("\0{user}\0{user}-secret");
    let answer: SaslAuthenticateResponse = client
        .request(2, &SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into()))
        .await?;
    ensure!(answer.error_code == 0, "login as {user}: {answer:?}");
    Ok(client)
}

/// Up to `requests` Metadata requests, stopping at the first throttled answer: its throttle
/// (0 if none was), so that the mute it starts is still ahead of the caller's next request.
async fn metadata_burst(client: &mut RawClient, requests: usize) -> Result<i32> {
    for _ in 0..requests {
        let answer: MetadataResponse =
            client.request(12, &MetadataRequest::default().with_topics(None)).await?;
        if answer.throttle_time_ms > 0 {
            return Ok(answer.throttle_time_ms);
        }
    }
    Ok(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_principal_over_its_request_quota_is_throttled_and_another_is_not() {
    let options = ClusterOptions::new(1)
        .listener("SASL_PLAINTEXT", "SASL_PLAINTEXT")
        .config("sasl.enabled.mechanisms", "PLAIN")
        .config("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS)
        .config("log.segment.bytes", 1024 * 1024);
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let mut admin = RawClient::connect_negotiated(cluster.kafka_addr(1)).await?;
        // Topics make a Metadata answer cost something to build.
        let topics: Vec<(String, i32)> = (0..20).map(|i| (format!("rq-{i}"), 4)).collect();
        let names: Vec<(&str, i32)> = topics.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        create_topics_ok(&mut admin, &names).await?;
        let entry = EntryData::default()
            .with_entity(vec![EntityData::default()
                .with_entity_type(StrBytes::from_static_str("user"))
                .with_entity_name(Some(StrBytes::from_static_str("greedy")))])
            .with_ops(vec![OpData::default()
                .with_key(StrBytes::from_static_str("request_percentage"))
                .with_value(1.0)]);
        let altered: AlterClientQuotasResponse =
            admin.request(1, &AlterClientQuotasRequest::default().with_entries(vec![entry])).await?;
        ensure!(altered.entries.iter().all(|e| e.error_code == 0), "{altered:?}");

        let mut greedy = login(&cluster, "greedy").await?;
        let mut polite = login(&cluster, "polite").await?;
        let started = Instant::now();
        let mut throttled = 0;
        while throttled == 0 && started.elapsed() < Duration::from_secs(60) {
            throttled = metadata_burst(&mut greedy, 200).await?;
        }
        ensure!(throttled > 0, "greedy was never throttled in 60 s of back-to-back Metadata");
        // The mute: the next request of the throttled connection waits out the throttle.
        let before = Instant::now();
        metadata_burst(&mut greedy, 1).await?;
        let waited = before.elapsed();
        ensure!(
            waited >= Duration::from_millis(throttled as u64 / 2),
            "throttled {throttled} ms, yet the next request was answered after {waited:?}"
        );
        let polite_most = metadata_burst(&mut polite, 400).await.context("polite")?;
        ensure!(polite_most == 0, "polite (no quota) was throttled {polite_most} ms");
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}
