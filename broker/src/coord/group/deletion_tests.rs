//! DeleteGroups and OffsetDelete as the coordinator decides them: emptiness, the Dead state
//! while a deletion is on its way through the log, and subscriptions read from member metadata.

use bytes::Bytes;
use kafka_compat::error_code;

use super::Subscriptions;
use crate::coord::group::tests::{coordinator, join_req, new_member};
use crate::coord::group::GroupState;

/// What a consumer subscribing to `topics` sends: version 1, then the v1 body.
fn subscription(topics: &[&str]) -> Bytes {
    use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let body = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect());
    let mut out = bytes::BytesMut::from(&1i16.to_be_bytes()[..]);
    body.encode(&mut out, 1).expect("encodes");
    out.freeze()
}

#[tokio::test(start_paused = true)]
async fn only_an_empty_group_is_deleted_and_joins_wait_while_it_is_dead() {
    let c = coordinator(0);
    assert_eq!(c.begin_delete("g", false), Err(error_code::GROUP_ID_NOT_FOUND));
    let a = new_member(&c).await;
    let joined = c.join(join_req(&a, b"m")).await;
    c.sync("g", joined.generation_id, (&a, None), Vec::new()).await;
    assert_eq!(c.begin_delete("g", true), Err(error_code::NON_EMPTY_GROUP));
    assert_eq!(c.leave("g", &a, None), error_code::NONE);

    assert_eq!(c.begin_delete("g", true), Ok(2), "the emptied generation");
    assert_eq!(c.begin_delete("g", true), Err(error_code::GROUP_ID_NOT_FOUND), "already being deleted");
    assert_eq!(c.describe("g").expect("dead").state, GroupState::Dead);
    assert!(c.list().is_empty(), "a dead group is not listed");
    assert_eq!(c.join(join_req("", b"m")).await.error_code, error_code::COORDINATOR_NOT_AVAILABLE);
    assert_eq!(c.check_commit("g", -1, "", None), Some(error_code::COORDINATOR_NOT_AVAILABLE));
    assert!(c.take_empty_generations().is_empty(), "a dead group records no empty generation");

    // The deletion failed (leadership lost, say): the group is Empty again.
    c.finish_delete("g", false);
    assert_eq!(c.describe("g").expect("group").state, GroupState::Empty);
    assert_eq!(c.begin_delete("g", true), Ok(2));
    c.finish_delete("g", true);
    assert!(c.describe("g").is_none());
    // A group known only from the log gets a Dead placeholder until its deletion applies.
    assert_eq!(c.begin_delete("offsets-only", true), Ok(0));
    assert_eq!(c.describe("offsets-only").expect("placeholder").state, GroupState::Dead);
    c.finish_delete("offsets-only", true);
    assert!(c.describe("offsets-only").is_none());
    // A new group of the same name starts afresh.
    let b = new_member(&c).await;
    assert_eq!(c.join(join_req(&b, b"m")).await.generation_id, 1);
}

#[tokio::test(start_paused = true)]
async fn offset_delete_sees_the_members_subscriptions_and_distrusts_garbage() {
    let c = coordinator(0);
    assert!(c.offset_delete_check("g").is_none());
    let a = new_member(&c).await;
    let mut req = join_req(&a, b"");
    req.protocols = vec![("range".to_string(), subscription(&["orders", "payments"]))];
    c.join(req).await;
    let Some(Ok(subscribed)) = c.offset_delete_check("g") else { panic!("subscriptions") };
    assert!(
        subscribed.includes("orders") && subscribed.includes("payments") && !subscribed.includes("audit")
    );

    // A member whose metadata does not parse: every topic counts as subscribed, and the
    // metadata still reaches the leader member untouched.
    let b = new_member(&c).await;
    let (c2, b2) = (c.clone(), b.clone());
    let b_join = tokio::spawn(async move { c2.join(join_req(&b2, b"\xff\xffnot a subscription")).await });
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let mut again = join_req(&a, b"");
    again.protocols = vec![("range".to_string(), subscription(&["orders"]))];
    let leader = c.join(again).await;
    b_join.await.expect("join");
    let garbage = leader.members.iter().find(|(id, _, _)| *id == b).expect("b").2.clone();
    assert_eq!(&garbage[..], b"\xff\xffnot a subscription");
    assert_eq!(c.offset_delete_check("g"), Some(Ok(Subscriptions::Unknown)));

    // Another protocol type with members: Kafka's NON_EMPTY_GROUP for the whole request.
    let mut connect = join_req("", b"w");
    connect.group_id = "workers".to_string();
    connect.protocol_type = "connect".to_string();
    connect.require_known_member_id = false;
    c.join(connect).await;
    assert_eq!(c.offset_delete_check("workers"), Some(Err(error_code::NON_EMPTY_GROUP)));
}
