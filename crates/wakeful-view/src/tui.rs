//! `wakeful tui`: the live view in a terminal (ratatui + crossterm).
//!
//! [`draw`] renders an [`App`] (a pure function of the state, the clock
//! passed in; snapshot-tested with ratatui's `TestBackend`); [`run`] is
//! the IO around it: the terminal, keys, the daemon [`feed`], and the
//! actions the keys ask for. Every string that came from a monitor was
//! made safe ([`wakeful_core::text::sanitize_for_model`]) before it
//! reaches a cell.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Local, Utc};
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;
use regex::Regex;
use tokio::sync::mpsc;
use wakeful_client::Paths;
use wakeful_core::{EventKind, MonitorInfo, MonitorState};
use wakeful_protocol::{ConsumerInfo, WakeDelivery, WakeStatus};

use crate::app::{
    Action, App, CallError, Focus, Key, Link, Mode, OutputView, Overlay, Redraw, Scope,
};
use crate::events::{highlight, one_line};
use crate::feed::{self, FeedMsg, FeedOptions};
use crate::model::{age, ending, Bucket, MonitorRow, ACTIVITY_MINUTES};
use crate::output_pane::OutputIndex;
use crate::ViewError;

/// The keys, as the `?` overlay lists them.
pub const HELP: &[(&str, &str)] = &[
    ("↑/↓ j/k", "select a monitor (table) · scroll (events)"),
    ("Tab", "switch pane (table ⇄ events)"),
    ("Enter / Esc", "events of the selected monitor / of all"),
    (
        "PgUp/PgDn",
        "scroll events (scrolling up pauses the follow)",
    ),
    ("End / G", "follow new events again"),
    ("Home / g", "first event kept"),
    ("/", "search (regex), highlighted"),
    ("n / N", "next / previous match"),
    (
        "e",
        "next line that looks like an error ([view] error_regex)",
    ),
    ("s", "stop the selected monitor (asks first)"),
    ("o", "the complete output file, with line numbers"),
    ("w", "the session's wake route and its deliveries"),
    ("c", "consumers and their unacknowledged events"),
    ("?", "this help"),
    ("q / Ctrl-C", "quit (monitors keep running)"),
];

const FOOTER: &str =
    "? help  / search  n/N next  e error  s stop  o output  w wake  c consumers  Tab pane  q quit";

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// A time of day in the local zone (UTC in unit tests, so that snapshots
/// do not depend on the machine).
fn time_of(ts: &DateTime<Utc>) -> String {
    if cfg!(test) {
        ts.format("%H:%M:%S").to_string()
    } else {
        ts.with_timezone(&Local).format("%H:%M:%S").to_string()
    }
}

/// Draws the whole view for the moment `wall` (dates) / `now` (footer
/// messages). Records the heights of the scrollable panes in `app`.
pub fn draw(frame: &mut Frame, app: &mut App, wall: &DateTime<Utc>, now: Instant) {
    let area = frame.area();
    if area.width < 10 || area.height < 5 {
        frame.render_widget(Paragraph::new("wakeful: too small"), area);
        return;
    }
    let rows = app.monitors.sorted(wall);
    let table_height = (rows.len() as u16 + 3).clamp(4, (area.height * 2 / 5).max(4));
    let [title, table_area, events_area, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_height),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(frame, app, &rows, title);
    let selected = app
        .selected
        .as_ref()
        .and_then(|s| rows.iter().position(|r| &r.info.id == s));
    draw_table(frame, app, &rows, selected, wall, table_area);
    drop(rows);
    app.events_height = events_area.height.saturating_sub(2).max(1) as usize;
    draw_events(frame, app, events_area);
    draw_footer(frame, app, now, footer);
    app.output_height = area.height.saturating_sub(2).max(1) as usize;
    match &app.mode {
        Mode::ConfirmStop { id, description } => {
            let text = format!(
                "Stop {} ({})?  y: stop · any other key: keep it",
                one_line(id),
                one_line(description)
            );
            let r = centered(area, 60, 5);
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(text).wrap(Wrap { trim: true }).block(
                    Block::bordered()
                        .title(" stop monitor ")
                        .border_style(Style::new().fg(Color::Yellow)),
                ),
                r,
            );
        }
        Mode::Overlay(o) => draw_overlay(frame, o, area),
        _ => {}
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [r] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(r);
    r
}

fn draw_title(frame: &mut Frame, app: &App, rows: &[&MonitorRow], area: Rect) {
    let running = rows.iter().filter(|r| r.info.is_active()).count();
    let scope = match &app.scope {
        Scope::Session(s) => format!("session {}", one_line(s)),
        Scope::All => "all sessions".to_string(),
    };
    let (link, style) = match &app.link {
        Link::Live => ("● live".to_string(), Style::new().fg(Color::Green)),
        Link::Connecting => ("○ connecting".to_string(), Style::new().fg(Color::Yellow)),
        Link::Lost(_) => ("○ reconnecting".to_string(), Style::new().fg(Color::Red)),
    };
    let mut spans = vec![
        Span::styled("wakeful", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(
            " · {scope} · {running} running, {} ended · ",
            rows.len() - running
        )),
        Span::styled(link, style),
    ];
    if let Some(s) = &app.storage {
        let (text, style) = crate::storage_line(s);
        if !text.is_empty() {
            let style = match style {
                crate::StorageLevel::Full => {
                    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
                }
                crate::StorageLevel::Low => Style::new().fg(Color::Yellow),
                crate::StorageLevel::Info => dim(),
            };
            spans.push(Span::raw(" · "));
            spans.push(Span::styled(text, style));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The sparkline of one monitor's last hour in `width` characters: lines
/// per minute, scaled to its busiest character; characters with suppressed
/// lines in red.
pub fn sparkline(series: &[Bucket; ACTIVITY_MINUTES], width: usize) -> Line<'static> {
    let width = width.clamp(1, ACTIVITY_MINUTES);
    let per = ACTIVITY_MINUTES.div_ceil(width);
    let chunks: Vec<Bucket> = series
        .rchunks(per)
        .take(width)
        .map(|c| Bucket {
            lines: c.iter().map(|b| b.lines).sum(),
            suppressed: c.iter().map(|b| b.suppressed).sum(),
        })
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let max = chunks
        .iter()
        .map(|b| b.lines + b.suppressed)
        .max()
        .unwrap_or(0);
    let spans: Vec<Span<'static>> = chunks
        .iter()
        .map(|b| {
            let v = b.lines + b.suppressed;
            let c = if v == 0 {
                ' '
            } else {
                SPARK[((v * 7).div_ceil(max.max(1)) as usize).min(7)]
            };
            let style = if b.suppressed > 0 {
                Style::new().fg(Color::Red)
            } else {
                Style::new().fg(Color::Cyan)
            };
            Span::styled(c.to_string(), style)
        })
        .collect();
    Line::from(spans)
}

fn state_cell(info: &MonitorInfo) -> Cell<'static> {
    match info.state {
        MonitorState::Running => Cell::from("running").style(Style::new().fg(Color::Green)),
        MonitorState::Ended => {
            let abnormal = info.stop_reason.as_ref().is_some_and(|r| r.is_abnormal())
                || !info.survivors.is_empty();
            let style = if abnormal {
                Style::new().fg(Color::Red)
            } else {
                dim()
            };
            Cell::from("ended").style(style)
        }
    }
}

fn draw_table(
    frame: &mut Frame,
    app: &App,
    rows: &[&MonitorRow],
    selected: Option<usize>,
    wall: &DateTime<Utc>,
    area: Rect,
) {
    let focused = app.focus == Focus::Table;
    let block = Block::bordered()
        .title(" monitors ")
        .border_style(if focused {
            Style::new().fg(Color::Cyan)
        } else {
            dim()
        });
    if rows.is_empty() {
        let text = "no monitors (active, or ended within the last hour); start one: wakeful start -- COMMAND";
        frame.render_widget(
            Paragraph::new(text)
                .style(dim())
                .wrap(Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    }
    let w = area.width.saturating_sub(2);
    // Columns by width: what fits, most useful first.
    let wide = w >= 110;
    let medium = w >= 70;
    let spark_width = if wide {
        20
    } else if medium {
        12
    } else {
        0
    };
    let mut header = vec!["ID", "STATE"];
    let mut widths = vec![Constraint::Length(15), Constraint::Length(7)];
    if medium {
        header.extend(["SOURCE", "AGE", "LINES", "SUPPR"]);
        widths.extend([
            Constraint::Length(8),
            Constraint::Length(4),
            Constraint::Length(7),
            Constraint::Length(6),
        ]);
    }
    if wide {
        header.extend(["LAST", "ENDING"]);
        widths.extend([Constraint::Length(8), Constraint::Length(16)]);
    }
    if spark_width > 0 {
        header.push("LAST HOUR");
        widths.push(Constraint::Length(spark_width as u16));
    }
    header.push("DESCRIPTION");
    widths.push(Constraint::Fill(1));
    // Only the rows that fit are built (hundreds of monitors cost nothing
    // per frame): a window that keeps the selection in view.
    let fit = area.height.saturating_sub(3).max(1) as usize;
    let first = selected.map(|s| (s + 1).saturating_sub(fit)).unwrap_or(0);
    let selected = selected.map(|s| s - first);
    let body: Vec<Row> = rows
        .iter()
        .skip(first)
        .take(fit)
        .map(|r| {
            let i = &r.info;
            let mut cells: Vec<Cell> = vec![Cell::from(one_line(&i.id)), state_cell(i)];
            if medium {
                cells.extend([
                    Cell::from(crate::model::source_kind(i)),
                    Cell::from(age(&i.started_at, wall)),
                    Cell::from(i.lines.to_string()),
                    Cell::from(i.suppressed_lines.to_string()).style(if i.suppressed_lines > 0 {
                        Style::new().fg(Color::Red)
                    } else {
                        Style::new()
                    }),
                ]);
            }
            if wide {
                cells.push(Cell::from(
                    r.last_event.as_ref().map(time_of).unwrap_or_default(),
                ));
                cells.push(Cell::from(one_line(&ending(i))));
            }
            if spark_width > 0 {
                cells.push(Cell::from(sparkline(&r.activity.series(wall), spark_width)));
            }
            let mut desc = one_line(&i.description);
            if wide || !medium {
                // The command (or what is watched) after the description.
                let what = one_line(&i.source.summary());
                if !what.is_empty() && !desc.contains(&what) {
                    desc = format!("{desc} — {what}");
                }
            }
            if !wide && i.state == MonitorState::Ended {
                let e = one_line(&ending(i));
                if !e.is_empty() {
                    desc = format!("[{e}] {desc}");
                }
            }
            cells.push(Cell::from(desc));
            Row::new(cells)
        })
        .collect();
    let table = Table::new(body, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .column_spacing(1)
        .block(block);
    let mut state = TableState::default().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_events(frame: &mut Frame, app: &App, area: Rect) {
    let height = area.height.saturating_sub(2) as usize;
    let window = app.pane.window(height);
    let focused = app.focus == Focus::Events;
    let which = match app.pane.filter() {
        Some(id) => one_line(id),
        None => match &app.scope {
            Scope::Session(_) => "all of the session".to_string(),
            Scope::All => "all sessions".to_string(),
        },
    };
    let mut title = vec![Span::raw(format!(" events: {which} · "))];
    if window.paused {
        title.push(Span::styled(
            "paused",
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
        if window.new_rows > 0 {
            title.push(Span::styled(
                format!(" · ↓ {} new (End follows)", window.new_rows),
                Style::new().fg(Color::Yellow),
            ));
        } else {
            title.push(Span::raw(" (End follows)"));
        }
    } else {
        title.push(Span::styled("following", Style::new().fg(Color::Green)));
    }
    if let Some(_re) = app.pane.search() {
        title.push(Span::raw(format!(
            " · /{}",
            one_line(app.pane.search_text())
        )));
    }
    title.push(Span::raw(" "));
    let block = Block::bordered()
        .title(Line::from(title))
        .border_style(if focused {
            Style::new().fg(Color::Cyan)
        } else {
            dim()
        });
    let show_monitor = app.pane.filter().is_none();
    let search = app.pane.search();
    let cursor = app.pane.cursor();
    let errors = app.pane.error_regex();
    let lines: Vec<Line> = if window.rows.is_empty() {
        vec![Line::styled(
            "no events yet (they appear here as monitors print)",
            dim(),
        )]
    } else {
        window
            .rows
            .iter()
            .map(|r| {
                let mut spans = vec![Span::styled(format!("{} ", time_of(&r.ts)), dim())];
                if show_monitor {
                    spans.push(Span::styled(format!("{} ", one_line(&r.monitor_id)), dim()));
                }
                let base = if r.kind != EventKind::Lines {
                    if !r.continued {
                        spans.push(Span::styled(
                            format!("[{}] ", r.kind),
                            Style::new().fg(Color::Magenta),
                        ));
                    }
                    Style::new().fg(Color::Magenta)
                } else if errors.is_match(&r.text) {
                    Style::new().fg(Color::Red)
                } else {
                    Style::new()
                };
                let base = if Some(r.id) == cursor {
                    base.add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
                } else {
                    base
                };
                for (piece, hit) in highlight(&r.text, search) {
                    let style = if hit {
                        base.bg(Color::Yellow).fg(Color::Black)
                    } else {
                        base
                    };
                    spans.push(Span::styled(piece.to_string(), style));
                }
                Line::from(spans)
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_footer(frame: &mut Frame, app: &App, now: Instant, area: Rect) {
    let line = match (&app.mode, &app.link, app.status_at(now)) {
        (Mode::Search(text), _, _) => Line::from(vec![
            Span::styled("/", Style::new().fg(Color::Yellow)),
            Span::raw(one_line(text)),
            Span::styled("▏ Enter search · Esc cancel", dim()),
        ]),
        (_, _, Some(msg)) => Line::styled(one_line(msg), Style::new().fg(Color::Yellow)),
        (_, Link::Lost(why), _) => Line::styled(
            format!("daemon unreachable, reconnecting: {}", one_line(why)),
            Style::new().fg(Color::Red),
        ),
        _ => Line::styled(FOOTER, dim()),
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_overlay(frame: &mut Frame, overlay: &Overlay, area: Rect) {
    match overlay {
        Overlay::Help => {
            let r = centered(area, 72, HELP.len() as u16 + 4);
            let key_width = HELP
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(0);
            let mut lines: Vec<Line> = HELP
                .iter()
                .map(|(k, what)| {
                    Line::from(vec![
                        Span::styled(
                            format!("{k:<key_width$}  "),
                            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
                        ),
                        Span::raw(*what),
                    ])
                })
                .collect();
            lines.push(Line::styled("any key closes this help", dim()));
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .block(Block::bordered().title(" keys ")),
                r,
            );
        }
        Overlay::Output(view) => {
            let title = if view.total == 0 {
                format!(" output of {} (empty) ", one_line(&view.monitor_id))
            } else {
                let last = view.lines.last().map(|(n, _)| *n).unwrap_or(view.top);
                format!(
                    " output of {} · lines {}–{} of {} · {} ",
                    one_line(&view.monitor_id),
                    view.top,
                    last,
                    view.total,
                    one_line(&view.path.display().to_string())
                )
            };
            let digits = view.total.max(1).to_string().len();
            let mut lines: Vec<Line> = view
                .lines
                .iter()
                .map(|(n, text)| {
                    Line::from(vec![
                        Span::styled(format!("{n:>digits$} │ "), dim()),
                        Span::raw(text.clone()),
                    ])
                })
                .collect();
            if let Some(e) = &view.error {
                lines.push(Line::styled(one_line(e), Style::new().fg(Color::Red)));
            }
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines).block(
                    Block::bordered()
                        .title(title)
                        .title_bottom(" ↑/↓ PgUp/PgDn Home/End scroll · Esc close "),
                ),
                area,
            );
        }
        Overlay::Wake {
            session,
            status,
            history,
        } => {
            let r = centered(area, 90, 16);
            let mut lines = vec![];
            match status {
                None => lines.push(Line::raw("loading…")),
                Some(Err(e)) => lines.push(Line::styled(
                    one_line(&e.to_string()),
                    Style::new().fg(Color::Red),
                )),
                Some(Ok(None)) => {
                    lines.push(Line::raw(
                        "no wake route: events reach the agent only when it reads them",
                    ));
                    lines.push(Line::styled(
                        "wakeful wake set codex|opencode|exec|webhook sets one",
                        dim(),
                    ));
                }
                Some(Ok(Some(w))) => lines.extend(wake_lines(w)),
            }
            if !history.is_empty() {
                lines.push(Line::raw(""));
                lines.push(Line::styled("seen while this view was open:", dim()));
                for (at, acked, n) in history.iter().rev().take(6) {
                    lines.push(Line::raw(format!(
                        "  {}  acknowledged up to #{acked} · {n} wakes delivered",
                        time_of(at)
                    )));
                }
            }
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines).wrap(Wrap { trim: false }).block(
                    Block::bordered()
                        .title(format!(" wake route of session {} ", one_line(session)))
                        .title_bottom(" r refresh · Esc close "),
                ),
                r,
            );
        }
        Overlay::Consumers(list) => {
            let r = centered(area, 70, 14);
            frame.render_widget(Clear, r);
            let block = Block::bordered()
                .title(" consumers (unacknowledged events) ")
                .title_bottom(" r refresh · Esc close ");
            match list {
                Some(Ok(list)) if !list.is_empty() => {
                    frame.render_widget(consumer_table(list).block(block), r)
                }
                other => {
                    let text = match other {
                        None => "loading…".to_string(),
                        Some(Err(e)) => one_line(&e.to_string()),
                        _ => "no consumers yet (a consumer appears with its first wait)".into(),
                    };
                    frame.render_widget(Paragraph::new(text).block(block), r)
                }
            }
        }
    }
}

fn consumer_table(list: &[ConsumerInfo]) -> Table<'static> {
    let rows: Vec<Row> = list
        .iter()
        .map(|c| {
            Row::new(vec![
                Cell::from(one_line(&c.session)),
                Cell::from(one_line(&c.consumer)),
                Cell::from(c.acked_seq.to_string()),
                Cell::from(c.unacked.to_string()).style(if c.unacked > 0 {
                    Style::new().fg(Color::Yellow)
                } else {
                    Style::new()
                }),
                Cell::from(c.waiters.to_string()),
            ])
        })
        .collect();
    Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Length(12),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Length(7),
        ],
    )
    .header(
        Row::new(["SESSION", "CONSUMER", "ACKED", "UNACKED", "WAITERS"])
            .style(Style::new().add_modifier(Modifier::BOLD)),
    )
}

fn wake_lines(w: &WakeStatus) -> Vec<Line<'static>> {
    let route = serde_json::to_value(&w.route)
        .map(|v| v.to_string())
        .unwrap_or_default();
    let mut lines = vec![
        Line::raw(format!("route: {} {}", w.route.name(), one_line(&route))),
        Line::raw(format!("from: {:?}", w.source).to_lowercase()),
    ];
    let state = match &w.delivery {
        WakeDelivery::Idle => "idle (nothing to deliver)".to_string(),
        WakeDelivery::Delivering { wake_id } => format!("delivering {}", one_line(wake_id)),
        WakeDelivery::Retrying {
            wake_id,
            attempts,
            next_attempt_in_ms,
        } => format!(
            "retrying {} (attempt {attempts}, next in {} s)",
            one_line(wake_id),
            next_attempt_in_ms / 1000
        ),
        WakeDelivery::Queued {
            wake_id,
            checks,
            detail,
            ..
        } => format!(
            "queued {} (the agent holds it; {checks} checks): {}",
            one_line(wake_id),
            one_line(detail)
        ),
        WakeDelivery::Undelivered {
            wake_id,
            reason,
            events_from,
            events_to,
        } => format!(
            "undelivered {}: events #{events_from}–#{events_to} ({})",
            one_line(wake_id),
            one_line(reason)
        ),
    };
    lines.push(Line::raw(format!("state: {state}")));
    lines.push(Line::raw(format!(
        "delivered: {} wakes · acknowledged up to #{}",
        w.wakes_delivered, w.acked_seq
    )));
    if let Some(e) = &w.last_error {
        lines.push(Line::styled(
            format!("last error: {}", one_line(e)),
            Style::new().fg(Color::Red),
        ));
    }
    if !w.recent.is_empty() {
        lines.push(Line::raw("recent deliveries (newest last):"));
        for d in &w.recent {
            let text = format!(
                "  {} {} #{} events #{}–#{}: {}{}",
                one_line(d.at.get(11..19).unwrap_or(&d.at)),
                one_line(&d.wake_id),
                d.attempt,
                d.events_from,
                d.events_to,
                one_line(&d.outcome),
                d.detail
                    .as_deref()
                    .map(|x| format!(" ({})", one_line(x)))
                    .unwrap_or_default()
            );
            let style = match d.outcome.as_str() {
                "accepted" => Style::new().fg(Color::Green),
                "failed" => Style::new().fg(Color::Red),
                _ => Style::new(),
            };
            lines.push(Line::styled(text, style));
        }
    }
    lines
}

/// Maps a crossterm key to the view's. Alt-X is Esc then X: a terminal
/// sends both as one sequence when they are typed quickly.
fn keys_of(k: crossterm::event::KeyEvent) -> Vec<Key> {
    use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
    if k.kind == KeyEventKind::Release {
        return vec![];
    }
    let key = match k.code {
        KeyCode::Char(c) if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Ctrl(c),
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Tab | KeyCode::BackTab => Key::Tab,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        _ => return vec![],
    };
    if k.modifiers.contains(KeyModifiers::ALT) {
        vec![Key::Esc, key]
    } else {
        vec![key]
    }
}

/// Results of actions, back to the loop.
enum Done {
    Stopped(String, Result<MonitorInfo, wakeful_client::ClientError>),
    Output(OutputView),
    Wake(Result<Option<WakeStatus>, CallError>),
    Consumers(Result<Vec<ConsumerInfo>, CallError>),
}

/// Puts the terminal back however the view ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Runs `wakeful tui` until `q`: the view of `scope`, with `error_regex`
/// for `e`. The view and its feed run on one thread of their own (a
/// current-thread runtime): an event under load then wakes one thread, not
/// two.
pub async fn run(paths: Paths, scope: Scope, error_regex: Regex) -> Result<(), ViewError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("wakeful-tui".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(ViewError::Terminal)
                .and_then(|rt| rt.block_on(run_here(paths, scope, error_regex)));
            let _ = tx.send(result);
        })
        .map_err(ViewError::Terminal)?;
    rx.await.unwrap_or_else(|_| {
        Err(ViewError::Terminal(std::io::Error::other(
            "the view's thread ended without a word",
        )))
    })
}

async fn run_here(paths: Paths, scope: Scope, error_regex: Regex) -> Result<(), ViewError> {
    use crossterm::tty::IsTty;
    use futures_util::StreamExt;
    if !std::io::stdout().is_tty() || !std::io::stdin().is_tty() {
        return Err(ViewError::NoTerminal);
    }
    let mut feed = feed::spawn(paths.clone(), scope.clone(), FeedOptions::default());
    crossterm::terminal::enable_raw_mode().map_err(ViewError::Terminal)?;
    let _guard = TerminalGuard;
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::cursor::Hide
    )
    .map_err(ViewError::Terminal)?;
    let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
    let mut terminal = ratatui::Terminal::new(backend).map_err(ViewError::Terminal)?;
    terminal.clear().map_err(ViewError::Terminal)?;

    let mut app = App::new(scope, error_regex);
    let mut keys = crossterm::event::EventStream::new();
    let mut redraw = Redraw::new(Duration::from_millis(33));
    let (done_tx, mut done_rx) = mpsc::channel::<Done>(16);
    let indexes: Arc<Mutex<HashMap<PathBuf, OutputIndex>>> = Arc::default();
    let mut second = tokio::time::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    // For benchmarks: draws and events so far, a JSON line a second.
    let mut stats = std::env::var_os("WAKEFUL_TUI_STATS").and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
    });
    let (mut draws, mut events_seen) = (0u64, 0u64);
    loop {
        if redraw.should_draw(Instant::now()) {
            let wall = Utc::now();
            let now = Instant::now();
            terminal
                .draw(|f| draw(f, &mut app, &wall, now))
                .map_err(ViewError::Terminal)?;
            redraw.drawn(now);
            draws += 1;
        }
        let due = redraw.due();
        let sleep = async {
            match due {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let mut actions = vec![];
        tokio::select! {
            msg = feed.recv() => {
                match msg {
                    Some(FeedMsg::Live { .. }) => app.link = Link::Live,
                    Some(FeedMsg::Lost(why)) => app.link = Link::Lost(why),
                    Some(FeedMsg::Monitors(list)) => app.apply_list(list),
                    Some(FeedMsg::Storage(s)) => app.storage = Some(*s),
                    Some(FeedMsg::Events(events)) => {
                        events_seen += events.len() as u64;
                        app.apply_events(&events)
                    }
                    None => return Ok(()),
                }
                redraw.mark();
            }
            key = keys.next() => {
                match key {
                    Some(Ok(crossterm::event::Event::Key(k))) => {
                        for k in keys_of(k) {
                            actions.extend(app.key(k, Instant::now(), &Utc::now()));
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(ViewError::Terminal(e)),
                    None => return Ok(()),
                }
                // Keys and resizes draw at once.
                redraw.mark();
                redraw = Redraw::new(Duration::from_millis(33));
            }
            done = done_rx.recv() => {
                match done {
                    Some(Done::Stopped(id, Ok(_))) => app.say(format!("stopped {id}"), Instant::now()),
                    Some(Done::Stopped(id, Err(e))) => app.say(format!("could not stop {id}: {e}"), Instant::now()),
                    Some(Done::Output(view)) => app.set_output(view),
                    Some(Done::Wake(w)) => app.set_wake(w, Utc::now()),
                    Some(Done::Consumers(c)) => app.set_consumers(c),
                    None => {}
                }
                redraw.mark();
            }
            _ = second.tick() => {
                ticks += 1;
                if let Some(f) = &mut stats {
                    use std::io::Write;
                    let _ = writeln!(f, "{{\"t\":{ticks},\"draws\":{draws},\"events\":{events_seen}}}");
                }
                // Ages and sparklines move with the clock; overlays refresh.
                redraw.mark();
                if ticks.is_multiple_of(2) {
                    actions.extend(app.refresh());
                }
            }
            _ = sleep => {}
        }
        for action in actions {
            if action == Action::Quit {
                return Ok(());
            }
            spawn_action(&paths, action, done_tx.clone(), indexes.clone());
        }
    }
}

/// Does an action's IO in a task of its own; its result comes back on `done`.
fn spawn_action(
    paths: &Paths,
    action: Action,
    done: mpsc::Sender<Done>,
    indexes: Arc<Mutex<HashMap<PathBuf, OutputIndex>>>,
) {
    let paths = paths.clone();
    tokio::spawn(async move {
        let result = match action {
            Action::Quit => return,
            Action::Stop { id } => {
                let r = feed::call(&paths, wakeful_protocol::StopMonitor { id: id.clone() }).await;
                Done::Stopped(id, r)
            }
            Action::LoadWake { session } => Done::Wake(
                feed::call(&paths, wakeful_protocol::ShowWake { session })
                    .await
                    .map_err(CallError::from),
            ),
            Action::LoadConsumers { session } => Done::Consumers(
                feed::call(&paths, wakeful_protocol::ListConsumers { session })
                    .await
                    .map_err(CallError::from),
            ),
            Action::ReadOutput {
                monitor_id,
                path,
                from,
                count,
            } => {
                let view = tokio::task::spawn_blocking(move || {
                    read_output(&indexes, monitor_id, path, from, count)
                })
                .await;
                match view {
                    Ok(v) => Done::Output(v),
                    Err(_) => return,
                }
            }
        };
        let _ = done.send(result).await;
    });
}

/// A window of an output file, indexing it (again) as needed.
pub fn read_output(
    indexes: &Mutex<HashMap<PathBuf, OutputIndex>>,
    monitor_id: String,
    path: PathBuf,
    from: u64,
    count: u64,
) -> OutputView {
    let mut view = OutputView {
        monitor_id,
        path: path.clone(),
        total: 0,
        top: 1,
        lines: vec![],
        error: None,
    };
    let Ok(mut indexes) = indexes.lock() else {
        view.error = Some("the output index is unusable; close and open it again".into());
        return view;
    };
    let index = match indexes.remove(&path) {
        Some(mut i) => i.refresh().map(|()| i),
        None => OutputIndex::open(&path),
    };
    match index {
        Ok(index) => {
            view.total = index.total();
            view.top = index.window_top(from, count);
            match index.read(from, count) {
                Ok(lines) => view.lines = lines,
                Err(e) => view.error = Some(e.to_string()),
            }
            indexes.insert(path, index);
        }
        Err(e) => view.error = Some(e.to_string()),
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{at, event, info, lines};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use wakeful_core::{EventBody, MonitorStopReason};

    #[test]
    fn the_wake_overlay_lists_recent_deliveries() {
        let w = WakeStatus {
            session: "s".into(),
            route: wakeful_protocol::WakeAdapter::Webhook {
                url: "http://127.0.0.1:9/x".into(),
            },
            source: wakeful_protocol::RouteSource::Set,
            delivery: WakeDelivery::Idle,
            acked_seq: 7,
            wakes_delivered: 1,
            last_error: None,
            recent: vec![
                wakeful_protocol::DeliveryAttempt {
                    wake_id: "wake-1-3".into(),
                    attempt: 1,
                    at: "2026-12-01T09:00:01.000Z".into(),
                    events_from: 1,
                    events_to: 3,
                    outcome: "refused".into(),
                    detail: Some("HTTP 503\u{1b}[2J".into()),
                },
                wakeful_protocol::DeliveryAttempt {
                    wake_id: "wake-1-3".into(),
                    attempt: 2,
                    at: "2026-12-01T09:00:03.000Z".into(),
                    events_from: 1,
                    events_to: 3,
                    outcome: "accepted".into(),
                    detail: None,
                },
            ],
        };
        let text: Vec<String> = wake_lines(&w).iter().map(|l| l.to_string()).collect();
        let tail = &text[text.len() - 3..];
        assert_eq!(tail[0], "recent deliveries (newest last):");
        assert_eq!(
            tail[1],
            "  09:00:01 wake-1-3 #1 events #1–#3: refused (HTTP 503)"
        );
        assert_eq!(tail[2], "  09:00:03 wake-1-3 #2 events #1–#3: accepted");
    }

    fn app() -> App {
        App::new(
            Scope::Session("t".into()),
            Regex::new(wakeful_protocol::view::DEFAULT_ERROR_REGEX).unwrap(),
        )
    }

    /// A busy session: two running monitors (one with suppressed lines),
    /// one that exited 2, one stopped with a survivor, one failed.
    fn busy() -> App {
        let mut a = app();
        let mut build = info("mon-build01", 0);
        build.description = "cargo build".into();
        build.source = wakeful_core::Source::Command {
            command: "cargo build --release 2>&1".into(),
        };
        build.lines = 1200;
        build.suppressed_lines = 900;
        let mut logs = info("mon-logs0002", 60);
        logs.description = "api errors".into();
        logs.source = wakeful_core::Source::File {
            path: "/var/log/api.log".into(),
        };
        logs.lines = 3;
        let mut test = info("mon-tests003", 120);
        test.description = "unit tests".into();
        test.state = MonitorState::Ended;
        test.stop_reason = Some(MonitorStopReason::ExitCode { code: 2 });
        test.ended_at = Some(at(900));
        test.lines = 40;
        let mut dev = info("mon-dev00004", 130);
        dev.description = "dev server".into();
        dev.state = MonitorState::Ended;
        dev.stop_reason = Some(MonitorStopReason::UserStopped);
        dev.survivors = vec![4242];
        dev.ended_at = Some(at(1000));
        let mut ws = info("mon-feed0005", 140);
        ws.description = "price feed".into();
        ws.source = wakeful_core::Source::Ws {
            url: "wss://example.com/feed".into(),
            protocols: vec![],
        };
        ws.state = MonitorState::Ended;
        ws.stop_reason = Some(MonitorStopReason::Failed {
            error: "connection refused".into(),
        });
        ws.ended_at = Some(at(200));
        a.apply_list(vec![build, logs, test, dev, ws]);
        let mut seq = 0;
        let mut next = || {
            seq += 1;
            seq
        };
        // Activity over the hour: the build busy then suppressed, logs quiet.
        for minute in 0..50 {
            let n = (minute % 7 + 1) as usize;
            a.apply_events(&[event(next(), "mon-build01", minute * 60 + 5, lines(n))]);
        }
        a.apply_events(&[event(
            next(),
            "mon-build01",
            50 * 60,
            EventBody::MonitorSuppressed {
                count: 900,
                from_line: 300,
                to_line: 1199,
            },
        )]);
        a.apply_events(&[event(next(), "mon-logs0002", 55 * 60, lines(3))]);
        let mut e = event(next(), "mon-tests003", 56 * 60, lines(0));
        e.body = EventBody::MonitorEvent {
            lines: vec![
                "running 12 tests".into(),
                "test parse ... ok".into(),
                "test store ... FAILED".into(),
                "error: test failed, to rerun pass `--lib`".into(),
            ],
            from_line: 1,
            to_line: 4,
        };
        a.apply_events(&[e]);
        a
    }

    fn render(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let now = Instant::now();
        t.draw(|f| draw(f, app, &at(59 * 60), now)).unwrap();
        t
    }

    /// The screen with highlighted cells (search matches) in «».
    fn marked(t: &Terminal<TestBackend>) -> String {
        let buf = t.backend().buffer();
        let mut out = String::new();
        for y in 0..buf.area.height {
            let mut on = false;
            for x in 0..buf.area.width {
                let cell = &buf[(x, y)];
                let hit = cell.bg == Color::Yellow;
                if hit != on {
                    out.push(if hit { '«' } else { '»' });
                    on = hit;
                }
                out.push_str(cell.symbol());
            }
            if on {
                out.push('»');
            }
            out.push('\n');
        }
        out
    }

    fn no_controls(t: &Terminal<TestBackend>) {
        let buf = t.backend().buffer();
        for cell in buf.content() {
            assert!(
                !cell.symbol().chars().any(|c| c.is_control()),
                "a control character reached a cell: {:?}",
                cell.symbol()
            );
        }
    }

    #[test]
    fn table_of_a_busy_session() {
        let mut a = busy();
        a.link = Link::Live;
        let t = render(&mut a, 140, 24);
        insta::assert_snapshot!("table_wide", t.backend());
        // Suppressed minutes are red in the sparkline.
        let buf = t.backend().buffer();
        let red_spark = buf
            .content()
            .iter()
            .any(|c| SPARK.iter().any(|s| c.symbol() == s.to_string()) && c.fg == Color::Red);
        assert!(red_spark);
    }

    #[test]
    fn events_pane_paused_with_new_lines() {
        let mut a = busy();
        a.link = Link::Live;
        let now = Instant::now();
        let wall = at(59 * 60);
        render(&mut a, 100, 20);
        a.key(Key::Tab, now, &wall);
        a.key(Key::PageUp, now, &wall);
        a.apply_events(&[event(999, "mon-build01", 58 * 60, lines(5))]);
        let t = render(&mut a, 100, 20);
        insta::assert_snapshot!("events_paused", t.backend());
        a.key(Key::End, now, &wall);
        let t = render(&mut a, 100, 20);
        assert!(t.backend().to_string().contains("following"));
    }

    #[test]
    fn search_highlight_and_error_jump() {
        let mut a = busy();
        let now = Instant::now();
        let wall = at(59 * 60);
        render(&mut a, 100, 20);
        a.key(Key::Char('/'), now, &wall);
        for c in "test".chars() {
            a.key(Key::Char(c), now, &wall);
        }
        a.key(Key::Enter, now, &wall);
        let t = render(&mut a, 100, 20);
        insta::assert_snapshot!("search_highlight", marked(&t));
        a.key(Key::Char('e'), now, &wall);
        let t = render(&mut a, 100, 20);
        let cursor = a.pane.cursor().unwrap();
        let row = a
            .pane
            .window(100)
            .rows
            .into_iter()
            .find(|r| r.id == cursor)
            .unwrap();
        assert!(row.text.contains("FAILED"), "{}", t.backend());
    }

    #[test]
    fn help_overlay() {
        let mut a = busy();
        a.key(Key::Char('?'), Instant::now(), &at(0));
        let t = render(&mut a, 90, 24);
        insta::assert_snapshot!("help_overlay", t.backend());
    }

    #[test]
    fn empty_state() {
        let mut a = app();
        let t = render(&mut a, 80, 12);
        insta::assert_snapshot!("empty", t.backend());
    }

    #[test]
    fn forty_columns() {
        let mut a = busy();
        a.link = Link::Lost("connection refused".into());
        let t = render(&mut a, 40, 20);
        insta::assert_snapshot!("narrow_40", t.backend());
        // Tinier still: nothing panics.
        for (w, h) in [(1, 1), (9, 4), (12, 6), (20, 8)] {
            render(&mut a, w, h);
        }
    }

    #[test]
    fn hostile_bytes_never_reach_the_terminal() {
        let mut a = app();
        let mut m = info("mon-evil0001", 0);
        m.description = "\x1b]0;pwned\x07desc\x1b[2J\u{9b}31m\r\x08".into();
        m.source = wakeful_core::Source::Command {
            command: "printf '\\033[31m'\x1b[5n\x00".into(),
        };
        a.apply_list(vec![m]);
        let mut e = event(1, "mon-evil0001", 10, lines(0));
        e.body = EventBody::MonitorEvent {
            lines: vec![
                "\x1b[31mred\x1b[0m \x1bPdcs\x1b\\ok".into(),
                "tab\there\rCR \u{85}nel \u{2028}ls".into(),
                "bell\x07 \x1b_apc\x07 end".into(),
            ],
            from_line: 1,
            to_line: 3,
        };
        let mut other = info("mon-evil0002", 1);
        other.description = "second\u{1b}[8m hidden".into();
        a.apply_list(vec![
            a.monitors.get("mon-evil0001").unwrap().info.clone(),
            other,
        ]);
        let mut stopped = event(
            2,
            "mon-evil0002",
            11,
            EventBody::MonitorStopped {
                reason: MonitorStopReason::ExitCode { code: 1 },
                last_lines: vec![],
                survivors: vec![],
                unverified: None,
            },
        );
        stopped.text = "ended \x1b[1mbold\x1b[0m\u{9b}2J".into();
        a.apply_events(&[e, stopped]);
        a.key(Key::Down, Instant::now(), &at(12));
        a.key(Key::Char('s'), Instant::now(), &at(12));
        let t = render(&mut a, 120, 16);
        no_controls(&t);
        insta::assert_snapshot!("hostile", t.backend());
    }

    /// Issue #31, point 1: what shows nothing but reorders or hides text
    /// (bidi controls, zero-width characters, tag characters, a run of
    /// variation selectors) never reaches a cell.
    #[test]
    fn invisible_characters_never_reach_the_terminal() {
        let mut a = app();
        let mut m = info("mon-evil0001", 0);
        m.description = "desc\u{202E}rev\u{2066}".into();
        a.apply_list(vec![m]);
        let mut e = event(1, "mon-evil0001", 10, lines(0));
        e.body = EventBody::MonitorEvent {
            lines: vec![
                "bidi \u{202E}evil\u{202C} zw a\u{200B}b\u{FEFF}c".into(),
                "tag \u{E0001}\u{E0069}\u{E007F}x vs y\u{FE0F}\u{FE0F}\u{FE0E}z".into(),
            ],
            from_line: 1,
            to_line: 2,
        };
        a.apply_events(&[e]);
        let t = render(&mut a, 120, 16);
        let mut shown = String::new();
        for cell in t.backend().buffer().content() {
            for c in cell.symbol().chars() {
                assert!(
                    !wakeful_core::present::is_invisible(c),
                    "U+{:04X} reached a cell",
                    c as u32
                );
            }
            shown.push_str(cell.symbol());
        }
        assert!(shown.contains("evil") && shown.contains("abc"), "{shown}");
        assert!(!shown.contains("\u{FE0F}\u{FE0F}"), "{shown}");
    }

    #[test]
    fn sparkline_scales_and_marks_suppression() {
        let mut s = [Bucket::default(); ACTIVITY_MINUTES];
        s[59] = Bucket {
            lines: 10,
            suppressed: 0,
        };
        s[0] = Bucket {
            lines: 0,
            suppressed: 5,
        };
        let l = sparkline(&s, 60);
        let text: String = l.spans.iter().map(|s| s.content.to_string()).collect();
        assert_eq!(text.chars().count(), 60);
        assert_eq!(text.chars().last(), Some('█'));
        assert_eq!(l.spans[0].style.fg, Some(Color::Red));
        assert_eq!(sparkline(&s, 12).spans.len(), 12);
    }
}
