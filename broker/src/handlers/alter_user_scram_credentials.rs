//! AlterUserScramCredentials (key 51, KIP-554), v0: sets and deletes SCRAM credentials through
//! one log entry.
//!
//! Each alteration is validated with Kafka's codes and messages (`onelog_state::scram`); an
//! upsertion's salted password becomes StoredKey and ServerKey here, before proposing
//! (`security::scram::keys`), so the log holds neither a password nor a salted password. The valid
//! users go into one `AlterScramCredentials` op; apply answers each user, refusing the
//! deletion of a credential that does not exist. One result per user, one bad user never
//! failing another. A controller API: a follower forwards it to the leader at dispatch
//! (`Route::Leader` on its registry row), as Kafka brokers forward to the active controller.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, RequestKind, ResponseKind,
};

use super::util::str_bytes;
use super::{Forwarded, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use crate::security::scram::keys;
use onelog_state::command::AlterScramCredentialsOp;
use onelog_state::scram::{
    validate_deletion, validate_upsertion, Grouped, ScramCredential, UserScramAlteration,
};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: shown };

/// Per user, in order of first appearance: the alteration to propose, or the refusal.
type Checked = Vec<(String, Result<UserScramAlteration, (i16, String)>)>;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AlterUserScramCredentials(body) = req.body else {
        anyhow::bail!("not an AlterUserScramCredentials body")
    };
    let checked = check(&body);
    // A follower the leader could not answer for at dispatch.
    if !ctx.may_propose() && !req.forwarded {
        let all = checked.into_iter().map(|(user, _)| (user, error_code::NOT_CONTROLLER, None)).collect();
        return Ok(Some(ResponseKind::AlterUserScramCredentials(response(all))));
    }
    Ok(Some(ResponseKind::AlterUserScramCredentials(alter(&ctx, checked).await)))
}

/// Answered once every change the leader accepted shows here, so a Describe sent here next
/// sees it.
fn shown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::AlterUserScramCredentials(body), ResponseKind::AlterUserScramCredentials(r)) =
        (request, response)
    else {
        return true;
    };
    let checked = check(body);
    let valid: BTreeMap<&str, &UserScramAlteration> =
        checked.iter().filter_map(|(user, a)| Some((user.as_str(), a.as_ref().ok()?))).collect();
    r.results
        .iter()
        .filter(|r| r.error_code == error_code::NONE)
        .all(|r| valid.get(r.user.as_str()).is_none_or(|a| state.scram.shows(a)))
}

async fn alter(ctx: &Ctx, checked: Checked) -> AlterUserScramCredentialsResponse {
    let valid: Vec<UserScramAlteration> =
        checked.iter().filter_map(|(_, a)| a.as_ref().ok().cloned()).collect();
    let mut applied = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        ctx.proposer.propose(AlterScramCredentialsOp { users: valid }).await
    }
    .map(Vec::into_iter);
    let results = checked
        .into_iter()
        .map(|(user, alteration)| match (alteration, &mut applied) {
            (Err((code, message)), _) => (user, code, Some(message)),
            (Ok(_), Ok(results)) => {
                let (code, message) = results.next().unwrap_or((error_code::UNKNOWN_SERVER_ERROR, None));
                (user, code, message)
            }
            (Ok(_), Err(e)) => {
                let code = propose_error_code(e, Addressed::Controller);
                (user, code, Some(format!("the credential change did not commit: {e}")))
            }
        })
        .collect();
    response(results)
}

/// Kafka's checks of every deletion, then every upsertion, grouped by user; upsertions
/// derived into the credential to store.
fn check(body: &AlterUserScramCredentialsRequest) -> Checked {
    let mut grouped: Grouped<ScramCredential> = Grouped::new();
    for deletion in &body.deletions {
        let checked = validate_deletion(&deletion.name, deletion.mechanism).map(|m| (m, None));
        grouped.add(&deletion.name, checked);
    }
    for u in &body.upsertions {
        let checked = validate_upsertion(&u.name, u.mechanism, u.iterations, &u.salt, &u.salted_password)
            .map(|m| (m, Some(keys::credential(m, &u.salt, &u.salted_password, u.iterations))));
        grouped.add(&u.name, checked);
    }
    grouped
        .users
        .into_iter()
        .map(|(user, alterations)| {
            let alteration = alterations.map(|list| {
                let mut alteration =
                    UserScramAlteration { user: user.clone(), deletions: Vec::new(), upsertions: Vec::new() };
                for (mechanism, credential) in list {
                    match credential {
                        Some(credential) => alteration.upsertions.push((mechanism, credential)),
                        None => alteration.deletions.push(mechanism),
                    }
                }
                alteration
            });
            (user, alteration)
        })
        .collect()
}

fn response(results: Vec<(String, i16, Option<String>)>) -> AlterUserScramCredentialsResponse {
    let results = results
        .into_iter()
        .map(|(user, code, message)| {
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// The whole request refused with `code` on every user it names, once each and sorted by name
/// (`AlterUserScramCredentialsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::AlterUserScramCredentials(body) = body else {
        return ResponseKind::AlterUserScramCredentials(Default::default());
    };
    let deleted = body.deletions.iter().map(|d| &d.name);
    let users: BTreeSet<&str> =
        deleted.chain(body.upsertions.iter().map(|u| &u.name)).map(|n| n.as_str()).collect();
    let all = users.into_iter().map(|user| (user.to_string(), code, None)).collect();
    ResponseKind::AlterUserScramCredentials(response(all))
}
