//! The admin API's side of the invalidation fan-out (`crate::peers`): a purge or ban this
//! node's admin API accepted is forwarded to every peer, and the answer to the operator gains
//! each peer's report (`"peers"`).

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::client;
use crate::peers::Peers;

/// Applies `local` (this node's answer to a purge or ban) to the peers: unless there are none,
/// the request came from a peer, or it was refused as malformed, it is forwarded and the
/// answer gains `"peers"`. A purge that found nothing here (404) is still forwarded: the
/// object lives on another node.
pub(super) async fn share(
    peers: Option<&Peers>,
    forwarded: bool,
    path_and_query: &str,
    local: Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    let Some(peers) = peers.filter(|_| !forwarded) else {
        return local;
    };
    let status = local.status();
    if !(status.is_success() || status == StatusCode::NOT_FOUND) {
        return local;
    }
    let (head, body) = local.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(head, Full::new(bytes));
    };
    // A ban (and a purge of every host, which is one) goes with the time it was created here.
    let created = answer.get("created").cloned().unwrap_or(Value::Null);
    let (target, body) = if path_and_query.starts_with("/ban") {
        let body = json!({ "ban": answer["ban"], "created": created });
        ("/ban".to_string(), Bytes::from(body.to_string()))
    } else if let (Some(url), Some(host)) = (answer["url"].as_str(), answer["host"].as_str()) {
        // A URL purge names its host explicitly: here it may have come from the request's
        // Host header, and the forwarded request's Host is the peer's address.
        let soft = if answer["soft"] == true { "&soft=1" } else { "" };
        let target = format!(
            "/purge?url={}&host={}{soft}",
            client::encode_query_value(url),
            client::encode_query_value(host)
        );
        (target, Bytes::new())
    } else if let Some(created) = created.as_f64() {
        (format!("{path_and_query}&created={created}"), Bytes::new())
    } else {
        (path_and_query.to_string(), Bytes::new())
    };
    answer["peers"] = Value::Array(peers.forward(&target, body).await);
    super::json(status, answer)
}
