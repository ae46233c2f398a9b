//! DescribeUserScramCredentials (key 50, KIP-554), v0: each user's SCRAM mechanisms and
//! iteration counts from the applied state, never a salt or key.
//!
//! Kafka's semantics (`ScramImage.describe`): no users (null or empty) describes every user
//! with a credential; a named user without one is RESOURCE_NOT_FOUND, a user named twice
//! DUPLICATE_RESOURCE, each with Kafka's message. Any node answers from its applied state, as
//! any Kafka broker answers from its metadata image.
//!
//! Access: CLUSTER DESCRIBE, checked by the pipeline (`handlers::HANDLERS`).

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{ApiKey, DescribeUserScramCredentialsResponse, RequestKind, ResponseKind};
use onelog_state::scram::ScramCredentials;

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const DUPLICATE_USER: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";
const NO_CREDENTIAL: &str = "Attempt to describe a user credential that does not exist: ";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeUserScramCredentials(body) = req.body else {
        anyhow::bail!("not a DescribeUserScramCredentials body")
    };
    let named: Vec<String> = body.users.unwrap_or_default().into_iter().map(|u| u.name.to_string()).collect();
    let results = ctx.applied.state(|state| describe(&state.scram, &named));
    Ok(Some(ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(error_code::NONE)
            .with_results(results),
    )))
}

fn describe(table: &ScramCredentials, named: &[String]) -> Vec<DescribeUserScramCredentialsResult> {
    if named.is_empty() {
        return table.users().map(|(user, _)| one(table, user)).collect();
    }
    // Times each user is named, and the users in order of first appearance.
    let mut times: BTreeMap<&String, usize> = BTreeMap::new();
    let mut unique: Vec<&String> = Vec::new();
    for user in named {
        let count = times.entry(user).or_default();
        if *count == 0 {
            unique.push(user);
        }
        *count += 1;
    }
    unique
        .into_iter()
        .map(|user| {
            if times.get(user).is_some_and(|t| *t > 1) {
                user_refused(user, error_code::DUPLICATE_RESOURCE, DUPLICATE_USER)
            } else {
                one(table, user)
            }
        })
        .collect()
}

fn one(table: &ScramCredentials, user: &str) -> DescribeUserScramCredentialsResult {
    let Some(credentials) = table.user(user) else {
        return user_refused(user, error_code::RESOURCE_NOT_FOUND, NO_CREDENTIAL);
    };
    let infos = credentials
        .iter()
        .map(|(mechanism, c)| {
            CredentialInfo::default().with_mechanism(mechanism.type_code()).with_iterations(c.iterations)
        })
        .collect();
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(user.to_string()))
        .with_credential_infos(infos)
}

fn user_refused(user: &str, code: i16, message: &str) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(user.to_string()))
        .with_error_code(code)
        .with_error_message(Some(str_bytes(format!("{message}{user}"))))
}

/// The whole request refused with `code`: at the top level, and on every user it names
/// (`DescribeUserScramCredentialsRequest.getErrorResponse`; Kafka's client reads the top level).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DescribeUserScramCredentials(body) = body else {
        return ResponseKind::DescribeUserScramCredentials(Default::default());
    };
    let results = body
        .users
        .iter()
        .flatten()
        .map(|u| {
            DescribeUserScramCredentialsResult::default()
                .with_user(u.name.clone())
                .with_error_code(code)
                .with_error_message(None)
        })
        .collect();
    ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_error_message(None)
            .with_results(results),
    )
}
