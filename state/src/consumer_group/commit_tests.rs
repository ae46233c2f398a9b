//! The OffsetCommit, TxnOffsetCommit and OffsetFetch checks against members' epochs and
//! per-partition assignment epochs.

use kafka_compat::error_code;

use super::{CommitApi, CommitRequest};
use crate::consumer_group::model::TopicId;
use crate::consumer_group::request::LEAVE_GROUP_MEMBER_EPOCH;
use crate::consumer_group::testkit::{beat, join, parts, tid, Sim};

const V9: CommitApi = CommitApi::OffsetCommit { version: 9 };

fn request<'a>(
    member_id: &'a str,
    member_epoch: i32,
    api: CommitApi,
    partitions: &'a [(TopicId, i32)],
) -> CommitRequest<'a> {
    CommitRequest { group_id: "g", member_id, instance_id: None, member_epoch, api, partitions }
}

/// A at epoch 3 holding 0 since epoch 2; B at epoch 3 holding 1 since epoch 3.
fn two_members() -> Sim {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    sim.send(beat("g", "A", 2, &parts(&[(1, &[0])]))).unwrap();
    sim.send(beat("g", "B", 3, &parts(&[]))).unwrap();
    sim
}

#[test]
fn commits_are_checked_against_the_member_and_its_partitions() {
    let sim = two_members();
    let check = |member: &str, epoch: i32, ps: &[i32]| {
        let partitions: Vec<_> = ps.iter().map(|p| (tid(1), *p)).collect();
        sim.groups.check_commit(&request(member, epoch, V9, &partitions))
    };
    assert_eq!(check("A", 3, &[0, 1]), error_code::NONE, "the member's epoch commits anything");
    assert_eq!(check("A", 4, &[0]), error_code::STALE_MEMBER_EPOCH, "from the future");
    assert_eq!(check("A", 2, &[0]), error_code::NONE, "0 is A's since epoch 2");
    assert_eq!(check("A", 2, &[1]), error_code::STALE_MEMBER_EPOCH, "1 is not A's any more");
    assert_eq!(check("B", 2, &[1]), error_code::STALE_MEMBER_EPOCH, "1 is B's only since epoch 3");
    assert_eq!(check("X", 3, &[0]), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(check("", -1, &[0]), error_code::UNKNOWN_MEMBER_ID, "no admin commits while members are in");
    let v8 = request("A", 3, CommitApi::OffsetCommit { version: 8 }, &[]);
    assert_eq!(sim.groups.check_commit(&v8), error_code::UNSUPPORTED_VERSION);
    assert_eq!(
        sim.groups.check_commit(&CommitRequest { group_id: "h", ..request("A", 3, V9, &[]) }),
        error_code::GROUP_ID_NOT_FOUND
    );
}

#[test]
fn transactional_commits_have_their_own_rules() {
    let sim = two_members();
    let txn = |version: i16| CommitApi::TxnOffsetCommit { version };
    // No group metadata from the producer: accepted whatever the members.
    assert_eq!(sim.groups.check_commit(&request("", -1, txn(3), &[])), error_code::NONE);
    // No version rule; a stale epoch is ILLEGAL_GENERATION before v6 (KIP-1319).
    assert_eq!(sim.groups.check_commit(&request("A", 3, txn(0), &[])), error_code::NONE);
    assert_eq!(sim.groups.check_commit(&request("A", 4, txn(5), &[])), error_code::ILLEGAL_GENERATION);
    assert_eq!(sim.groups.check_commit(&request("A", 4, txn(6), &[])), error_code::STALE_MEMBER_EPOCH);
}

#[test]
fn partitions_pending_revocation_may_still_be_committed() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap(); // 1 pending revocation
    assert_eq!(sim.groups.check_commit(&request("A", 2, V9, &[(tid(1), 1)])), error_code::NONE);
}

#[test]
fn an_empty_group_takes_admin_commits() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(beat("g", "A", LEAVE_GROUP_MEMBER_EPOCH, &parts(&[]))).unwrap();
    assert_eq!(sim.groups.check_commit(&request("", -1, V9, &[(tid(1), 0)])), error_code::NONE);
    assert_eq!(sim.groups.check_commit(&request("A", 2, V9, &[(tid(1), 0)])), error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn fetches_need_the_exact_epoch_unless_anonymous() {
    let sim = two_members();
    assert_eq!(sim.groups.check_fetch("g", None, -1), error_code::NONE);
    assert_eq!(sim.groups.check_fetch("g", Some(""), -1), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(sim.groups.check_fetch("g", Some("A"), 3), error_code::NONE);
    assert_eq!(sim.groups.check_fetch("g", Some("A"), 2), error_code::STALE_MEMBER_EPOCH);
    assert_eq!(sim.groups.check_fetch("h", Some("A"), 2), error_code::NONE);
}
