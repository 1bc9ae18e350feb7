// A real TypeScript MCP client against fusion-nb's test app; prints what it observed as JSON.
//
//   node client.mjs v1|v2 http URL TOKEN
//   node client.mjs v1|v2 stdio COMMAND [ARGS...]      (server env: FUSION_NB_SERVER_ENV, JSON)
//
// v1 is @modelcontextprotocol/sdk (negotiates 2025-11-25); v2 is @modelcontextprotocol/client
// in versionNegotiation mode 'auto' (2026-07-28 against fusion-nb). The Python test
// (test_interop.py) asserts on the observations; this script only drives and records.

import { deadline, load } from './sdk.mjs';

const [sdk, transportKind, ...target] = process.argv.slice(2);
deadline('interop client');

const v1 = sdk === 'v1';
const lib = await load(sdk);

function makeTransport(token) {
  if (transportKind === 'http') {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    return new lib.StreamableHTTPClientTransport(new URL(target[0]), { requestInit: { headers } });
  }
  const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
  return new lib.StdioClientTransport({ command: target[0], args: target.slice(1), env, stderr: 'ignore' });
}

// Every message the client receives, in arrival order (wrapped after connect).
function record(transport, log) {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    log.push(message);
    deliver.call(transport, message, extra);
  };
}

async function connect({ elicit, token } = {}) {
  const options = { capabilities: elicit ? { elicitation: {} } : {} };
  if (!v1) options.versionNegotiation = { mode: 'auto' };
  const client = new lib.Client({ name: `fusion-nb-interop-${sdk}`, version: '1.0.0' }, options);
  if (elicit) {
    const handler = async (request) => elicit(request.params);
    if (v1) client.setRequestHandler(lib.ElicitRequestSchema, handler);
    else client.setRequestHandler('elicitation/create', handler);
  }
  const transport = makeTransport(token === undefined ? target[1] : token);
  await client.connect(transport);
  const wire = [];
  record(transport, wire);
  return { client, transport, wire };
}

// v1 takes (params, resultSchema, options); v2 takes (params, options).
function callTool(client, params, options) {
  return v1 ? client.callTool(params, undefined, options) : client.callTool(params, options);
}

function text(result) {
  return result.content?.[0]?.text;
}

// Progress notifications that arrived after the response to the request they belong to.
function lateProgress(wire) {
  const answered = new Set();
  let late = 0;
  for (const message of wire) {
    if (message.method === 'notifications/progress') {
      if (answered.has(message.params.progressToken)) late += 1;
    } else if (message.id !== undefined && (message.result || message.error)) {
      answered.add(message.id);
    }
  }
  return late;
}

const seen = {};
const { client, transport, wire } = await connect();
seen.protocol = v1 ? transport.protocolVersion ?? '2025-11-25' : client.getNegotiatedProtocolVersion();
seen.server = client.getServerVersion();
const listed = (await client.listTools()).tools;
seen.echo = listed.find((tool) => tool.name === 'echo');
seen.tools = listed.map((tool) => tool.name);
const echoed = await client.callTool({ name: 'echo', arguments: { text: 'from typescript' } });
seen.call = { structured: echoed.structuredContent, isError: echoed.isError ?? false };
const invalid = await client.callTool({ name: 'echo', arguments: {} });
seen.invalid = { isError: invalid.isError ?? false, text: text(invalid) };

const values = [];
await callTool(client, { name: 'noisy', arguments: {} }, { onprogress: (p) => values.push(p.progress) });
seen.progress = values;
const before = wire.filter((m) => m.method === 'notifications/progress').length;
await client.callTool({ name: 'noisy', arguments: {} });
seen.progressWithoutToken = wire.filter((m) => m.method === 'notifications/progress').length - before;

const finals = [];
for (let round = 0; round < 20; round += 1) {
  const flood = [];
  await callTool(client, { name: 'burst', arguments: {} }, { onprogress: (p) => flood.push(p.progress) });
  finals.push(flood.at(-1));
}
seen.floodFinals = finals;
seen.lateProgress = lateProgress(wire);

const abort = new AbortController();
let abortedAt = 0;
try {
  await callTool(client, { name: 'stall', arguments: {} }, {
    signal: abort.signal,
    onprogress: () => {
      abortedAt = performance.now();
      abort.abort();
    },
  });
  seen.cancel = { error: null };
} catch (error) {
  const cleaned = await client.callTool({ name: 'cleaned', arguments: {} });
  seen.cancel = { error: String(error).slice(0, 200), cleaned: text(cleaned), cleanupMs: performance.now() - abortedAt };
}
await client.close();

seen.elicitation = {};
for (const action of ['accept', 'decline', 'cancel']) {
  const asked = [];
  const answer = async (params) => {
    asked.push(params.message);
    return action === 'accept' ? { action, content: { confirm: true } } : { action };
  };
  const session = await connect({ elicit: answer });
  const result = await session.client.callTool({ name: 'billing.refund', arguments: { id: 'inv-7' } });
  seen.elicitation[action] = { text: text(result), asked };
  await session.client.close();
}
const plain = await connect();
try {
  seen.noElicitation = text(await plain.client.callTool({ name: 'billing.refund', arguments: { id: 'inv-7' } }));
} catch (error) {
  const { code, data } = error;
  seen.noElicitation = { thrown: error.constructor.name, code, required: data?.requiredCapabilities, message: error.message };
}
await plain.client.close();

if (transportKind === 'http') {
  for (const [name, token] of [['missing', ''], ['wrong', 'not-the-token']]) {
    try {
      const session = await connect({ token });
      await session.client.close();
      seen[`${name}Token`] = 'connected';
    } catch (error) {
      const status = error?.code ?? error?.status ?? error?.data?.status;
      seen[`${name}Token`] = { status, message: String(error?.message ?? error).slice(0, 200) };
    }
  }
}

console.log(JSON.stringify(seen));
process.exit(0);
