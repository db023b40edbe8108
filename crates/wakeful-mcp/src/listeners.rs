//! The open `subscriptions/listen` streams of one connection: where
//! `notifications/tasks` go when a task this connection created ends
//! ([`crate::tasks`]), and how many of its tasks are followed for them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rmcp::model::{
    DetailedTask, GetMeta, RequestId, ServerNotification, TaskStatusNotification,
    TaskStatusNotificationParams,
};
use rmcp::service::{Peer, RoleServer};

/// The open `subscriptions/listen` streams of a connection, and how many
/// of its tasks are followed for them.
#[derive(Default)]
pub(crate) struct Listeners {
    open: Mutex<Vec<(RequestId, Peer<RoleServer>)>>,
    followed: AtomicUsize,
}

impl Listeners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(RequestId, Peer<RoleServer>)>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A listen stream `id` opened.
    pub(crate) fn open(&self, id: RequestId, peer: Peer<RoleServer>) {
        self.lock().push((id, peer));
    }

    /// Listen stream `id` ended.
    pub(crate) fn close(&self, id: &RequestId) {
        self.lock().retain(|(open, _)| open != id);
    }

    fn any(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Counts one more followed task, unless no listen stream is open or
    /// `max` tasks are followed already; whether it was counted (then call
    /// [`Listeners::unfollow`] when the task is no longer followed).
    pub(crate) fn follow(&self, max: usize) -> bool {
        // One step, so that two calls at once cannot both take the last place.
        self.any()
            && self
                .followed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok()
    }

    /// A task counted by [`Listeners::follow`] is no longer followed.
    pub(crate) fn unfollow(&self) {
        self.followed.fetch_sub(1, Ordering::SeqCst);
    }

    /// Sends `task` to every open listen stream; whether one took it.
    pub(crate) async fn notify(&self, task: &DetailedTask) -> bool {
        let open = self.lock().clone();
        let mut sent = false;
        for (id, peer) in open {
            let mut note = ServerNotification::TaskStatusNotification(TaskStatusNotification::new(
                TaskStatusNotificationParams::new(task.clone()),
            ));
            note.get_meta_mut().set_subscription_id(id);
            sent |= peer.send_notification(note).await.is_ok();
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_followed_without_a_listen_stream() {
        let listeners = Listeners::default();
        assert!(!listeners.follow(4));
        assert_eq!(listeners.followed.load(Ordering::SeqCst), 0);
    }
}
