//! Tests of the SCRAM server exchange: RFC 7677's SCRAM-SHA-256 vector end to end, a
//! SHA-512 round trip against a client written here from the RFC with `pbkdf2` and `hmac`,
//! every refusal (wrong password, unknown user, tampered nonce and channel binding, malformed
//! and oversized messages, a third step), a proptest that no input panics, and one exchange
//! over credentials applied through the real state machine store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::Mac;
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership};
use proptest::prelude::*;
use sha2::{Digest, Sha256, Sha512};

use super::*;
use crate::config::BrokerConfig;
use crate::raft::{sm_store, NodeAddr};
use onelog_state::command::{AlterScramCredentialsOp, Command, LeaderStamp, Op};
use onelog_state::scram::UserScramAlteration;

/// RFC 7677 §3.
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn salted(mechanism: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    match mechanism {
        Mechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations).to_vec()
        }
        Mechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations).to_vec()
        }
    }
}

fn stored(mechanism: Mechanism, password: &str, salt: &[u8], iterations: i32) -> ScramCredential {
    let salted = salted(mechanism, password, salt, iterations as u32);
    keys::credential(mechanism, salt, &salted, iterations)
}

/// One user's credential, the others unknown.
fn exchange_for(mechanism: Mechanism, user: &str, credential: ScramCredential) -> ServerExchange {
    let user = user.to_string();
    let lookup = move |u: &str, m: Mechanism| (u == user && m == mechanism).then(|| credential.clone());
    ServerExchange::for_test(mechanism, lookup, None)
}

fn challenge(step: Result<Step, ScramError>) -> String {
    match step {
        Ok(Step::Challenge(c)) => String::from_utf8(c).expect("utf-8 challenge"),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

#[test]
fn rfc7677_sha256_vector_end_to_end() {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
    let credential = stored(Mechanism::Sha256, "pencil", &salt, 4096);
    let lookup = move |u: &str, _: Mechanism| (u == "user").then(|| credential.clone());
    let mut exchange = ServerExchange::for_test(Mechanism::Sha256, lookup, Some(RFC_SERVER_NONCE));
    assert_eq!(challenge(exchange.step(RFC_CLIENT_FIRST.as_bytes())), RFC_SERVER_FIRST);
    let done = exchange.step(RFC_CLIENT_FINAL.as_bytes()).expect("the RFC's proof is accepted");
    assert_eq!(done, Step::Complete { response: RFC_SERVER_FINAL.as_bytes().to_vec(), user: "user".into() });
    assert_eq!(exchange.step(b"c=biws"), Err(ScramError::Ended), "a third step is refused");
}

/// An RFC 5802 client, written from the RFC without the server's code: returns
/// client-final-message and the ServerSignature it expects.
fn client_final<D>(
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    gs2: &str,
) -> (String, Vec<u8>)
where
    D: Digest + Clone + Sync + hmac::digest::core_api::BlockSizeUser,
{
    let attr = |name: &str| {
        server_first
            .split(',')
            .find_map(|a| a.strip_prefix(name))
            .expect("server-first attribute")
            .to_string()
    };
    let (nonce, salt, iterations) = (attr("r="), BASE64.decode(attr("s=")).expect("salt"), attr("i="));
    let iterations: u32 = iterations.parse().expect("iterations");
    let mut salted = vec![0u8; <D as Digest>::output_size()];
    pbkdf2::pbkdf2::<hmac::SimpleHmac<D>>(password.as_bytes(), &salt, iterations, &mut salted)
        .expect("pbkdf2");
    let mac = |key: &[u8], data: &[u8]| {
        let mut m = <hmac::SimpleHmac<D> as Mac>::new_from_slice(key).expect("key");
        m.update(data);
        m.finalize().into_bytes().to_vec()
    };
    let client_key = mac(&salted, b"Client Key");
    let stored_key = D::digest(&client_key).to_vec();
    let without_proof = format!("c={},r={nonce}", BASE64.encode(gs2));
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = mac(&stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
    let server_signature = mac(&mac(&salted, b"Server Key"), auth.as_bytes());
    (format!("{without_proof},p={}", BASE64.encode(proof)), server_signature)
}

#[test]
fn sha512_round_trip_with_an_independent_client() {
    let credential = stored(Mechanism::Sha512, "alice-secret", b"some-salt-bytes", 8192);
    let mut exchange = exchange_for(Mechanism::Sha512, "alice", credential);
    let bare = "n=alice,r=clientnonce123";
    let server_first = challenge(exchange.step(format!("n,a=alice,{bare}").as_bytes()));
    assert!(
        server_first.starts_with("r=clientnonce123") && server_first.ends_with(",i=8192"),
        "{server_first}"
    );
    let (last, expected) = client_final::<Sha512>("alice-secret", bare, &server_first, "n,a=alice,");
    let Ok(Step::Complete { response, user }) = exchange.step(last.as_bytes()) else {
        panic!("not accepted")
    };
    assert_eq!(user, "alice");
    assert_eq!(response, format!("v={}", BASE64.encode(expected)).into_bytes());
}

#[test]
fn a_server_nonce_is_fresh_for_every_exchange() {
    let credential = stored(Mechanism::Sha256, "p", b"salt", 4096);
    let first = |c: &ScramCredential| {
        challenge(exchange_for(Mechanism::Sha256, "u", c.clone()).step(b"n,,n=u,r=abc"))
    };
    assert_ne!(first(&credential), first(&credential));
}

/// Runs a whole exchange with `password` for `user`; the final step's outcome.
fn attempt(exchange: &mut ServerExchange, user: &str, password: &str) -> Result<Step, ScramError> {
    let bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
    let server_first = challenge(exchange.step(format!("n,,{bare}").as_bytes()));
    let (last, _) = client_final::<Sha256>(password, &bare, &server_first, "n,,");
    exchange.step(last.as_bytes())
}

#[test]
fn a_wrong_password_and_an_unknown_user_fail_alike() {
    let credential = stored(Mechanism::Sha256, "right", b"salt-of-bob", 4096);
    let wrong = attempt(&mut exchange_for(Mechanism::Sha256, "bob", credential.clone()), "bob", "wrong");
    assert_eq!(wrong, Err(ScramError::InvalidCredentials { user: "bob".into() }));
    let unknown = attempt(&mut exchange_for(Mechanism::Sha256, "bob", credential.clone()), "eve", "right");
    assert_eq!(unknown, Err(ScramError::InvalidCredentials { user: "eve".into() }));
    // The unknown user's challenge is stable and shaped like a real one.
    let first =
        || challenge(exchange_for(Mechanism::Sha256, "bob", credential.clone()).step(b"n,,n=eve,r=x"));
    let (a, b) = (first(), first());
    let salt = |c: &str| c.split(',').nth(1).map(str::to_string);
    assert_eq!(salt(&a), salt(&b), "the same unknown user gets the same salt");
    assert!(a.ends_with(",i=4096"), "{a}");
    // A credential for the other mechanism does not authenticate this one.
    let sha512 = exchange_for(Mechanism::Sha512, "bob", credential);
    assert!(attempt(&mut ServerExchange { mechanism: Mechanism::Sha256, ..sha512 }, "bob", "right").is_err());
}

#[test]
fn tampered_nonce_or_channel_binding_is_refused() {
    let credential = stored(Mechanism::Sha256, "pw", b"salt", 4096);
    let run = |edit: &dyn Fn(String) -> String| {
        let mut exchange = exchange_for(Mechanism::Sha256, "u", credential.clone());
        let server_first = challenge(exchange.step(b"n,,n=u,r=abc"));
        let (last, _) = client_final::<Sha256>("pw", "n=u,r=abc", &server_first, "n,,");
        exchange.step(edit(last).as_bytes())
    };
    assert!(matches!(run(&|l| l), Ok(Step::Complete { .. })));
    assert!(matches!(run(&|l| l.replacen(",r=abc", ",r=abd", 1)), Err(ScramError::Refused(_))));
    assert!(matches!(run(&|l| l.replacen("c=biws", "c=eSws", 1)), Err(ScramError::Refused(_))));
    assert!(matches!(run(&|l| l.replacen("c=biws", "c=!!", 1)), Err(ScramError::Malformed(_))));
    assert!(matches!(
        run(&|l| l.split(",p=").next().unwrap_or_default().to_string()),
        Err(ScramError::Malformed(_))
    ));
}

#[test]
fn client_first_messages_outside_the_grammar_are_refused() {
    let credential = stored(Mechanism::Sha256, "pw", b"salt", 4096);
    let first = |m: &str| exchange_for(Mechanism::Sha256, "a,b=c", credential.clone()).step(m.as_bytes());
    assert!(matches!(first("y,,n=u,r=abc"), Ok(Step::Challenge(_))), "y: client supports no binding");
    assert!(matches!(first("p=tls-unique,,n=u,r=abc"), Err(ScramError::Unsupported(_))));
    assert!(matches!(first("n,,n=u,r=abc,tokenauth=true"), Err(ScramError::Unsupported(_))));
    assert!(matches!(first("n,,m=x,n=u,r=abc"), Err(ScramError::Unsupported(_))));
    assert!(matches!(first("n,a=v,n=u,r=abc"), Err(ScramError::Refused(_))), "authzid must be the user");
    assert!(matches!(first("n,,n=u=2,r=abc"), Err(ScramError::Malformed(_))), "bad escape");
    assert!(matches!(first("n,,n=u=41,r=abc"), Err(ScramError::Malformed(_))), "only =2C and =3D");
    assert!(matches!(first("n,,n=u,r="), Err(ScramError::Malformed(_))));
    assert!(matches!(first("n,,r=abc,n=u"), Err(ScramError::Malformed(_))));
    assert!(matches!(first("x,,n=u,r=abc"), Err(ScramError::Malformed(_))));
    assert!(matches!(first("n,,n=u,r=abc,ext"), Err(ScramError::Malformed(_))));
    assert!(matches!(first("n,"), Err(ScramError::Malformed(_))));
    assert!(matches!(first(""), Err(ScramError::Malformed(_))));
    let long = format!("n,,n={},r=abc", "u".repeat(SCRAM_MESSAGE_BYTES_MAX));
    assert!(matches!(first(&long), Err(ScramError::TooLong(_))));
    let mut exchange = exchange_for(Mechanism::Sha256, "u", credential.clone());
    assert!(exchange.step(&[0xff, 0xfe]).is_err());
    assert_eq!(exchange.step(b"n,,n=u,r=abc"), Err(ScramError::Ended), "a failed exchange stays failed");
    // The escapes name the user they stand for: "a,b=c" authenticates as that user.
    let bare = "n=a=2Cb=3Dc,r=abc";
    let mut exchange = exchange_for(Mechanism::Sha256, "a,b=c", credential);
    let server_first = challenge(exchange.step(format!("n,a=a=2Cb=3Dc,{bare}").as_bytes()));
    let (last, _) = client_final::<Sha256>("pw", bare, &server_first, "n,a=a=2Cb=3Dc,");
    assert!(matches!(exchange.step(last.as_bytes()), Ok(Step::Complete { user, .. }) if user == "a,b=c"));
}

proptest! {
    #[test]
    fn no_input_panics(first in proptest::collection::vec(any::<u8>(), 0..200),
                       text in "[nyp=,a-z0-9=]{0,40}",
                       last in proptest::collection::vec(any::<u8>(), 0..200)) {
        let credential = stored(Mechanism::Sha256, "pw", b"salt", 4096);
        for opening in [first.clone(), text.clone().into_bytes(), b"n,,n=u,r=abc".to_vec()] {
            let mut exchange = exchange_for(Mechanism::Sha256, "u", credential.clone());
            let _ = exchange.step(&opening);
            let _ = exchange.step(&last);
            let _ = exchange.step(text.as_bytes());
        }
    }
}

#[tokio::test]
async fn credentials_applied_through_the_state_machine_authenticate() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = Arc::new(BrokerConfig::from_overrides(&[]).expect("config"));
    let (mut store, applied) = sm_store::open(dir.path().join("state"), config, None).expect("open");
    let nodes = BTreeMap::from([(1, NodeAddr { raft: "r:1".into(), kafka: "k:1".into() })]);
    let membership = Membership::new(vec![BTreeSet::from([1u64])], nodes);
    let credential = stored(Mechanism::Sha256, "carol-secret", b"carol-salt", 4096);
    let alteration = UserScramAlteration {
        user: "carol".into(),
        deletions: vec![],
        upsertions: vec![(Mechanism::Sha256, credential)],
    };
    let op = Op::AlterScramCredentials(AlterScramCredentialsOp { users: vec![alteration] });
    let command = Command { stamp: LeaderStamp { now_ms: 5, term: 1 }, ops: vec![op] };
    let entry = |index, payload| Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload };
    let entries =
        vec![entry(1, EntryPayload::Membership(membership)), entry(2, EntryPayload::Normal(command))];
    store.apply(entries).await.expect("apply");
    let ok = attempt(&mut ServerExchange::new(Mechanism::Sha256, applied.clone()), "carol", "carol-secret");
    assert!(matches!(ok, Ok(Step::Complete { user, .. }) if user == "carol"));
    let wrong = attempt(&mut ServerExchange::new(Mechanism::Sha256, applied), "carol", "nope");
    assert!(wrong.is_err());
}
