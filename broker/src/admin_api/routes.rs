//! The admin API's one routing table: path → allowed method → handler. An unknown path is
//! 404; a known path with another method is 405 with `Allow`.

use serde_json::{json, Value};

use super::query::{HttpError, Query, Request};
use super::{digest, members, status, AdminCtx};

/// One response: JSON for every endpoint but `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Body,
    /// `Allow` header of a 405.
    pub allow: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Json(Value),
    Text { content_type: &'static str, text: String },
}

impl Response {
    pub fn json(status: u16, body: Value) -> Self {
        Response { status, body: Body::Json(body), allow: None }
    }

    pub fn text(status: u16, content_type: &'static str, text: String) -> Self {
        Response { status, body: Body::Text { content_type, text }, allow: None }
    }

    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Response::json(status, json!({ "error": message.into() }))
    }
}

impl From<HttpError> for Response {
    fn from(e: HttpError) -> Self {
        Response::error(e.status, e.message)
    }
}

#[derive(Clone, Copy)]
enum Endpoint {
    Page,
    Status,
    Metrics,
    Digest,
    AddLearner,
    Promote,
    Remove,
    Elect,
    Transfer,
    Checkpoint,
}

const ROUTES: &[(&str, &str, Endpoint)] = &[
    ("/", "GET", Endpoint::Page),
    ("/status", "GET", Endpoint::Status),
    ("/metrics", "GET", Endpoint::Metrics),
    ("/digest", "GET", Endpoint::Digest),
    ("/members/add-learner", "POST", Endpoint::AddLearner),
    ("/members/promote", "POST", Endpoint::Promote),
    ("/members/remove", "POST", Endpoint::Remove),
    ("/leader/elect", "POST", Endpoint::Elect),
    ("/leader/transfer", "POST", Endpoint::Transfer),
    ("/checkpoint", "POST", Endpoint::Checkpoint),
];

pub async fn route(ctx: &AdminCtx, request: &Request) -> Response {
    let Some((_, method, endpoint)) = ROUTES.iter().find(|(path, _, _)| *path == request.path) else {
        return Response::error(404, format!("no such endpoint {:?}", request.path));
    };
    if request.method != *method {
        let message = format!("{} takes {method}, not {}", request.path, request.method);
        return Response { allow: Some(method), ..Response::error(405, message) };
    }
    let result = match endpoint {
        Endpoint::Page => get_page(ctx, &request.query).await,
        Endpoint::Status => get_status(ctx, &request.query),
        Endpoint::Metrics => get_metrics(ctx, &request.query).await,
        Endpoint::Digest => get_digest(ctx, &request.query).await,
        Endpoint::AddLearner => members::add_learner(ctx, &request.query).await,
        Endpoint::Promote => members::promote(ctx, &request.query).await,
        Endpoint::Remove => members::remove(ctx, &request.query).await,
        Endpoint::Elect => members::elect(ctx, &request.query).await,
        Endpoint::Transfer => members::transfer(ctx, &request.query).await,
        Endpoint::Checkpoint => post_checkpoint(ctx, &request.query).await,
    };
    result.unwrap_or_else(Response::from)
}

fn get_status(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&[])?;
    Ok(Response::json(200, status::status(ctx)))
}

/// The status page, for people: HTML, no script.
async fn get_page(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&[])?;
    let data = super::status_page::gather(ctx).await;
    Ok(Response::text(200, "text/html; charset=utf-8", super::status_page::render(&data)))
}

/// Prometheus' text exposition (`metrics`): what was recorded, and the node's state now.
async fn get_metrics(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&[])?;
    let snapshot = super::metrics::gather(ctx.metric_sources()).await;
    Ok(Response::text(200, crate::metrics::CONTENT_TYPE, crate::metrics::render(Box::new(snapshot))))
}

/// `GET /digest[?group=G]`: Raft group G's (default 0); 404 for a group this node does not run.
async fn get_digest(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&["group"])?;
    let group = query.group()?;
    let Some(handle) = ctx.groups.get(group) else {
        return Ok(Response::error(404, format!("node {} does not run Raft group {group}", ctx.node_id)));
    };
    let (node_id, applied) = (ctx.node_id, handle.applied.clone());
    // File reads under std locks: off the async workers.
    let computed = tokio::task::spawn_blocking(move || digest::compute((node_id, group), &applied)).await;
    Ok(match computed {
        Ok(Ok(digest)) => Response::json(200, serde_json::to_value(digest).expect("digest serializes")),
        Ok(Err(e)) => Response::error(500, format!("reading partition files: {e}")),
        Err(e) => Response::error(500, format!("digest task failed: {e}")),
    })
}

/// Asks for a checkpoint (an openraft snapshot) now rather than at the next policy point: an
/// operator before a backup or an upgrade, a test that needs one (or a purged log) without
/// writing 20 000 entries. Answers 202 with the applied index the checkpoint will cover at
/// least; `GET /status` → `checkpoint_index` shows when it is written.
async fn post_checkpoint(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&[])?;
    let covers = ctx.raft.metrics().borrow().last_applied.map(|l| l.index);
    match ctx.raft.trigger().snapshot().await {
        Ok(()) => Ok(Response::json(202, json!({ "node_id": ctx.node_id, "covers_at_least": covers }))),
        Err(e) => Ok(Response::error(503, format!("Raft node stopped: {e}"))),
    }
}
