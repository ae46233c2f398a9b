//! The listener security configs through the whole configuration: several listeners, per
//! listener overrides, what start-up refuses, and secrets kept out of logs and DescribeConfigs.

use super::listeners::SecurityProtocol;
use super::security::ClientAuth;
use super::BrokerConfig;

const JAAS: &str =
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;

fn load(items: &[&str]) -> anyhow::Result<BrokerConfig> {
    BrokerConfig::from_overrides(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

fn refusal(items: &[&str]) -> String {
    format!("{:#}", load(items).unwrap_err())
}

#[test]
fn several_listeners_with_per_listener_overrides() {
    let config = load(&[
        "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
        "advertised.listeners=PLAINTEXT://public:9092,SASL_SSL://public:9094",
        "ssl.keystore.location=/etc/onelog/server.pem",
        "ssl.truststore.location=/etc/onelog/ca.pem",
        "ssl.client.auth=required",
        "listener.name.sasl_ssl.ssl.client.auth=none",
        &format!("listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}"),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN",
    ])
    .expect("loads");
    let listeners = &config.node.listeners;
    let protocols: Vec<SecurityProtocol> = listeners.iter().map(|l| l.protocol).collect();
    assert_eq!(protocols, [SecurityProtocol::Plaintext, SecurityProtocol::Ssl, SecurityProtocol::SaslSsl]);
    assert_eq!(listeners[1].tls.as_ref().unwrap().client_auth, ClientAuth::Required);
    assert_eq!(listeners[2].tls.as_ref().unwrap().client_auth, ClientAuth::None);
    let sasl = listeners[2].sasl.as_ref().unwrap();
    assert_eq!(sasl.mechanisms, ["PLAIN"]);
    assert_eq!(sasl.plain_users["alice"], "alice-secret");
    assert!(listeners[0].tls.is_none() && listeners[0].sasl.is_none());
    let advertised: Vec<String> = config.node.advertised.iter().map(|e| e.to_string()).collect();
    assert_eq!(advertised, ["PLAINTEXT://public:9092", "SASL_SSL://public:9094"]);
    assert_eq!(config.node.advertised_kafka, "public:9092");
    // The password is in neither the start-up log line nor DescribeConfigs.
    assert!(!config.describe_set().contains("alice-secret"), "{}", config.describe_set());
    assert!(config.entries().all(|(_, value, _, _)| !value.contains("alice-secret")));
}

#[test]
fn start_up_refuses_what_cannot_serve() {
    assert!(refusal(&["listeners=SSL://127.0.0.1:9093"]).contains("ssl.keystore.location is not set"));
    assert!(refusal(&[
        "listeners=SSL://127.0.0.1:9093",
        "ssl.keystore.location=/k.pem",
        "ssl.client.auth=required"
    ])
    .contains("ssl.truststore.location"));
    assert!(refusal(&[
        "listeners=SSL://127.0.0.1:9093",
        "ssl.keystore.location=/k.pem",
        "ssl.keystore.type=JKS"
    ])
    .contains("PEM files only"));
    assert!(refusal(&["listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=GSSAPI"])
        .contains("not GSSAPI"));
    assert!(refusal(&["listeners=PLAINTEXT://a:1,PLAINTEXT://b:2"])
        .contains("Each listener must have a different name"));
    assert!(refusal(&["listeners=CLIENT://127.0.0.1:1"])
        .contains("No security protocol defined for listener CLIENT"));
    assert!(refusal(&["listener.name.ssl.not.a.config=1"]).contains("unknown broker config"));
    assert!(refusal(&[
        "listeners=SSL://127.0.0.1:9093",
        "ssl.keystore.location=/k.pem",
        "ssl.principal.mapping.rules=RULE:nonsense"
    ])
    .contains("Invalid rule"));
    // A listener whose name is not a protocol, mapped to one.
    let config =
        load(&["listeners=CLIENT://127.0.0.1:1", "listener.security.protocol.map=CLIENT:PLAINTEXT"]).unwrap();
    assert_eq!(&*config.node.listeners[0].endpoint.name, "CLIENT");
}

#[test]
fn the_raft_and_admin_ports_tls() {
    let config = load(&[]).expect("loads");
    assert!(config.node.raft_tls.is_none() && config.node.admin_tls.is_none(), "opt-in");
    let config = load(&[
        "onelog.raft.ssl.keystore.location=/etc/onelog/node-1.pem",
        "onelog.raft.ssl.truststore.location=/etc/onelog/ca.pem",
        "onelog.admin.ssl.keystore.location=/etc/onelog/admin.pem",
    ])
    .expect("loads");
    let raft = config.node.raft_tls.as_ref().expect("raft TLS");
    assert_eq!(raft.client_auth, ClientAuth::Required, "mutual TLS between nodes");
    let admin = config.node.admin_tls.as_ref().expect("admin TLS");
    assert_eq!((admin.client_auth, admin.truststore.is_none()), (ClientAuth::None, true));
    assert!(refusal(&["onelog.raft.ssl.keystore.location=/k.pem"]).contains("set both"));
    assert!(refusal(&["onelog.raft.ssl.truststore.location=/ca.pem"]).contains("set both"));
    assert!(refusal(&["onelog.admin.ssl.keystore.location=/k.pem", "onelog.admin.ssl.client.auth=required"])
        .contains("onelog.admin.ssl.truststore.location"));
    assert!(refusal(&["onelog.admin.ssl.truststore.location=/ca.pem"])
        .contains("is set but onelog.admin.ssl.keystore.location is not"));
    // Not Kafka listener configs: no per-listener override of them.
    assert!(refusal(&["listener.name.ssl.onelog.raft.ssl.keystore.location=/k.pem"])
        .contains("unknown broker config"));
}
