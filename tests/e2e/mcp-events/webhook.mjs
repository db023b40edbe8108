// The Vercel AI SDK (`@ai-sdk/mcp` 2.0.99) as an MCP Events client of
// `wakeful mcp` over stdio, with webhook delivery to its own
// `experimental_createMCPEventWebhook` receiver on loopback (allowed by
// `[network] allow` in the home's config.toml).
//
//   node tests/e2e/mcp-events/webhook.mjs --npm PREFIX --wakeful BIN --home DIR
//
// PREFIX holds node_modules/@ai-sdk/mcp and zod (.ci/run installs them). The
// script lists the event types, subscribes to `monitor.lines` with a webhook,
// starts a file monitor, appends a line, kills the daemon with SIGKILL,
// appends a second line once the monitor is rearmed, and checks that the
// receiver (the SDK's signature check and envelope checks) got every
// `eventId` of the log (duplicates allowed, deduplicated), then unsubscribes
// and checks that a third line is not delivered. Prints one JSON line with
// what it saw and `PASS webhook`; exits non-zero on a failure.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || !process.argv[i + 1]) throw new Error(`--${name} is required`);
  return process.argv[i + 1];
}
const npm = arg('npm');
const wakeful = arg('wakeful');
const home = arg('home');
const SESSION = 'aisdk';
const DEADLINE_MS = 30000;

const sdkDir = path.join(npm, 'node_modules/@ai-sdk/mcp');
const sdk = await import(pathToFileURL(path.join(sdkDir, 'dist/index.js')).href);
const stdio = await import(pathToFileURL(path.join(sdkDir, 'dist/mcp-stdio/index.js')).href);
const version = JSON.parse(fs.readFileSync(path.join(sdkDir, 'package.json'), 'utf8')).version;

fs.writeFileSync(path.join(home, 'config.toml'), '[network]\nallow = ["127.0.0.0/8"]\n');
const env = { ...process.env, WAKEFUL_HOME: home, WAKEFUL_SESSION: SESSION };
delete env.CLAUDE_CODE_SESSION_ID;
delete env.CODEX_THREAD_ID;
const cli = (...args) => execFileSync(wakeful, args, { env, encoding: 'utf8' });

async function until(what, cond) {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise(r => setTimeout(r, 50));
  }
}

// The application's private subscription store (the SDK's MCPEventStore).
const records = new Map();
const store = {
  async get(key) { return records.get(key); },
  async getById(id) { return [...records.values()].find(r => r.id === id); },
  async set(s) { records.set(s.key, structuredClone(s)); },
  async update(key, patch) {
    const r = records.get(key);
    if (r) records.set(key, { ...r, ...structuredClone(patch) });
  },
  async delete(key) { records.delete(key); },
};

const received = [];
const errors = [];
const handler = sdk.experimental_createMCPEventWebhook({
  store,
  onEvent: async ({ subscription, event }) => { received.push({ subscription: subscription.id, event }); },
  onError: e => errors.push(String(e)),
});
const statuses = [];
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const request = new Request(`http://127.0.0.1${req.url}`, {
    method: req.method,
    headers: Object.entries(req.headers).map(([k, v]) => [k, String(v)]),
    body: req.method === 'POST' ? Buffer.concat(chunks) : undefined,
  });
  const response = await handler(request);
  statuses.push(response.status);
  const body = Buffer.from(await response.arrayBuffer());
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(body);
});
await new Promise(r => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/hook`;

const client = await sdk.experimental_createMCPClient({
  transport: new stdio.Experimental_StdioMCPTransport({ command: wakeful, args: ['mcp'], env }),
  experimental_events: { store },
});

let failed = null;
const seen = {};
try {
  const list = await client.experimental_events.list();
  seen.types = list.events.map(e => `${e.name}:${e.delivery.join('+')}`);
  const lines = list.events.find(e => e.name === 'monitor.lines');
  if (!lines || !lines.delivery.includes('webhook')) throw new Error(`no webhook delivery: ${JSON.stringify(list)}`);

  const log = path.join(home, 'app.log');
  fs.writeFileSync(log, '');
  const monitor = JSON.parse(cli('--json', 'start', '-d', 'aisdk', '--file', log, '--batch-ms', '0', '--persistent')).id;
  const sub = await client.experimental_events.subscribe({
    name: 'monitor.lines',
    arguments: { monitor },
    delivery: { mode: 'webhook', url, allowInsecureLocalhost: true },
    ttlMs: 600000,
  });
  seen.subscription = { id: sub.id, refreshBefore: sub.refreshBefore, truncated: sub.truncated };
  const texts = () => received.map(r => String(r.event.data.text ?? '')).join('\n');

  fs.appendFileSync(log, 'aisdk line one\n');
  await until('line one', () => texts().includes('aisdk line one'));

  const pid = JSON.parse(cli('--json', 'status')).pid;
  process.kill(pid, 'SIGKILL');
  await until('the daemon gone', () => {
    try { process.kill(pid, 0); return false; } catch { return true; }
  });
  // Any command starts the daemon again; it rearms the monitor and resumes
  // the subscription from the file it keeps.
  await until('the monitor rearmed', () => {
    try {
      const info = JSON.parse(cli('--json', 'list')).find(m => m.id === monitor);
      return info?.state === 'running';
    } catch { return false; }
  });
  fs.appendFileSync(log, 'aisdk line two\n');
  await until('line two', () => texts().includes('aisdk line two'));

  const logged = cli('--json', 'events')
    .split('\n').filter(Boolean).map(l => JSON.parse(l))
    .filter(e => e.kind === 'lines' && e.monitor_id === monitor);
  const got = new Set(received.map(r => r.event.eventId));
  const seqs = [...got].map(id => Number(id.split('-').pop()));
  const missing = logged.filter(e => !seqs.includes(e.seq)).map(e => e.seq);
  seen.delivered = received.length;
  seen.unique_event_ids = got.size;
  seen.logged_lines_events = logged.length;
  if (missing.length) throw new Error(`eventIds missing for seqs ${missing}`);

  await client.experimental_events.unsubscribe({ id: sub.id });
  const before = received.length;
  fs.appendFileSync(log, 'aisdk line three\n');
  await until('line three in the log', () => cli('--json', 'events').includes('aisdk line three'));
  await new Promise(r => setTimeout(r, 1000));
  if (received.length !== before) throw new Error(`delivered after unsubscribe: ${texts()}`);
  seen.after_unsubscribe = received.length - before;
  seen.http_statuses = statuses;
  seen.errors = errors;
} catch (e) {
  failed = e;
} finally {
  await client.close().catch(() => {});
  server.close();
  try { cli('daemon', 'stop'); } catch {}
}
console.log(JSON.stringify({ sdk: `@ai-sdk/mcp ${version}`, ...seen }));
if (failed) {
  console.log(`FAIL webhook: ${failed.stack ?? failed}`);
  process.exit(1);
}
console.log('PASS webhook');
