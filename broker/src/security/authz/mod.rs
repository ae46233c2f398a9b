//! The authorizer: Kafka's `StandardAuthorizer` over the replicated ACL table
//! (`onelog_state::acls`). The pipeline and the handlers call it (`ctx.authorizer`, an
//! [`Authorizer`]: the settings and the applied view, nothing more) with the request's
//! [`Subject`] (principal and client address) and the resource and operation Kafka's
//! `KafkaApis` checks.
//!
//! Disabled (`authorizer.class.name` empty) every check passes, as Kafka without an
//! authorizer. Enabled, each check reads the applied state once (one read lock; a request's
//! many names are checked under one), so a change is seen by the next request and nothing is
//! cached that an applied entry could make stale.

mod decision;

use std::sync::Arc;

use kafka_compat::codec::Request;
use kafka_compat::principal::KafkaPrincipal;

pub use decision::{grants, Subject, WILDCARD_PRINCIPAL};
pub use onelog_state::acls::{operation as op, resource_type as rt, CLUSTER_NAME};

use crate::config::authz::AuthzSettings;
use crate::raft::applied::AppliedView;
use onelog_state::BrokerState;

/// Test builds only (`fault-injection`): a client id `onelog-test-principal:<name>` on a
/// connection that did not authenticate acts as `User:<name>`, so the integration tests can
/// act as several principals before SASL exists. Never compiled into a release build.
pub const TEST_PRINCIPAL_CLIENT_ID_PREFIX: &str = "onelog-test-principal:";

impl Subject {
    /// Who sent `req`.
    pub fn of(req: &Request) -> Subject {
        Subject { principal: principal_of(req), host: req.client_address }
    }
}

#[cfg(feature = "fault-injection")]
fn principal_of(req: &Request) -> std::sync::Arc<KafkaPrincipal> {
    let client_id = req.header.client_id.as_ref().map(|c| c.as_str()).unwrap_or_default();
    match client_id.strip_prefix(TEST_PRINCIPAL_CLIENT_ID_PREFIX) {
        Some(name) if req.principal.is_anonymous() && !name.is_empty() => {
            std::sync::Arc::new(KafkaPrincipal::user(name))
        }
        _ => req.principal.clone(),
    }
}

#[cfg(not(feature = "fault-injection"))]
fn principal_of(req: &Request) -> std::sync::Arc<KafkaPrincipal> {
    req.principal.clone()
}

/// The authorizer of one node: its settings and the applied state it reads the ACLs from.
/// Built once where the node builds its `Ctx` (`ctx.authorizer`); cloned cheaply.
#[derive(Clone)]
pub struct Authorizer {
    settings: Arc<AuthzSettings>,
    applied: AppliedView,
}

impl Authorizer {
    pub fn new(settings: AuthzSettings, applied: AppliedView) -> Self {
        Authorizer { settings: Arc::new(settings), applied }
    }

    /// The settings it decides with (for [`allowed_in`]).
    pub fn settings(&self) -> &AuthzSettings {
        &self.settings
    }

    /// Whether an authorizer is configured.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Whether `who` may do `operation` on `(resource_type, name)`.
    pub fn allowed(&self, who: &Subject, resource_type: i8, name: &str, operation: i8) -> bool {
        let settings = &*self.settings;
        if !settings.enabled || settings.is_super_user(&who.principal) {
            return true;
        }
        self.applied.state(|s| decision::decide(settings, &s.acls, who, resource_type, name, operation))
    }

    /// [`Authorizer::allowed`] on the cluster resource.
    pub fn cluster_allowed(&self, who: &Subject, operation: i8) -> bool {
        self.allowed(who, rt::CLUSTER, CLUSTER_NAME, operation)
    }

    /// [`Authorizer::allowed`] for each name, under one read of the state.
    pub fn allowed_each<'n>(
        &self,
        who: &Subject,
        resource_type: i8,
        names: impl IntoIterator<Item = &'n str>,
        operation: i8,
    ) -> Vec<bool> {
        let settings = &*self.settings;
        if !settings.enabled || settings.is_super_user(&who.principal) {
            return names.into_iter().map(|_| true).collect();
        }
        self.applied.state(|s| {
            names
                .into_iter()
                .map(|name| decision::decide(settings, &s.acls, who, resource_type, name, operation))
                .collect()
        })
    }

    /// Whether `who` may do `operation` on at least one resource of the type (Kafka's
    /// `authorizeByResourceType`).
    pub fn allowed_on_any(&self, who: &Subject, resource_type: i8, operation: i8) -> bool {
        let settings = &*self.settings;
        if !settings.enabled {
            return true;
        }
        self.applied.state(|s| decision::decide_any_of_type(settings, &s.acls, who, resource_type, operation))
    }

    /// KIP-430: the bit set (`1 << code`) of the `operations` `who` may do on the resource.
    pub fn authorized_operations(
        &self,
        who: &Subject,
        resource_type: i8,
        name: &str,
        operations: &[i8],
    ) -> i32 {
        let settings = &*self.settings;
        self.applied.state(|s| {
            operations
                .iter()
                .filter(|&&operation| {
                    !settings.enabled
                        || decision::decide(settings, &s.acls, who, resource_type, name, operation)
                })
                .fold(0, |bits, &operation| bits | (1 << operation))
        })
    }

    /// KafkaApis' check of a config resource (DescribeConfigs: DESCRIBE_CONFIGS, AlterConfigs
    /// and IncrementalAlterConfigs: ALTER_CONFIGS): a topic on the topic, a group on the group,
    /// a broker or client-metrics resource on the cluster. The refusal's error code, if refused.
    pub fn config_refusal(
        &self,
        who: &Subject,
        config_resource_type: i8,
        name: &str,
        operation: i8,
    ) -> Option<i16> {
        // ConfigResource.Type codes: TOPIC 2, BROKER 4, CLIENT_METRICS 16, GROUP 32.
        let (resource_type, name, refused) = match config_resource_type {
            2 => (rt::TOPIC, name, code::TOPIC_AUTHORIZATION_FAILED),
            32 => (rt::GROUP, name, code::GROUP_AUTHORIZATION_FAILED),
            _ => (rt::CLUSTER, CLUSTER_NAME, code::CLUSTER_AUTHORIZATION_FAILED),
        };
        (!self.allowed(who, resource_type, name, operation)).then_some(refused)
    }
}

/// [`Authorizer::allowed`] against a state the caller already holds (a request that reads the
/// applied state once for all its checks, as Produce does).
pub fn allowed_in(
    settings: &AuthzSettings,
    state: &BrokerState,
    who: &Subject,
    resource_type: i8,
    name: &str,
    operation: i8,
) -> bool {
    !settings.enabled
        || settings.is_super_user(&who.principal)
        || decision::decide(settings, &state.acls, who, resource_type, name, operation)
}

/// Kafka's error codes, the authorization ones among them (`code::TOPIC_AUTHORIZATION_FAILED`),
/// under the name the handlers import; they are defined once, in `kafka_compat::error_code`.
pub use kafka_compat::error_code as code;

/// The results of the items that passed a check, put back among those refused, in request
/// order: `allowed[i]` says whether item `i` was checked on (its result is the next of
/// `results`) or refused (it gets `refused`).
pub fn merge_refused<T: Clone>(allowed: &[bool], results: Vec<T>, refused: T) -> Vec<T> {
    let mut results = results.into_iter();
    allowed
        .iter()
        .map(|a| match a {
            true => results.next().unwrap_or_else(|| refused.clone()),
            false => refused.clone(),
        })
        .collect()
}
