// The editor of wakeful's ACP end-to-end test: the ACP TypeScript SDK
// (@agentclientprotocol/sdk, pinned in .ci/run) as the client, talking to
// `wakeful acp-proxy -- AGENT…` over stdio, the way Zed and JetBrains do.
//
// Usage: node client.mjs --sdk DIR --fake-log FILE --fifo PATH --out DIR
//          [--grace MS] -- wakeful acp-proxy [...] -- AGENT...
//
// `--sdk` is the npm prefix that holds node_modules/@agentclientprotocol/sdk.
// The fake model answers a prompt with START-MONITOR by running (in the
// agent's shell tool) `wakeful start -- cat 0<>FIFO`; this client writes
// lines to the FIFO and checks what reached the fake model (its request
// log) and what the editor was shown. Prints one JSON object (the results)
// on its last line; exits 0 when every check passed.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const opts = {};
for (let i = 0; i < sep; i += 2) opts[argv[i].replace(/^--/, "")] = argv[i + 1];
const command = argv.slice(sep + 1);

const sdk = await import(
  pathToFileURL(path.join(opts.sdk, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js"))
);

const results = { checks: [], updates: 0 };
let failed = false;
function check(ok, what) {
  results.checks.push({ ok: !!ok, what });
  if (!ok) {
    failed = true;
    console.error(`FAIL ${what}`);
  } else {
    console.error(`ok   ${what}`);
  }
}
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The fake's request log, parsed. */
function requests() {
  try {
    return fs
      .readFileSync(opts["fake-log"], "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}
/** What a request brought the model: the fake Responses API logs `kind` and
 * `user` (the newest user message), the fake Anthropic API `main_loop` and
 * `new` (every message after the assistant's last). */
const isTurn = (r) => r.kind === "turn" || r.main_loop === true;
const userOf = (r) => {
  const u = r.user ?? r.new ?? "";
  return typeof u === "string" ? u : JSON.stringify(u);
};
/** Turn requests whose new user text holds `needle`. */
const turnsWith = (needle) => requests().filter((r) => isTurn(r) && userOf(r).includes(needle));

/** Waits until `cond()` is truthy (polled every 5 ms), or `ms` passed. */
async function until(cond, ms) {
  const end = now() + ms;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (now() > end) return null;
    await sleep(5);
  }
}

const proxy = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
results.proxy_pid = proxy.pid;
const proxyExit = new Promise((r) => proxy.on("exit", (code, signal) => r({ code, signal })));
const stream = sdk.ndJsonStream(Writable.toWeb(proxy.stdin), Readable.toWeb(proxy.stdout));

const updates = []; // every session/update the editor got, with when
const app = sdk
  .client()
  .onNotification("session/update", (cx) => {
    const p = cx.params ?? cx;
    updates.push({ at: now(), params: p });
  })
  .onRequest("session/request_permission", (cx) => {
    const p = cx.params ?? cx;
    const allow = (p.options || []).find((o) => o.kind?.startsWith("allow")) || p.options?.[0];
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

const conn = app.connect(stream);
const agent = conn.agent;

const init = await agent.request("initialize", {
  protocolVersion: 1,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
});
results.agent = init.agentInfo ?? null;
const session = await agent.request("session/new", { cwd: opts.cwd || process.cwd(), mcpServers: [] });
const sid = session.sessionId;
check(typeof sid === "string" && sid.length > 0, `session/new gave a session id (${sid})`);

// 1. The user starts a monitor through the agent's shell tool.
const first = await agent.request("session/prompt", {
  sessionId: sid,
  prompt: [{ type: "text", text: "START-MONITOR please" }],
});
check(first.stopReason === "end_turn", `the user's turn ended (${first.stopReason})`);
const started = await until(() => turnsWith("START-MONITOR").length, 5000);
check(started, "the fake model saw the user's prompt");
// The monitor holds the FIFO open for reading once it runs.
const reading = await until(() => {
  try {
    fs.closeSync(fs.openSync(opts.fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
    return true;
  } catch {
    return false;
  }
}, 10000);
check(reading, "the monitor the agent's shell started reads its FIFO");


/** Writes one line to the monitor's FIFO; returns when it was written. */
function writeLine(line) {
  const fd = fs.openSync(opts.fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
  fs.writeSync(fd, line + "\n");
  fs.closeSync(fd);
  return now();
}

// 2. Idle session: a monitor prints a line; the agent gets a turn.
const line1 = `IDLE-LINE-${Math.random().toString(36).slice(2, 10)}`;
const before = updates.length;
const t0 = writeLine(line1);
const woke = await until(() => turnsWith(line1)[0], 10000);
const tModel = now();
check(woke, `the agent got a new turn with ${line1}`);
const shown = await until(
  () =>
    updates.slice(before).find(
      (u) =>
        u.params.update?.sessionUpdate === "user_message_chunk" &&
        (u.params.update?.content?.text || "").includes(line1),
    ),
  5000,
);
check(shown, "the editor was shown the woken turn's text (user_message_chunk)");
check(
  shown && shown.params.update._meta?.wakeful?.wake === true,
  "the shown text is marked as coming from wakeful (_meta.wakeful.wake)",
);
// The agent's own updates of that turn (its answer "ok") reach the editor.
const answered = await until(
  () =>
    updates.slice(before).find(
      (u) => u.params.sessionId === sid && u.params.update?.sessionUpdate === "agent_message_chunk",
    ),
  10000,
);
check(answered, "the editor saw the woken turn's agent_message_chunk updates");
// The fake's log time of the request, against this clock: the fake writes
// `ts` (epoch seconds) when it got the request.
const latency = woke?.ts ? woke.ts * 1000 - t0 : tModel - t0;
results.wake_latency_ms = Math.round(latency * 10) / 10;
check(latency < 2000, `the turn came within 2 s (${results.wake_latency_ms} ms)`);
check(turnsWith(line1).length === 1, "that line reached the model in exactly one turn");

// Let the wake turn end (its response is swallowed by the proxy).
await sleep(300);

// 3. A line and a user prompt at the same moment: each once, never mixed.
const line2 = `RACE-LINE-${Math.random().toString(36).slice(2, 10)}`;
const userText = `USER-RACE-${Math.random().toString(36).slice(2, 10)}`;
writeLine(line2);
const userTurn = await agent.request("session/prompt", {
  sessionId: sid,
  prompt: [{ type: "text", text: userText }],
});
check(userTurn.stopReason === "end_turn", `the racing user prompt ended (${userTurn.stopReason})`);
const both = await until(() => turnsWith(line2).length && turnsWith(userText).length, 10000);
check(both, "both the racing line and the user prompt reached the model");
await sleep(1500); // anything delivered twice would come by now
const l2 = turnsWith(line2);
const u2 = turnsWith(userText);
check(l2.length === 1, `the racing line reached the model once (${l2.length})`);
check(u2.length === 1, `the racing user prompt reached the model once (${u2.length})`);
check(
  l2.length === 1 && u2.length === 1 && !userOf(l2[0]).includes(userText) && !userOf(u2[0]).includes(line2),
  "the wake and the user prompt went as separate turns",
);
check(turnsWith(line1).length === 1, "the first line was not delivered again");
results.updates = updates.length;

// 4. The editor closes stdin: the proxy and the agent end.
const tClose = now();
proxy.stdin.end();
const exit = await Promise.race([proxyExit, sleep(15000).then(() => null)]);
results.proxy_exit = exit;
results.exit_ms = Math.round(now() - tClose);
check(exit && exit.code === 0, `the proxy exited 0 after stdin closed (${JSON.stringify(exit)}, ${results.exit_ms} ms)`);

results.session = sid;
results.ok = !failed;
console.log(JSON.stringify(results));
process.exit(failed ? 1 : 0);
