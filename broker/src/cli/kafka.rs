//! The Kafka side of `onelog admin`: one connection, versions negotiated with ApiVersions,
//! typed requests one at a time (encode, decode and version choice are
//! `kafka_compat::client`'s, shared with the harness's raw client).
//!
//! Like a Kafka admin client it asks the bootstrap address for Metadata and goes where that
//! points: onelog's Raft leader is the controller, the leader of every partition and the
//! coordinator of every group and transaction, so one connection to it answers everything.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use kafka_compat::client::{self, Versions, API_VERSIONS_VERSION};
use kafka_compat::error_code;
use kafka_compat::frame::{frame_body_len, FRAME_PREFIX_BYTES};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::net_error;

/// The client id of every request, so broker logs show where it came from.
const CLIENT_ID: &str = "onelog-admin";
const KAFKA_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const KAFKA_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response frame read, in bytes.
const KAFKA_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// How long to wait for the bootstrap node to know a leader (an election under way).
const LEADER_WAIT: Duration = Duration::from_secs(10);

/// One connection to a broker, versions negotiated.
pub struct Kafka {
    addr: String,
    stream: TcpStream,
    versions: Versions,
    next_correlation_id: i32,
}

impl Kafka {
    /// Connects to `addr` and negotiates versions.
    pub async fn connect(addr: &str) -> Result<Self> {
        let stream = match tokio::time::timeout(KAFKA_CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Err(_) => {
                bail!("cannot reach the Kafka API at {addr}: no connection within {KAFKA_CONNECT_TIMEOUT:?}")
            }
            Ok(Err(e)) => bail!("cannot reach the Kafka API at {addr}: {}", net_error(&e)),
            Ok(Ok(stream)) => stream,
        };
        stream.set_nodelay(true)?;
        let mut kafka =
            Self { addr: addr.to_string(), stream, versions: Versions::default(), next_correlation_id: 1 };
        let request = client::api_versions_request(CLIENT_ID, env!("CARGO_PKG_VERSION"));
        let response = kafka.send(API_VERSIONS_VERSION, &request).await?;
        if response.error_code != error_code::NONE {
            bail!("ApiVersions at {addr}: {}", error_code::name(response.error_code));
        }
        kafka.versions = Versions::from_response(&response);
        Ok(kafka)
    }

    /// Connects to the first of `bootstrap` that answers, as a Kafka client does.
    async fn bootstrap(bootstrap: &[String]) -> Result<Self> {
        let mut failures = Vec::new();
        for addr in bootstrap {
            match Self::connect(addr).await {
                Ok(kafka) => return Ok(kafka),
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
        bail!("{}", failures.join("; "))
    }

    /// Connects to the leader that a `bootstrap` node names in Metadata (the controller).
    pub async fn leader(bootstrap: &[String]) -> Result<Self> {
        let mut kafka = Self::bootstrap(bootstrap).await?;
        let bootstrap = kafka.addr.clone();
        let started = Instant::now();
        loop {
            let metadata = kafka.metadata(Some(Vec::new())).await?;
            let controller = metadata.controller_id.0;
            if controller >= 0 {
                let broker =
                    metadata.brokers.iter().find(|b| b.node_id.0 == controller).ok_or_else(|| {
                        anyhow!("Metadata at {bootstrap} names leader {controller} but not its address")
                    })?;
                let leader_addr = format!("{}:{}", broker.host, broker.port);
                if leader_addr == kafka.addr {
                    return Ok(kafka);
                }
                return Self::connect(&leader_addr).await.with_context(|| {
                    format!("following Metadata at {bootstrap} to the leader, node {controller}")
                });
            }
            if started.elapsed() > LEADER_WAIT {
                bail!("the node at {bootstrap} knows no leader after {LEADER_WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Metadata for `topics` (None: all), never creating a topic.
    pub async fn metadata(&mut self, topics: Option<Vec<String>>) -> Result<MetadataResponse> {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::TopicName;
        let topics = topics.map(|names| {
            names
                .into_iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(n.into()))))
                .collect()
        });
        // v4+: allow_auto_topic_creation, so describing a mistyped name does not create it.
        let request = MetadataRequest::default().with_topics(topics).with_allow_auto_topic_creation(false);
        self.request(12, &request).await
    }

    /// Sends `request` at the highest version both sides and `cap` allow, returns its response.
    pub async fn request<R: Request>(&mut self, cap: i16, request: &R) -> Result<R::Response> {
        let version = self.versions.pick::<R>(cap).with_context(|| format!("the broker at {}", self.addr))?;
        self.send(version, request).await
    }

    async fn send<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let frame = client::encode_request(CLIENT_ID, correlation_id, version, request)?;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let mut prefix = [0u8; FRAME_PREFIX_BYTES];
            self.stream.read_exact(&mut prefix).await?;
            let len = frame_body_len(prefix, KAFKA_RESPONSE_BYTES_MAX)?;
            let mut body = BytesMut::zeroed(len);
            self.stream.read_exact(&mut body).await?;
            anyhow::Ok(body.freeze())
        };
        let body = tokio::time::timeout(KAFKA_RESPONSE_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                anyhow!("no answer from the Kafka API at {} within {KAFKA_RESPONSE_TIMEOUT:?}", self.addr)
            })?
            .with_context(|| format!("the Kafka API at {}", self.addr))?;
        Ok(client::decode_response::<R>(body, correlation_id, version)?)
    }
}

/// `Err` naming `what` and the Kafka error unless `code` is NONE.
pub fn check(code: i16, what: impl FnOnce() -> String) -> Result<()> {
    if code == error_code::NONE {
        Ok(())
    } else {
        bail!("{}: {}", what(), error_code::name(code))
    }
}
