// wakeful web: the live view in a browser. Text from monitors arrives
// sanitized by the server and is inserted with textContent or text nodes
// only: never as HTML.
"use strict";

const MAX_EVENTS = 5000;
const state = {
  session: null,        // null: all sessions
  monitor: null,        // null: all monitors of the session
  monitors: [],
  events: [],           // {seq, session, monitor_id, kind, ts, lines, errors}
  paused: false,
  newRows: 0,
  search: null,         // RegExp or null
  cursor: null,         // [seq, line index] of the last jump
  pending: [],
  scheduled: false,
};

function $(id) { return document.getElementById(id); }

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

function timeOf(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return d.toLocaleTimeString([], { hour12: false });
}

function age(ts, now) {
  const s = Math.max(0, Math.floor((now - new Date(ts)) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}

// The last hour as an inline SVG: one bar a minute, suppressed minutes red.
function sparkline(activity) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", "120");
  svg.setAttribute("height", "16");
  svg.setAttribute("viewBox", "0 0 120 16");
  const max = Math.max(1, ...activity.map(([l, s]) => l + s));
  activity.forEach(([l, s], i) => {
    const v = l + s;
    if (v === 0) return;
    const h = Math.max(1, Math.round((v / max) * 16));
    const r = document.createElementNS(NS, "rect");
    r.setAttribute("x", String(i * 2));
    r.setAttribute("y", String(16 - h));
    r.setAttribute("width", "2");
    r.setAttribute("height", String(h));
    if (s > 0) r.setAttribute("class", "supp");
    const t = document.createElementNS(NS, "title");
    t.textContent = `${60 - i} min ago: ${l} lines` + (s ? `, ${s} suppressed` : "");
    r.append(t);
    svg.append(r);
  });
  return svg;
}

async function api(path, options) {
  const r = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

// --- monitors -------------------------------------------------------------

function renderState(s) {
  const link = $("link");
  link.textContent = s.link === "live" ? "● live" : "○ reconnecting: " + s.link;
  link.className = "link " + (s.link === "live" ? "live" : "lost");
  const storage = $("storage");
  storage.hidden = !(s.storage && s.storage.text);
  if (s.storage) {
    storage.textContent = s.storage.text;
    storage.className = "storage " + s.storage.level;
  }
  state.monitors = s.monitors;
  const now = new Date(s.now);
  // Sessions.
  const nav = $("sessions");
  const sessions = s.sessions;
  const buttons = [el("button", { type: "button", class: state.session === null ? "active" : "",
    onclick: () => selectSession(null) }, "all sessions")];
  for (const name of sessions) {
    buttons.push(el("button", { type: "button", class: state.session === name ? "active" : "",
      onclick: () => selectSession(name) }, name));
  }
  nav.replaceChildren(...buttons);
  // Monitors.
  const shown = s.monitors.filter(m => state.session === null || m.session === state.session);
  const running = shown.filter(m => m.state === "running").length;
  $("summary").textContent = `${state.session === null ? "all sessions" : "session " + state.session} · ${running} running, ${shown.length - running} ended`;
  $("empty").hidden = shown.length > 0;
  const rows = shown.map(m => {
    const stateClass = m.state === "running" ? "running" : (m.abnormal ? "abnormal" : "ended");
    const actions = el("td", {},
      el("button", { type: "button", class: "output", "data-id": m.id,
        onclick: ev => { ev.stopPropagation(); openOutput(m.id, null); } }, "output"),
      m.state === "running"
        ? el("button", { type: "button", class: "stop", "data-id": m.id,
            onclick: ev => { ev.stopPropagation(); stopMonitor(m); } }, "stop")
        : null);
    const desc = m.what && !m.description.includes(m.what) ? `${m.description} — ${m.what}` : m.description;
    return el("tr", { "data-id": m.id, "data-state": m.state, class: state.monitor === m.id ? "selected" : "",
        onclick: () => selectMonitor(state.monitor === m.id ? null : m.id) },
      el("td", {}, m.id),
      el("td", { class: "desc" }, desc),
      el("td", {}, m.source),
      el("td", { class: "state " + stateClass }, m.state),
      el("td", {}, age(m.started_at, now)),
      el("td", { class: "num" }, String(m.lines)),
      el("td", { class: "num" + (m.suppressed_lines ? " supp" : "") }, String(m.suppressed_lines)),
      el("td", {}, timeOf(m.last_event)),
      el("td", { class: m.abnormal ? "abnormal" : "" }, m.ending),
      el("td", {}, sparkline(m.activity)),
      actions);
  });
  $("monitors").tBodies[0].replaceChildren(...rows);
}

async function refreshState() {
  try {
    renderState(await api("/api/state"));
  } catch (e) {
    const link = $("link");
    link.textContent = "○ " + e.message;
    link.className = "link lost";
  }
}

function selectSession(name) {
  state.session = name;
  state.monitor = null;
  rerenderEvents();
  refreshState();
}

function selectMonitor(id) {
  state.monitor = id;
  rerenderEvents();
  refreshState();
}

async function stopMonitor(m) {
  if (!window.confirm(`Stop ${m.id} (${m.description})?`)) return;
  try {
    const r = await api("/api/stop?id=" + encodeURIComponent(m.id), { method: "POST" });
    flash(`stopped ${r.id}: ${r.ending}`);
  } catch (e) {
    flash(`could not stop ${m.id}: ${e.message}`);
  }
  refreshState();
}

function flash(text) {
  const s = $("summary");
  s.textContent = text;
}

// --- events ---------------------------------------------------------------

function visible(e) {
  return (state.session === null || e.session === state.session) &&
    (state.monitor === null || e.monitor_id === state.monitor);
}

function textWithMarks(text) {
  const span = el("span", { class: "text" });
  if (!state.search) { span.textContent = text; return span; }
  let at = 0;
  state.search.lastIndex = 0;
  for (const m of text.matchAll(state.search)) {
    if (m[0].length === 0) continue;
    if (m.index > at) span.append(document.createTextNode(text.slice(at, m.index)));
    span.append(el("mark", {}, m[0]));
    at = m.index + m[0].length;
  }
  if (at < text.length) span.append(document.createTextNode(text.slice(at)));
  return span;
}

function rowsOf(e) {
  const other = e.kind !== "lines";
  return e.lines.map((line, i) => {
    const cls = "row" + (other ? " other" : "") + (e.errors.includes(i) ? " err" : "");
    const parts = [el("span", { class: "ts" }, timeOf(e.ts))];
    if (state.monitor === null) parts.push(el("span", { class: "mon" }, e.monitor_id));
    if (other && i === 0) parts.push(el("span", { class: "kind" }, `[${e.kind}] `));
    parts.push(textWithMarks(line));
    return el("div", { class: cls, "data-seq": String(e.seq), "data-line": String(i) }, ...parts);
  });
}

function atBottom(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 4;
}

function trim(box) {
  while (box.childElementCount > MAX_EVENTS) box.firstElementChild.remove();
}

function flush() {
  state.scheduled = false;
  const box = $("events");
  const follow = !state.paused;
  const frag = document.createDocumentFragment();
  let added = 0;
  for (const e of state.pending) {
    if (!visible(e)) continue;
    for (const r of rowsOf(e)) { frag.append(r); added++; }
  }
  state.pending = [];
  if (added === 0) return;
  box.append(frag);
  trim(box);
  if (follow) {
    box.scrollTop = box.scrollHeight;
  } else {
    state.newRows += added;
    showFollow();
  }
}

function showFollow() {
  const b = $("follow");
  b.hidden = !state.paused;
  b.textContent = state.newRows > 0 ? `↓ ${state.newRows} new` : "↓ follow";
  $("events-title").textContent = eventsTitle() + (state.paused ? " · paused" : " · following");
}

function eventsTitle() {
  if (state.monitor !== null) return "events: " + state.monitor;
  return state.session === null ? "events: all sessions" : "events: session " + state.session;
}

function rerenderEvents() {
  const box = $("events");
  const frag = document.createDocumentFragment();
  for (const e of state.events) if (visible(e)) for (const r of rowsOf(e)) frag.append(r);
  box.replaceChildren(frag);
  trim(box);
  state.paused = false;
  state.newRows = 0;
  box.scrollTop = box.scrollHeight;
  showFollow();
}

function resume() {
  state.paused = false;
  state.newRows = 0;
  const box = $("events");
  box.scrollTop = box.scrollHeight;
  showFollow();
}

function onEvent(msg) {
  let e;
  try { e = JSON.parse(msg.data); } catch (_) { return; }
  state.events.push(e);
  if (state.events.length > MAX_EVENTS) state.events.splice(0, state.events.length - MAX_EVENTS);
  state.pending.push(e);
  if (!state.scheduled) {
    state.scheduled = true;
    requestAnimationFrame(flush);
    // Hidden tabs get no animation frames: flush anyway.
    setTimeout(() => { if (state.scheduled) flush(); }, 250);
  }
}

function jump(test, forward) {
  const rows = Array.from($("events").querySelectorAll(".row"));
  if (rows.length === 0) return false;
  let start = rows.findIndex(r => r.classList.contains("cursor"));
  rows.forEach(r => r.classList.remove("cursor"));
  const n = rows.length;
  if (start < 0) start = forward ? -1 : n;
  for (let k = 1; k <= n; k++) {
    const i = ((forward ? start + k : start - k) % n + n) % n;
    if (test(rows[i])) {
      rows[i].classList.add("cursor");
      state.paused = true;
      rows[i].scrollIntoView({ block: "center" });
      showFollow();
      return true;
    }
  }
  return false;
}

function nextMatch(forward) {
  if (!state.search) return;
  jump(r => r.querySelector("mark") !== null, forward);
}

function setSearch(text) {
  if (!text) { state.search = null; }
  else {
    try { state.search = new RegExp(text, "g"); }
    catch (_) { state.search = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "g"); }
  }
  rerenderEvents();
}

function connectEvents() {
  // EventSource reconnects by itself and sends Last-Event-ID: the server
  // resumes right after the last event received.
  const source = new EventSource("/api/events");
  source.onmessage = onEvent;
  source.onerror = () => { $("link").textContent = "○ reconnecting…"; $("link").className = "link lost"; };
  source.onopen = () => refreshState();
}

// --- panels: output file, wake route, consumers ----------------------------

const PAGE = 200;

function openPanel(title, controls, body) {
  $("panel-title").textContent = title;
  $("panel-controls").replaceChildren(...controls);
  $("panel-body").replaceChildren(...body);
  $("panel").hidden = false;
}

async function openOutput(id, from) {
  let r;
  try {
    r = await api(`/api/output?id=${encodeURIComponent(id)}&count=${PAGE}` + (from === null ? "" : `&from=${from}`));
  } catch (e) {
    openPanel("output of " + id, [], [el("div", {}, e.message)]);
    return;
  }
  const last = r.lines.length ? r.lines[r.lines.length - 1][0] : 0;
  const digits = String(Math.max(1, r.total)).length;
  const body = r.lines.map(([n, text]) =>
    el("div", {}, el("span", { class: "ln" }, String(n).padStart(digits)), text));
  const go = (label, target) => el("button", { type: "button", onclick: () => openOutput(id, target) }, label);
  const fromInput = el("input", { type: "number", min: "1", value: String(r.top), size: "8", "aria-label": "from line" });
  fromInput.addEventListener("change", () => openOutput(id, Math.max(1, parseInt(fromInput.value, 10) || 1)));
  openPanel(
    r.total === 0 ? `output of ${id} (empty)` : `output of ${id} · lines ${r.top}–${last} of ${r.total} · ${r.path}`,
    [go("first", 1), go("prev", Math.max(1, r.top - PAGE)), go("next", r.top + PAGE), go("last", null),
     el("label", {}, " from line ", fromInput)],
    body);
}

function jsonLines(v) {
  return JSON.stringify(v, null, 2).split("\n").map(l => el("div", {}, l));
}

async function openWake() {
  const session = state.session || (state.monitors[0] && state.monitors[0].session);
  if (!session) { openPanel("wake route", [], [el("div", {}, "no session yet")]); return; }
  try {
    const w = await api("/api/wake?session=" + encodeURIComponent(session));
    openPanel("wake route of session " + session, [], w === null
      ? [el("div", {}, "no wake route: events reach the agent only when it reads them")]
      : jsonLines(w));
  } catch (e) { openPanel("wake route", [], [el("div", {}, e.message)]); }
}

async function openConsumers() {
  const q = state.session === null ? "" : "?session=" + encodeURIComponent(state.session);
  try {
    const list = await api("/api/consumers" + q);
    const rows = list.map(c => el("div", {},
      `${c.session}  ${c.consumer}  acknowledged up to #${c.acked_seq}  unacknowledged: ${c.unacked}  waiters: ${c.waiters}`));
    openPanel("consumers", [], rows.length ? rows : [el("div", {}, "no consumers yet")]);
  } catch (e) { openPanel("consumers", [], [el("div", {}, e.message)]); }
}

// --- wiring ----------------------------------------------------------------

function init() {
  const box = $("events");
  box.addEventListener("scroll", () => {
    if (atBottom(box)) { if (state.paused) resume(); }
    else if (!state.paused) { state.paused = true; state.newRows = 0; showFollow(); }
  });
  $("follow").addEventListener("click", resume);
  $("next").addEventListener("click", () => nextMatch(true));
  $("prev").addEventListener("click", () => nextMatch(false));
  $("error").addEventListener("click", () => jump(r => r.classList.contains("err"), true));
  $("search").addEventListener("keydown", ev => {
    if (ev.key === "Enter") {
      const text = ev.target.value;
      const current = state.search ? state.search.source : "";
      if (text !== current) setSearch(text);
      nextMatch(!ev.shiftKey);
      ev.preventDefault();
    } else if (ev.key === "Escape") { ev.target.blur(); }
  });
  $("panel-close").addEventListener("click", () => { $("panel").hidden = true; });
  const header = document.querySelector("header");
  header.append(
    el("button", { type: "button", id: "wake", onclick: openWake }, "wake route"),
    el("button", { type: "button", id: "consumers", onclick: openConsumers }, "consumers"));
  document.addEventListener("keydown", ev => {
    if (ev.target.tagName === "INPUT") return;
    if (ev.key === "/") { $("search").focus(); ev.preventDefault(); }
    else if (ev.key === "n") nextMatch(true);
    else if (ev.key === "N") nextMatch(false);
    else if (ev.key === "e") jump(r => r.classList.contains("err"), true);
    else if (ev.key === "End") resume();
    else if (ev.key === "Escape") { $("panel").hidden = true; }
  });
  showFollow();
  refreshState();
  setInterval(refreshState, 1000);
  connectEvents();
}

document.addEventListener("DOMContentLoaded", init);
