//! The webhook subscriptions of MCP Events as [`State`](crate::state::State)
//! holds them ([`Subscriptions`]) and as `event-webhooks.json` keeps them
//! ([`Record`]). The requests and the deliveries that use them are
//! `server::subscriptions`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use wakeful_protocol::EventSubscriptionInfo;

/// The file of the subscriptions, in the state directory.
pub const FILE: &str = "event-webhooks.json";
/// `state` of a subscription that delivers.
pub(crate) const ACTIVE: &str = "active";
/// `state` of a subscription whose deliveries stopped.
pub(crate) const GIVEN_UP: &str = "given_up";

/// One subscription as the file keeps it.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) id: String,
    pub(crate) session: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) monitor: Option<String>,
    #[serde(default)]
    pub(crate) wake_on: Option<String>,
    pub(crate) url: String,
    pub(crate) secret: String,
    pub(crate) expires_ms: i64,
    pub(crate) position: u64,
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) delivered: u64,
    #[serde(default)]
    pub(crate) failures: u32,
    #[serde(default)]
    pub(crate) last_error: Option<String>,
}

impl Record {
    /// The subscription as `status` shows it (without its secret).
    pub(crate) fn info(&self) -> EventSubscriptionInfo {
        EventSubscriptionInfo {
            id: self.id.clone(),
            session: self.session.clone(),
            name: self.name.clone(),
            monitor: self.monitor.clone(),
            url: self.url.clone(),
            expires_ms: self.expires_ms,
            position: self.position,
            state: self.state.clone(),
            delivered: self.delivered,
            failures: self.failures,
            last_error: self.last_error.clone(),
        }
    }
}

/// The whole file.
#[derive(Default, Serialize, Deserialize)]
pub(crate) struct File {
    pub(crate) subscriptions: Vec<Record>,
}

/// One subscription in the book.
pub(crate) struct Entry {
    pub(crate) record: Record,
    /// The delivery task, while one runs; a refresh or an unsubscribe
    /// aborts it.
    pub(crate) task: Option<tokio::task::AbortHandle>,
}

/// The daemon's webhook subscriptions.
#[derive(Default)]
pub(crate) struct Subscriptions {
    book: Mutex<HashMap<String, Entry>>,
}

impl Subscriptions {
    /// The book (a panic while holding this lock leaves consistent data
    /// behind).
    pub(crate) fn book(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every subscription as `status` shows it, by session and id (not
    /// the expired ones: a given-up subscription has no task to forget it
    /// when its lifetime ends).
    pub(crate) fn infos(&self) -> Vec<EventSubscriptionInfo> {
        let now = chrono::Utc::now().timestamp_millis();
        let mut out: Vec<_> = self
            .book()
            .values()
            .filter(|e| e.record.expires_ms > now)
            .map(|e| e.record.info())
            .collect();
        out.sort_by(|a, b| (&a.session, &a.id).cmp(&(&b.session, &b.id)));
        out
    }

    /// Writes the whole book to its file.
    pub(crate) fn save(book: &HashMap<String, Entry>, file: &Path) -> std::io::Result<()> {
        let mut records: Vec<&Record> = book.values().map(|e| &e.record).collect();
        records.sort_by(|a, b| a.id.cmp(&b.id));
        let json = serde_json::to_vec_pretty(&serde_json::json!({ "subscriptions": records }))
            .map_err(std::io::Error::other)?;
        let tmp = file.with_extension("json.tmp");
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, file)
    }

    /// [`Subscriptions::save`], a failure logged.
    pub(crate) fn save_logged(book: &HashMap<String, Entry>, file: &Path) {
        if let Err(e) = Self::save(book, file) {
            tracing::warn!("cannot write {}: {e}", file.display());
        }
    }
}
