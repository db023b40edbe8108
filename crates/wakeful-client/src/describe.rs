//! Monitor descriptions by id, for followers that show which monitor an
//! event came from (the Claude Code bridge, the MCP channel push).

use std::collections::HashMap;
use std::time::Duration;

use crate::client::{connect_existing, ClientError, Connection};
use wakeful_protocol::Paths;

/// How long one lookup may take before the event is shown without it.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// Most descriptions kept (the cache starts over past this).
pub const MAX_CACHED: usize = 512;

/// Descriptions looked up once per monitor, over a connection of their own
/// (opened on first use; never starts the daemon).
#[derive(Default)]
pub struct Descriptions {
    known: HashMap<String, String>,
    conn: Option<Connection>,
}

impl Descriptions {
    /// The description of monitor `id`, or `None` when it cannot be had now
    /// (unknown id, daemon away, lookup too slow).
    pub async fn get(&mut self, paths: &Paths, id: &str) -> Option<String> {
        if let Some(d) = self.known.get(id) {
            return Some(d.clone());
        }
        let found = tokio::time::timeout(LOOKUP_TIMEOUT, self.lookup(paths, id))
            .await
            .ok()
            .flatten();
        match &found {
            Some(d) => {
                if self.known.len() >= MAX_CACHED {
                    self.known.clear();
                }
                self.known.insert(id.to_string(), d.clone());
            }
            // A lookup cut short may leave the connection mid-reply.
            None => self.conn = None,
        }
        found
    }

    /// Each event with its monitor's description.
    pub async fn describe(
        &mut self,
        paths: &Paths,
        events: Vec<wakeful_core::Event>,
    ) -> Vec<(wakeful_core::Event, Option<String>)> {
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            let d = self.get(paths, &e.monitor_id).await;
            out.push((e, d));
        }
        out
    }

    async fn lookup(&mut self, paths: &Paths, id: &str) -> Option<String> {
        if self.conn.is_none() {
            self.conn = connect_existing(paths).await.ok();
        }
        let conn = self.conn.as_mut()?;
        match conn
            .call(wakeful_protocol::GetMonitor { id: id.to_string() })
            .await
        {
            Ok(info) => Some(info.description),
            Err(ClientError::Refused { .. }) => None,
            Err(_) => {
                self.conn = None;
                None
            }
        }
    }
}
