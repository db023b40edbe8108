//! Claude Code channel push: every new event of the session becomes a
//! `notifications/claude/channel` notification.
//!
//! Claude Code shows such a notification to the model as
//! `<channel source="wakeful" monitor_id="…" seq="…" kind="…">content</channel>`
//! and wakes an idle session with it. `meta` carries identifier keys only,
//! with string values (they become the tag's attributes); `content` is the
//! event text, framed as monitor output, with control characters and ANSI
//! escapes removed and its length capped.
//!
//! Events that do not wake (their monitor was started with `wake_on` other
//! than `any`) are held back and sent in one notification together with the
//! next event that wakes; at most [`MAX_HELD`] are quoted, the text points to
//! the rest.
//!
//! [`forward`] follows the session's events in the daemon from a given seq
//! and sends them in seq order, each once: the next notification is queued
//! only after the previous one was written, an event is skipped when its seq
//! is not above the last one sent, and when the daemon connection breaks
//! (the daemon restarted) the follow resumes after the last seq sent.

use std::time::Duration;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::{Peer, RoleServer};
use serde_json::{json, Value};
use wakeful_client::{connect_existing, Connection, Paths};
use wakeful_core::Event;
use wakeful_protocol::{Reply, Request, Status};

/// The notification method Claude Code channels listen to.
pub const METHOD: &str = "notifications/claude/channel";
/// The experimental capability that makes Claude Code register the channel.
pub const CAPABILITY: &str = "claude/channel";
/// Largest `content` body, in bytes; longer text is cut with a note.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// Most events that do not wake quoted in the notification of the next one
/// that does.
pub const MAX_HELD: usize = 50;

/// The first pause before reconnecting to the daemon; it doubles up to
/// [`MAX_RETRY`].
const MIN_RETRY: Duration = Duration::from_millis(50);
/// The longest pause between reconnection attempts.
const MAX_RETRY: Duration = Duration::from_secs(1);

/// The `params` of the notification for `event`: `content` and `meta`.
/// `description` is the monitor's, when known.
pub fn params(event: &Event, description: Option<&str>) -> Value {
    json!({
        "content": content(event, description),
        "meta": {
            "monitor_id": event.monitor_id,
            "seq": event.seq.to_string(),
            "kind": event.kind().as_str(),
        },
    })
}

/// The notification for `event`.
pub fn notification(event: &Event, description: Option<&str>) -> CustomNotification {
    CustomNotification::new(METHOD, Some(params(event, description)))
}

/// One notification for `held` events that did not wake followed by
/// `event`, which does: `content` frames them all (the events past
/// [`MAX_HELD`] are counted with a pointer to read them), `meta` names the
/// event that woke, and `from_seq` the first one the text covers.
pub fn with_held(
    held: &[(Event, Option<String>)],
    more: u64,
    event: &Event,
    description: Option<&str>,
) -> CustomNotification {
    let mut all: Vec<(Event, Option<String>)> = held.to_vec();
    all.push((event.clone(), description.map(str::to_string)));
    let (mut content, n) =
        wakeful_core::present::batch(&all, MAX_CONTENT_BYTES, MAX_CONTENT_BYTES / 4, None);
    let left = (all.len() - n) as u64 + more;
    if left > 0 {
        let from = held.first().map_or(event.seq, |(e, _)| e.seq);
        content.push_str(&format!(
            "\n({left} more events that did not wake: `wakeful events --session {} --after {}`)",
            event.session,
            from.saturating_sub(1)
        ));
    }
    let from_seq = held.first().map_or(event.seq, |(e, _)| e.seq);
    CustomNotification::new(
        METHOD,
        Some(json!({
            "content": content,
            "meta": {
                "monitor_id": event.monitor_id,
                "seq": event.seq.to_string(),
                "kind": event.kind().as_str(),
                "from_seq": from_seq.to_string(),
            },
        })),
    )
}

/// The text the model reads: the event framed by the presenter (which
/// monitor, that it is monitor output and not user input, the text
/// sanitized and capped with a pointer to the output file).
pub fn content(event: &Event, description: Option<&str>) -> String {
    wakeful_core::present::single(event, description, MAX_CONTENT_BYTES)
}

/// Follows `session`'s events after `after` (or, when `None`, after the
/// daemon's last seq at the first connection) and pushes each to `peer`,
/// until the client is gone. Never starts the daemon: when it is down, this
/// waits for it to come back (any tool call or command starts it) and
/// resumes after the last event sent.
///
/// `shows` says the client declared that it shows channel notifications
/// (`experimental["claude/channel"]` in its capabilities): the daemon then
/// counts this stream as a live wake path of the session.
pub async fn forward(
    peer: Peer<RoleServer>,
    paths: Paths,
    session: String,
    after: Option<u64>,
    shows: bool,
) {
    let mut after = after;
    let mut retry = MIN_RETRY;
    let mut descriptions = wakeful_client::describe::Descriptions::default();
    loop {
        if let Ok(mut conn) = connect_existing(&paths).await {
            let to = Target {
                peer: &peer,
                paths: &paths,
                session: &session,
                shows,
            };
            match follow(&mut conn, &to, &mut after, &mut descriptions).await {
                Followed::ClientGone => return,
                Followed::Progress => retry = MIN_RETRY,
                Followed::Nothing => {}
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// How one daemon connection ended.
enum Followed {
    /// The MCP client is gone: stop.
    ClientGone,
    /// At least one event was sent (or the stream was established).
    Progress,
    /// Nothing was achieved: back off before retrying.
    Nothing,
}

/// Where [`follow`] pushes to.
struct Target<'a> {
    peer: &'a Peer<RoleServer>,
    paths: &'a Paths,
    session: &'a str,
    shows: bool,
}

async fn follow(
    conn: &mut Connection,
    to: &Target<'_>,
    after: &mut Option<u64>,
    descriptions: &mut wakeful_client::describe::Descriptions,
) -> Followed {
    let Target {
        peer,
        paths,
        session,
        shows,
    } = *to;
    let from = match *after {
        Some(seq) => seq,
        None => match conn.call_as::<Status>(Request::Status {}).await {
            Ok(status) => {
                *after = Some(status.last_seq);
                status.last_seq
            }
            Err(_) => return Followed::Nothing,
        },
    };
    let request = Request::Events {
        session: session.to_string(),
        after: from,
        follow: true,
        monitor: None,
        wakes_agent: shows,
        write_to: None,
    };
    if conn.send(request).await.is_err() {
        return Followed::Nothing;
    }
    let mut result = Followed::Nothing;
    // Events that do not wake, read since the last notification; `after`
    // stays before them, so a reconnection reads them again.
    let mut held: Vec<(Event, Option<String>)> = Vec::new();
    let mut more_held = 0u64;
    loop {
        match conn.next().await {
            Ok(Some(Reply::Event { event })) => {
                if after.is_some_and(|a| event.seq <= a) {
                    continue;
                }
                let description = descriptions.get(paths, &event.monitor_id).await;
                if !event.wakes {
                    if held.len() < MAX_HELD {
                        held.push((event, description));
                    } else {
                        more_held += 1;
                    }
                    continue;
                }
                let n = if held.is_empty() {
                    notification(&event, description.as_deref())
                } else {
                    with_held(&held, more_held, &event, description.as_deref())
                };
                held.clear();
                more_held = 0;
                if peer
                    .send_notification(ServerNotification::CustomNotification(n))
                    .await
                    .is_err()
                {
                    return Followed::ClientGone;
                }
                *after = Some(event.seq);
                result = Followed::Progress;
            }
            Ok(Some(Reply::Error { message, .. })) => {
                eprintln!("wakeful mcp: the daemon refused to stream events: {message}");
                return result;
            }
            // A follow stream does not end by itself; reconnect if it does.
            Ok(Some(Reply::Ok { .. })) | Ok(None) | Err(_) => return result,
            Ok(Some(Reply::Batch { .. })) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use wakeful_core::EventBody;

    fn event(body: EventBody, text: &str) -> Event {
        Event {
            wakes: true,
            seq: 42,
            session: "s".into(),
            monitor_id: "mon-abc".into(),
            ts: chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            text: text.into(),
            body,
            replayed: false,
            host: None,
        }
    }

    #[test]
    fn params_frame_sanitize_and_identify() {
        let e = event(
            EventBody::MonitorEvent {
                lines: vec!["\u{1b}[31merror\u{1b}[0m: x".into(), "ok".into()],
                from_line: 3,
                to_line: 4,
            },
            "\u{1b}[31merror\u{1b}[0m: x\nok",
        );
        let p = params(&e, Some("build\u{7}"));
        assert_eq!(
            p,
            json!({
                "content": format!("[wakeful mon-abc \"build\" · 2 lines (output lines 3–4)] {}\nerror: x\nok", wakeful_core::present::NOT_USER_INPUT),
                "meta": {"monitor_id": "mon-abc", "seq": "42", "kind": "lines"},
            })
        );
    }

    #[test]
    fn long_text_is_capped_with_a_pointer_to_the_output_file() {
        let long = "x".repeat(MAX_CONTENT_BYTES + 10);
        let e = event(
            EventBody::MonitorEvent {
                lines: vec![long.clone()],
                from_line: 1,
                to_line: 1,
            },
            &long,
        );
        let c = content(&e, None);
        assert!(c.len() < MAX_CONTENT_BYTES + 400, "{}", c.len());
        assert!(c.contains("…[10 more bytes cut]"), "{c}");
        assert!(c.contains("wakeful output mon-abc --from-line 1 --to-line 1"));
    }
}
