//! Finalized features: 0.1.0's levels before any update, Kafka's transition rules and
//! messages, and the epoch.

use super::*;

fn update(name: &str, level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
    FeatureUpdate { name: name.into(), level, upgrade_type }
}

fn refused(features: &Features, updates: &[FeatureUpdate]) -> String {
    let refusal = features.check(updates).expect_err("refused");
    assert_eq!(refusal.error_code, INVALID_UPDATE_VERSION);
    refusal.message
}

#[test]
fn a_log_without_updates_has_the_levels_0_1_0_answered() {
    let features = Features::default();
    assert!(!features.is_recorded());
    assert_eq!(features.level(ONELOG_VERSION), 1);
    assert_eq!(features.level(TRANSACTION_VERSION), 2);
    assert_eq!(features.level(GROUP_VERSION), 0);
    assert_eq!(features.epoch(), 1);
}

#[test]
fn client_features_depend_on_the_recording_onelog_version() {
    let features = Features::default();
    assert_eq!(
        refused(&features, &[update(TRANSACTION_VERSION, 2, UpgradeType::Upgrade)]),
        "Invalid update version 2 for feature transaction.version. transaction.version could not be set \
         to 2 because it depends on onelog.version level 2"
    );
    // Together with the onelog.version it depends on, in either order.
    let both = [
        update(TRANSACTION_VERSION, 2, UpgradeType::Upgrade),
        update(ONELOG_VERSION, 2, UpgradeType::Upgrade),
    ];
    assert_eq!(features.check(&both), Ok(()));
}

/// group.version 1 (KIP-848) needs the onelog.version whose ops and checkpoint carry consumer
/// groups: with level 2 only, a consumer group could not be written or kept.
#[test]
fn group_version_depends_on_the_consumer_groups_onelog_version() {
    let features = Features::default();
    let with_2 =
        [update(GROUP_VERSION, 1, UpgradeType::Upgrade), update(ONELOG_VERSION, 2, UpgradeType::Upgrade)];
    assert_eq!(
        refused(&features, &with_2),
        "Invalid update version 1 for feature group.version. group.version could not be set to 1 \
         because it depends on onelog.version level 3"
    );
    let with_3 =
        [update(ONELOG_VERSION, 3, UpgradeType::Upgrade), update(GROUP_VERSION, 1, UpgradeType::Upgrade)];
    assert_eq!(features.check(&with_3), Ok(()));
}

#[test]
fn a_downgrade_needs_a_downgrade_type_and_an_upgrade_must_not_have_one() {
    let mut features = Features::default();
    features
        .apply(&UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, 2, UpgradeType::Upgrade)] })
        .unwrap();
    assert_eq!(
        refused(&features, &[update(TRANSACTION_VERSION, 1, UpgradeType::Upgrade)]),
        "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this \
         feature without setting the upgrade type to either safe or unsafe downgrade."
    );
    assert_eq!(
        refused(&features, &[update(GROUP_VERSION, 1, UpgradeType::SafeDowngrade)]),
        "Invalid update version 1 for feature group.version. Can't downgrade to a newer version."
    );
    assert_eq!(features.check(&[update(TRANSACTION_VERSION, 1, UpgradeType::SafeDowngrade)]), Ok(()));
    assert_eq!(
        refused(&features, &[update(TRANSACTION_VERSION, -1, UpgradeType::SafeDowngrade)]),
        "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0."
    );
}

#[test]
fn onelog_version_never_goes_down() {
    let mut features = Features::default();
    features
        .apply(&UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, 2, UpgradeType::Upgrade)] })
        .unwrap();
    for kind in [UpgradeType::SafeDowngrade, UpgradeType::UnsafeDowngrade] {
        assert_eq!(
            refused(&features, &[update(ONELOG_VERSION, 1, kind)]),
            "Invalid update version 1 for feature onelog.version. Refusing to perform the requested \
             downgrade because it might delete metadata information."
        );
    }
}

#[test]
fn an_update_applies_all_or_nothing_and_raises_the_epoch() {
    let mut features = Features::default();
    let bad = UpdateFeaturesOp {
        updates: vec![
            update(ONELOG_VERSION, 2, UpgradeType::Upgrade),
            update(SHARE_VERSION, -3, UpgradeType::Upgrade),
        ],
    };
    assert!(features.apply(&bad).is_err());
    assert_eq!(features, Features::default(), "a refused update changes nothing");

    features
        .apply(&UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, 2, UpgradeType::Upgrade)] })
        .unwrap();
    assert!(features.is_recorded());
    assert_eq!(features.epoch(), 2);
    assert_eq!(features.finalized(), vec![(ONELOG_VERSION.into(), 2), (TRANSACTION_VERSION.into(), 2)]);

    // Level 0 removes a client feature, as Kafka's KRaft controller does.
    let off = UpdateFeaturesOp { updates: vec![update(TRANSACTION_VERSION, 0, UpgradeType::SafeDowngrade)] };
    features.apply(&off).unwrap();
    assert_eq!(features.epoch(), 3);
    assert_eq!(features.level(TRANSACTION_VERSION), 0);
    assert_eq!(features.finalized(), vec![(ONELOG_VERSION.into(), 2)]);
}

#[test]
fn the_state_digest_is_0_1_0_s_until_a_level_is_recorded() {
    let mut state = crate::BrokerState::default();
    let plain = crc32c::crc32c(&bincode::serialize(&state).unwrap());
    assert_eq!(crate::digest::state_digest(&state), plain);
    state
        .features
        .apply(&UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, 2, UpgradeType::Upgrade)] })
        .unwrap();
    assert_ne!(crate::digest::state_digest(&state), plain, "recorded levels count in the digest");
}

/// Share groups and their share-partition states count in the digest from `onelog.version` 5,
/// which brought them: two replicas that differ there only must not agree. Regression: the
/// digest skipped them.
#[test]
fn share_state_counts_in_the_digest_from_the_level_that_brought_it() {
    let at = |level: i16| {
        let mut state = crate::BrokerState::default();
        let op = UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, level, UpgradeType::Upgrade)] };
        state.features.apply(&op).unwrap();
        state
    };
    for level in [4, 5] {
        let plain = at(level);
        let mut grouped = at(level);
        grouped.share_groups.groups.insert("g".into(), Default::default());
        let mut acquired = at(level);
        acquired.share_states.groups.insert("g".into(), Default::default());
        let digest = crate::digest::state_digest;
        let counted = |other: &crate::BrokerState| digest(other) != digest(&plain);
        assert_eq!(counted(&grouped), level >= 5, "share groups at level {level}");
        assert_eq!(counted(&acquired), level >= 5, "share states at level {level}");
    }
}

#[test]
fn group_placement_is_chosen_with_a_clusters_first_levels_only() {
    let mut new_cluster = Features::default();
    let first =
        [update(ONELOG_VERSION, 8, UpgradeType::Upgrade), update(GROUP_PLACEMENT, 1, UpgradeType::Upgrade)];
    new_cluster.apply(&UpdateFeaturesOp { updates: first.to_vec() }).expect("a new cluster's levels");
    assert_eq!(new_cluster.level(GROUP_PLACEMENT), 1);
    // Sending the same level again (kafka-features.sh upgrade of every feature) changes nothing.
    new_cluster.check(&[update(GROUP_PLACEMENT, 1, UpgradeType::Upgrade)]).expect("unchanged");
    let off = update(GROUP_PLACEMENT, 0, UpgradeType::SafeDowngrade);
    assert!(refused(&new_cluster, &[off]).contains("chosen when a cluster is created"));

    let mut running = Features::default();
    running
        .apply(&UpdateFeaturesOp { updates: vec![update(ONELOG_VERSION, 8, UpgradeType::Upgrade)] })
        .unwrap();
    let on = update(GROUP_PLACEMENT, 1, UpgradeType::Upgrade);
    assert!(refused(&running, &[on]).contains("chosen when a cluster is created"));
    let too_early =
        [update(ONELOG_VERSION, 7, UpgradeType::Upgrade), update(GROUP_PLACEMENT, 1, UpgradeType::Upgrade)];
    assert!(refused(&Features::default(), &too_early).contains("depends on onelog.version level 8"));
}
