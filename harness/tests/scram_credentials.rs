//! SCRAM credentials (KIP-554 DescribeUserScramCredentials / AlterUserScramCredentials) on a
//! three-node cluster, administered with Kafka's own `kafka-configs.sh` (kafka.admin.ConfigCommand):
//!
//! - `--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=…],SCRAM-SHA-512=[password=…]'`
//!   sent to a follower is forwarded to the leader and reaches every node's describe; the CLI's
//!   `--describe` lists both mechanisms with their iterations; `--delete-config SCRAM-SHA-512`
//!   leaves SHA-256 alone;
//! - raw requests get Kafka's per-user codes and messages: UNSUPPORTED_SASL_MECHANISM, too few
//!   and too many iterations and an empty name (UNACCEPTABLE_CREDENTIAL), one (user, mechanism)
//!   twice (DUPLICATE_RESOURCE), deleting a missing credential (RESOURCE_NOT_FOUND), a salted
//!   password of the wrong length; one bad user never fails another in the same request;
//!   describe's RESOURCE_NOT_FOUND and DUPLICATE_RESOURCE; no salt or key in any answer;
//! - the credentials survive a kill -9 of the leader.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::java;
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    DUPLICATE_RESOURCE, NONE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

const APPLY_TIMEOUT: Duration = Duration::from_secs(10);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// `kafka-configs.sh --bootstrap-server bootstrap args`: whether it succeeded, and its output.
fn kafka_configs(bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    java::config_command(bootstrap, args)
}

async fn describe(
    client: &mut RawClient,
    users: Option<&[&str]>,
) -> Result<DescribeUserScramCredentialsResponse> {
    let users = users.map(|u| u.iter().map(|n| UserName::default().with_name(s(n))).collect());
    client.request(0, &DescribeUserScramCredentialsRequest::default().with_users(users)).await
}

/// (mechanism, iterations) per user as node `client` describes all users, sorted.
async fn described(client: &mut RawClient) -> Result<Vec<(String, Vec<(i8, i32)>)>> {
    let response = describe(client, None).await?;
    ensure!(response.error_code == NONE, "{response:?}");
    let mut users: Vec<(String, Vec<(i8, i32)>)> = response
        .results
        .iter()
        .map(|r| {
            let mut infos: Vec<(i8, i32)> =
                r.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect();
            infos.sort();
            (r.user.to_string(), infos)
        })
        .collect();
    users.sort();
    Ok(users)
}

/// Waits until every node describes `expected`.
async fn await_everywhere(cluster: &Cluster, expected: &[(String, Vec<(i8, i32)>)]) -> Result<()> {
    for id in cluster.ids() {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(id)).await?;
        let deadline = Instant::now() + APPLY_TIMEOUT;
        loop {
            let seen = described(&mut client).await?;
            if seen == expected {
                break;
            }
            ensure!(Instant::now() < deadline, "node {id} describes {seen:?}, not {expected:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

fn upsert(name: &str, mechanism: i8, iterations: i32, salted_len: usize) -> ScramCredentialUpsertion {
    ScramCredentialUpsertion::default()
        .with_name(s(name))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(vec![7u8; 20].into())
        .with_salted_password(vec![9u8; salted_len].into())
}

fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion::default().with_name(s(name)).with_mechanism(mechanism)
}

async fn alter(
    client: &mut RawClient,
    deletions: Vec<ScramCredentialDeletion>,
    upsertions: Vec<ScramCredentialUpsertion>,
) -> Result<Vec<(String, i16, Option<String>)>> {
    let request =
        AlterUserScramCredentialsRequest::default().with_deletions(deletions).with_upsertions(upsertions);
    let response: AlterUserScramCredentialsResponse = client.request(0, &request).await?;
    let mut results: Vec<_> = response
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code, r.error_message.as_ref().map(|m| m.to_string())))
        .collect();
    results.sort();
    Ok(results)
}

fn result(user: &str, code: i16, message: Option<&str>) -> (String, i16, Option<String>) {
    (user.to_string(), code, message.map(str::to_string))
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_configs_manages_scram_users_and_bad_alterations_get_kafkas_codes() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let follower = *cluster.followers()?.first().context("a follower")?;
    let at_follower = cluster.kafka_addr(follower).to_string();

    // Phase 1: kafka-configs against a follower adds both mechanisms for alice.
    let add = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]";
    let user = ["--entity-type", "users", "--entity-name", "alice"];
    let (ok, text) = kafka_configs(&at_follower, &[&["--alter", "--add-config", add][..], &user].concat())?;
    ensure!(ok && text.contains("Completed updating config for user alice"), "add-config: {text}");
    let both = vec![("alice".to_string(), vec![(1, 8192), (2, 4096)])];
    await_everywhere(cluster, &both).await?;
    let (ok, text) = kafka_configs(&at_follower, &["--describe", "--entity-type", "users"])?;
    ensure!(
        ok && text.contains("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"),
        "describe: {text}"
    );

    // Phase 2: deleting one mechanism leaves the other.
    let (ok, text) =
        kafka_configs(&at_follower, &[&["--alter", "--delete-config", "SCRAM-SHA-512"][..], &user].concat())?;
    ensure!(ok && text.contains("Completed updating config for user alice"), "delete-config: {text}");
    let sha256_only = vec![("alice".to_string(), vec![(1, 8192)])];
    await_everywhere(cluster, &sha256_only).await?;
    let (ok, text) = kafka_configs(&at_follower, &[&["--describe"][..], &user].concat())?;
    ensure!(
        ok && text.contains(
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
        ) && !text.contains("SCRAM-SHA-512="),
        "describe alice: {text}"
    );

    // Phase 3: Kafka's codes, per user, on the leader.
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let results = alter(
        &mut client,
        vec![delete("bob", 2), delete("dup", 1)],
        vec![
            upsert("bob", 1, 4096, 32),
            upsert("carol", 0, 4096, 32),
            upsert("dave", 1, 4095, 32),
            upsert("erin", 2, 16385, 64),
            upsert("", 1, 4096, 32),
            upsert("dup", 1, 4096, 32),
            upsert("frank", 2, 4096, 32),
            upsert("grace", 2, 16384, 64),
        ],
    )
    .await?;
    let want = vec![
        result("", UNACCEPTABLE_CREDENTIAL, Some("Username must not be empty")),
        result("bob", RESOURCE_NOT_FOUND, Some("Attempt to delete a user credential that does not exist")),
        result("carol", UNSUPPORTED_SASL_MECHANISM, Some("Unknown SCRAM mechanism")),
        result("dave", UNACCEPTABLE_CREDENTIAL, Some("Too few iterations")),
        result(
            "dup",
            DUPLICATE_RESOURCE,
            Some("A user credential cannot be altered twice in the same request"),
        ),
        result("erin", UNACCEPTABLE_CREDENTIAL, Some("Too many iterations")),
        result(
            "frank",
            UNACCEPTABLE_CREDENTIAL,
            Some("A SCRAM-SHA-512 salted password is 64 bytes long, not 32"),
        ),
        result("grace", NONE, None),
    ];
    ensure!(results == want, "alter results:\n{results:#?}\nwant:\n{want:#?}");
    let stored = vec![("alice".to_string(), vec![(1, 8192)]), ("grace".to_string(), vec![(2, 16384)])];
    await_everywhere(cluster, &stored).await?;

    // Describe: a missing user, a duplicate, and never a salt or key in the answer.
    let response = describe(&mut client, Some(&["nobody", "alice", "grace", "grace"])).await?;
    let rows: Vec<(String, i16, Option<String>, usize)> = response
        .results
        .iter()
        .map(|r| {
            (
                r.user.to_string(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
                r.credential_infos.len(),
            )
        })
        .collect();
    let want = vec![
        (
            "nobody".into(),
            RESOURCE_NOT_FOUND,
            Some("Attempt to describe a user credential that does not exist: nobody".into()),
            0,
        ),
        // Kafka's default error message of a result: "" (the schema gives no null default).
        ("alice".into(), NONE, Some(String::new()), 1),
        (
            "grace".into(),
            DUPLICATE_RESOURCE,
            Some(
                "Cannot describe SCRAM credentials for the same user twice in a single request: grace".into(),
            ),
            0,
        ),
    ];
    ensure!(rows == want, "describe rows: {rows:?}");

    // Phase 4: the credentials survive a kill -9 of the leader.
    cluster.kill9(leader)?;
    let (new_leader, _) = cluster.wait_for_leader(Duration::from_secs(20))?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(new_leader)).await?;
    let seen = described(&mut client).await?;
    ensure!(seen == stored, "after the leader's kill the new leader {new_leader} describes {seen:?}");
    let results = alter(&mut client, vec![delete("grace", 2)], vec![]).await?;
    ensure!(results == vec![result("grace", NONE, None)], "{results:?}");
    Ok(())
}
