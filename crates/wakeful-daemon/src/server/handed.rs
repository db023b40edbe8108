//! Events written to a descriptor a client handed over, in the form it
//! asked for (`events`' `write_to`).
//!
//! `json`, `plain` and `watch` are one or more lines an event. `channel` is
//! what `wakeful mcp` pushes to Claude Code: one JSON-RPC notification for
//! each event that wakes, the events that do not held back for it
//! ([`wakeful_core::channel::Held`]). That stdout also carries the MCP
//! server's own replies, so each write of notifications happens under the
//! frame lock the client sent along ([`FrameLock`]), and the seq of the last
//! event written is kept in it for the client to resume after.
//!
//! A pipe or a Unix stream socket is also written inline by the hub
//! ([`Handed::inline_writer`]): while its follower waits, caught up, the task
//! that committed an event writes it there itself, at once, when that is
//! one write of at most `PIPE_BUF` bytes that takes all or nothing
//! ([`crate::server::quiet::Whole`]); else the follower's task writes it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::AsyncWriteExt;
use wakeful_core::channel::Held;
use wakeful_engine::hub::{Committed, InlineWriter};
use wakeful_engine::MonitorRegistry;
use wakeful_protocol::{FrameLock, OutputForm};

use crate::server::quiet::{HandedError, QuietWrite, Whole};

/// Most monitor descriptions a channel stream keeps (it starts over past
/// this).
const MAX_DESCRIBED: usize = 512;

/// A handed-over descriptor and how events are written to it.
pub(crate) struct Handed {
    out: QuietWrite,
    form: Form,
}

enum Form {
    Lines(LineForm),
    /// Shared with the inline writer, which writes only while the task
    /// does not.
    Channel(Arc<Mutex<Channel>>),
}

fn lock(c: &Mutex<Channel>) -> MutexGuard<'_, Channel> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// The forms of one or more lines an event, each event on its own.
#[derive(Clone, Copy)]
enum LineForm {
    Json,
    Plain,
    Watch,
}

impl LineForm {
    fn add(self, buf: &mut Vec<u8>, e: &Committed) {
        match self {
            LineForm::Json => {
                buf.extend_from_slice(e.json().as_bytes());
                buf.push(b'\n');
            }
            LineForm::Plain => {
                buf.extend_from_slice(wakeful_core::present::plain_line(&e.event).as_bytes());
                buf.push(b'\n');
            }
            LineForm::Watch => {
                for line in wakeful_core::present::watch_lines(&e.event) {
                    buf.extend_from_slice(line.as_bytes());
                    buf.push(b'\n');
                }
            }
        }
    }
}

/// The state of a `channel` stream.
struct Channel {
    lock: Arc<FrameLock>,
    held: Held,
    /// Monitor descriptions looked up so far (`None`: unknown).
    described: HashMap<String, Option<String>>,
    /// The seq of the last event a notification was added for.
    framed: Option<u64>,
    /// Whether a frame cut by an earlier writer's death was looked for.
    checked: bool,
}

impl Handed {
    /// The writer for the descriptors that came with a `write_to` request:
    /// the output first, then, for `channel`, the frame lock. An error says
    /// what is missing or wrong.
    pub(crate) fn new(fds: Vec<OwnedFd>, form: OutputForm) -> Result<Handed, HandedError> {
        let mut fds = fds.into_iter();
        let out = fds.next().ok_or(HandedError::NoDescriptor)?;
        let form = match form {
            OutputForm::Json => Form::Lines(LineForm::Json),
            OutputForm::Plain => Form::Lines(LineForm::Plain),
            OutputForm::Watch => Form::Lines(LineForm::Watch),
            OutputForm::Channel => {
                let lock = fds.next().ok_or(HandedError::NoLock)?;
                Form::Channel(Arc::new(Mutex::new(Channel {
                    lock: Arc::new(FrameLock::from_handed(lock)?),
                    held: Held::default(),
                    described: HashMap::new(),
                    framed: None,
                    checked: false,
                })))
            }
        };
        let out = crate::server::quiet::handed(out)?;
        Ok(Handed { out, form })
    }

    /// Adds event `e` in this form to what is about to be written (nothing,
    /// for a channel event held back); `describe` gives a monitor's
    /// description.
    pub(crate) fn add(
        &mut self,
        buf: &mut Vec<u8>,
        e: &Committed,
        describe: &dyn Fn(&str) -> Option<String>,
    ) {
        match &mut self.form {
            Form::Lines(form) => form.add(buf, e),
            Form::Channel(c) => lock(c).add(buf, &e.event, describe),
        }
    }

    /// A writer for the hub to write this output's events with, inline
    /// ([`InlineWriter`]); `None` when the descriptor cannot take an event
    /// whole or not at all (a TCP socket). A channel's writer finds monitor
    /// descriptions in `registry` (a monitor only the store knows is left to
    /// the task).
    pub(crate) fn inline_writer(
        &self,
        registry: &MonitorRegistry,
    ) -> Option<Arc<dyn InlineWriter>> {
        let out = self.out.whole()?;
        Some(match &self.form {
            Form::Lines(form) => Arc::new(InlineLines { out, form: *form }),
            Form::Channel(c) => Arc::new(InlineChannel {
                out,
                channel: c.clone(),
                registry: registry.clone(),
            }),
        })
    }

    /// Writes `buf`, under the frame lock for a channel (and then keeps the
    /// seq of its last notification there).
    pub(crate) async fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let Form::Channel(c) = &self.form else {
            return self.out.write_all(buf).await;
        };
        let frame_lock = lock(c).lock.clone();
        let _held = Locked::take(&frame_lock).await?;
        let first = !std::mem::replace(&mut lock(c).checked, true);
        // A daemon before this one died in the middle of a frame: end that
        // cut line first, so that only it is lost.
        if first && frame_lock.left_mid_frame()? {
            tracing::info!("a channel's last frame was cut (the daemon died while writing it); ending that line");
            self.out.write_all(b"\n").await?;
        }
        frame_lock.mark_writing(true)?;
        self.out.write_all(buf).await?;
        let framed = lock(c).framed;
        frame_lock.done_writing(framed)
    }

    /// Completes when the reader is gone ([`QuietWrite::reader_gone`]).
    pub(crate) async fn reader_gone(&self) -> std::io::Result<()> {
        self.out.reader_gone().await
    }
}

/// Writes the events of a line form at once, or not at all.
struct InlineLines {
    out: Whole,
    form: LineForm,
}

impl InlineWriter for InlineLines {
    fn try_write(&self, e: &Committed) -> bool {
        // A `monitor` stream ends with its monitor's final event: its task
        // writes that one, and ends.
        if e.event.kind().is_terminal() {
            return false;
        }
        let mut buf = Vec::with_capacity(e.json().len() + 1);
        self.form.add(&mut buf, e);
        self.out.write(&buf)
    }
}

/// Writes a channel's notifications at once, or not at all: only when the
/// frame lock is free now, the stream's first write (which looks for a
/// frame cut by an earlier daemon) is done, and the monitor's description
/// is at hand.
struct InlineChannel {
    out: Whole,
    channel: Arc<Mutex<Channel>>,
    registry: MonitorRegistry,
}

impl InlineWriter for InlineChannel {
    fn try_write(&self, e: &Committed) -> bool {
        let mut c = lock(&self.channel);
        if !c.checked {
            return false;
        }
        let id = &e.event.monitor_id;
        if !c.described.contains_key(id) {
            let Some(info) = self.registry.get(id) else {
                return false;
            };
            c.describe(id, Some(info.description));
        }
        let description = c.described.get(id).cloned().flatten();
        // Held back (it does not wake): nothing to write.
        let before = c.held.clone();
        let Some(notification) = c.held.offer(&e.event, description.as_deref()) else {
            return true;
        };
        let frame = notification.frame();
        let written = match c.lock.try_lock() {
            Ok(true) => {
                // One write of at most PIPE_BUF bytes cannot be cut, so no
                // mark; the seq is kept once it is written.
                let written = self.out.write(frame.as_bytes());
                if written {
                    if let Err(err) = c.lock.done_writing(Some(e.event.seq)) {
                        tracing::warn!("cannot keep a channel's last seq in its frame lock: {err}");
                    }
                }
                if let Err(err) = c.lock.unlock() {
                    tracing::warn!("cannot let go of a channel's frame lock: {err}");
                }
                written
            }
            // The server writes a frame of its own: the task waits for it.
            _ => false,
        };
        match written {
            true => c.framed = Some(e.event.seq),
            false => c.held = before,
        }
        written
    }
}

impl Channel {
    fn describe(&mut self, id: &str, description: Option<String>) {
        if self.described.len() >= MAX_DESCRIBED {
            self.described.clear();
        }
        self.described.insert(id.to_string(), description);
    }

    fn add(
        &mut self,
        buf: &mut Vec<u8>,
        event: &wakeful_core::Event,
        describe: &dyn Fn(&str) -> Option<String>,
    ) {
        if !self.described.contains_key(&event.monitor_id) {
            self.describe(&event.monitor_id, describe(&event.monitor_id));
        }
        let description = self.described.get(&event.monitor_id).cloned().flatten();
        if let Some(n) = self.held.offer(event, description.as_deref()) {
            buf.extend_from_slice(n.frame().as_bytes());
            self.framed = Some(event.seq);
        }
    }
}

/// The frame lock, held until dropped.
struct Locked(Arc<FrameLock>);

impl Locked {
    /// Takes the lock: at once when free, else on a blocking thread (the
    /// other writer holds it only while it writes a frame).
    async fn take(lock: &Arc<FrameLock>) -> std::io::Result<Locked> {
        if !lock.try_lock()? {
            let waiting = lock.clone();
            tokio::task::spawn_blocking(move || waiting.lock_blocking())
                .await
                .map_err(std::io::Error::other)??;
        }
        Ok(Locked(lock.clone()))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if let Err(e) = self.0.unlock() {
            tracing::warn!("cannot let go of a channel's frame lock: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn committed(seq: u64, wakes: bool, text: &str) -> Committed {
        use chrono::TimeZone;
        Committed::new(wakeful_core::journal::Recorded {
            event: std::sync::Arc::new(wakeful_core::Event {
                wakes,
                seq,
                session: "s".into(),
                monitor_id: "mon-a".into(),
                ts: chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
                text: text.into(),
                body: wakeful_core::EventBody::MonitorEvent {
                    lines: vec![text.into()],
                    from_line: seq,
                    to_line: seq,
                },
                replayed: false,
                host: None,
            }),
            json: None,
        })
    }

    /// What the pipe holds: exactly one frame, parsed.
    fn one_frame(fd: &OwnedFd) -> serde_json::Value {
        let text = read_all(fd);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "one frame: {text}");
        serde_json::from_str(lines[0]).unwrap()
    }

    fn read_all(fd: &OwnedFd) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = nix::unistd::read(fd.as_raw_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn channel_frames_wait_for_the_lock_and_record_their_last_seq() {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).unwrap();
        let (server, daemons) = FrameLock::create().unwrap();
        let mut out = Handed::new(vec![write, daemons], OutputForm::Channel).unwrap();
        let describe = |_: &str| Some("desc".to_string());

        // A quiet event is held: nothing to write; the next one carries it.
        let mut buf = Vec::new();
        out.add(&mut buf, &committed(1, false, "quiet"), &describe);
        assert!(buf.is_empty());
        out.add(&mut buf, &committed(2, true, "loud"), &describe);

        // The server is writing a frame: the daemon's write waits for it.
        assert!(server.try_lock().unwrap());
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = released.clone();
        let writer = tokio::spawn(async move {
            out.write(&buf).await.unwrap();
            assert!(seen.load(std::sync::atomic::Ordering::SeqCst), "waited");
            out
        });
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        server.unlock().unwrap();
        let out = writer.await.unwrap();

        let frame = one_frame(&read);
        assert_eq!(frame["method"], wakeful_core::channel::METHOD);
        // The seq is kept for the server, and the lock is free again.
        assert_carries_the_held(&frame, &server, (1, 2), "\"desc\"");
        drop(out);
    }

    #[tokio::test]
    async fn a_frame_cut_by_a_dead_daemon_is_ended_before_the_next() {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).unwrap();
        let (server, daemons) = FrameLock::create().unwrap();
        // The daemon before died holding the lock, its frame half written.
        nix::unistd::write(&write, b"{\"jsonrpc\":\"2.0\",\"meth").unwrap();
        let dead = FrameLock::from_handed(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/self/fd/{}", daemons.as_raw_fd()))
                .unwrap()
                .into(),
        )
        .unwrap();
        assert!(dead.try_lock().unwrap());
        dead.mark_writing(true).unwrap();
        drop(dead);

        let mut out = Handed::new(vec![write, daemons], OutputForm::Channel).unwrap();
        let mut buf = Vec::new();
        out.add(&mut buf, &committed(7, true, "after the cut"), &|_| None);
        out.write(&buf).await.unwrap();
        let text = read_all(&read);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(
            lines[0], "{\"jsonrpc\":\"2.0\",\"meth",
            "the cut line ends alone"
        );
        let frame: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(frame["params"]["meta"]["seq"], "7");
        assert!(!server.left_mid_frame().unwrap(), "the mark is cleared");
        assert_eq!(server.recorded().unwrap(), Some(7));
        // Later writes of the stream add no newline of their own.
        let mut buf = Vec::new();
        out.add(&mut buf, &committed(8, true, "next"), &|_| None);
        out.write(&buf).await.unwrap();
        let text = read_all(&read);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.starts_with('{'), "{text}");
    }

    /// `frame` notifies events `from..=to`, quoting the held "quiet" one
    /// and `description`; the daemon kept `to` in the lock's memfd and let
    /// go of the lock (`server` takes it, and holds it from then on).
    fn assert_carries_the_held(
        frame: &serde_json::Value,
        server: &FrameLock,
        (from, to): (u64, u64),
        description: &str,
    ) {
        assert_eq!(frame["params"]["meta"]["seq"], to.to_string());
        assert_eq!(frame["params"]["meta"]["from_seq"], from.to_string());
        let content = frame["params"]["content"].as_str().unwrap();
        assert!(
            content.contains("quiet") && content.contains(description),
            "{content}"
        );
        assert_eq!(server.recorded().unwrap(), Some(to));
        assert!(server.try_lock().unwrap(), "the lock is free again");
    }

    /// A registry that knows monitor `mon-a` as "desc a".
    fn registry_with_mon_a() -> MonitorRegistry {
        let registry = MonitorRegistry::new(wakeful_engine::RegistryConfig::default());
        registry.insert_ended(wakeful_core::MonitorInfo::starting(
            "mon-a".into(),
            "s".into(),
            &wakeful_core::MonitorSpec::command("true", "desc a"),
            "/x".into(),
        ));
        registry
    }

    #[tokio::test]
    async fn a_channel_is_written_inline_only_under_a_free_lock_and_after_its_first_write() {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).unwrap();
        let (server, daemons) = FrameLock::create().unwrap();
        let mut out = Handed::new(vec![write, daemons], OutputForm::Channel).unwrap();
        let registry = registry_with_mon_a();
        let inline = out
            .inline_writer(&registry)
            .expect("a pipe is written inline");

        // The stream's first write looks for a cut frame: the task's.
        assert!(!inline.try_write(&committed(1, true, "first")));
        let mut buf = Vec::new();
        // (Another monitor's: mon-a's description is the registry's.)
        let mut first = committed(1, true, "first");
        std::sync::Arc::make_mut(&mut first.event).monitor_id = "mon-b".into();
        out.add(&mut buf, &first, &|_| None);
        out.write(&buf).await.unwrap();
        assert_eq!(read_all(&read).lines().count(), 1);

        // A quiet event is held, inline too; the next one that wakes
        // carries it, with the description the registry has.
        assert!(inline.try_write(&committed(2, false, "quiet")));
        assert_eq!(read_all(&read), "", "held back");
        assert!(inline.try_write(&committed(3, true, "loud")));
        assert_carries_the_held(&one_frame(&read), &server, (2, 3), "desc a");

        // The server holds the lock: refused, and nothing held changed —
        // the task writes the same frame later.
        assert!(
            inline.try_write(&committed(4, false, "quiet 2")),
            "held: no lock needed"
        );
        assert!(!inline.try_write(&committed(5, true, "while locked")));
        assert_eq!(read_all(&read), "");
        server.unlock().unwrap();
        let mut buf = Vec::new();
        out.add(&mut buf, &committed(5, true, "while locked"), &|_| None);
        out.write(&buf).await.unwrap();
        let frame = one_frame(&read);
        assert_eq!(frame["params"]["meta"]["seq"], "5");
        assert_eq!(frame["params"]["meta"]["from_seq"], "4", "{frame}");

        // A monitor the registry does not know: the task looks it up.
        let mut other = committed(6, true, "elsewhere");
        std::sync::Arc::make_mut(&mut other.event).monitor_id = "mon-gone".into();
        assert!(!inline.try_write(&other));
        assert_eq!(server.recorded().unwrap(), Some(5));
    }

    #[tokio::test]
    async fn a_channel_without_its_lock_is_refused() {
        let (_read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
        let e = Handed::new(vec![write], OutputForm::Channel)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("second descriptor"), "{e}");
        let e = Handed::new(vec![], OutputForm::Json)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("none came"), "{e}");
    }
}
