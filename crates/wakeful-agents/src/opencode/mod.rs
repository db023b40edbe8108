//! OpenCode: a wake is a prompt posted to the session of a running
//! `opencode serve` (`POST /session/<id>/prompt_async`), which OpenCode
//! queues behind a running turn.

use wakeful_core::wake_machine::Outcome;
use wakeful_engine::net::http::{self, Reach};
use wakeful_engine::NetPolicy;

use crate::delivery::{http_refusal, Wake};

/// Hands `wake` to the OpenCode server at `url`: into `opencode_session`,
/// else the session named like the wakeful session; `directory` is the
/// project directory OpenCode resolves the session in.
pub async fn deliver(
    url: &str,
    opencode_session: Option<&str>,
    directory: Option<&str>,
    wake: &Wake<'_>,
    policy: &NetPolicy,
) -> Outcome {
    let base = url.trim_end_matches('/');
    let id = opencode_session.unwrap_or(wake.session);
    // Whether it is busy is only informative: OpenCode queues the
    // prompt behind a running turn.
    let busy = match http::request(
        "GET",
        &format!("{base}/session/status"),
        None,
        policy,
        Reach::LoopbackAndPolicy,
    )
    .await
    {
        Ok(r) if r.status == 200 => serde_json::from_str::<serde_json::Value>(&r.body)
            .ok()
            .is_some_and(|v| v[id]["type"] == "busy"),
        _ => false,
    };
    let mut post = format!("{base}/session/{id}/prompt_async");
    if let Some(dir) = directory {
        post.push_str("?directory=");
        post.push_str(&percent(dir));
    }
    let body = serde_json::json!({"parts": [{"type": "text", "text": wake.text}]});
    match http::request("POST", &post, Some(&body), policy, Reach::LoopbackAndPolicy).await {
        Ok(r) if (200..300).contains(&r.status) => {
            if busy {
                tracing::info!("wake {} queued behind a busy OpenCode turn", wake.wake_id);
            }
            Outcome::Accepted
        }
        Ok(r) => http_refusal("OpenCode", r),
        Err(e) if e.is_retryable() => Outcome::Refused(e.to_string()),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
