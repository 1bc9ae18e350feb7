// Both TypeScript SDKs on a notebook's MCP endpoint through the Jupyter server (the URL
// `%fusion serve` prints, the Jupyter token as `Authorization: token ...`); prints what it saw.
//
//   node jupyter.mjs v1|v2 URL JUPYTER_TOKEN [stopped]
//
// A call with progress, a cancel (the kernel's `probe` tool says when it entered and cleaned up), an
// elicitation answered, a resource, a prompt, a task (v1: the SDK's 2025-11-25 task runtime, every
// request timing out after 1 s), and a missing and a wrong Jupyter token. With `stopped` (no
// kernel serves the notebook) it only connects and prints the error its user would see.

import { deadline, load } from './sdk.mjs';

const [sdk, url, token, stopped] = process.argv.slice(2);
deadline('jupyter client');
const v1 = sdk === 'v1';
const lib = await load(sdk);
const text = (result) => result.content?.[0]?.text;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function connect(credential, asked = []) {
  const options = { capabilities: { elicitation: {} } };
  if (!v1) options.versionNegotiation = { mode: 'auto' };
  const client = new lib.Client({ name: `fusion-nb-jupyter-${sdk}`, version: '1.0.0' }, options);
  const answer = async (request) => {
    asked.push(request.params.message);
    return { action: 'accept', content: { confirm: true } };
  };
  if (v1) client.setRequestHandler(lib.ElicitRequestSchema, answer);
  else client.setRequestHandler('elicitation/create', answer);
  const headers = credential === '' ? {} : { Authorization: `token ${credential}` };
  await client.connect(new lib.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}
// v1 takes (params, resultSchema, options); v2 takes (params, options).
const callTool = (client, params, options) =>
  v1 ? client.callTool(params, undefined, options) : client.callTool(params, options);

if (stopped === 'stopped') {
  // no kernel serves the notebook: what does this SDK tell its user?
  try {
    await (await connect(token)).close();
    console.log(JSON.stringify({ stopped: 'connected' }));
  } catch (error) {
    // (2.x puts its own words in the message and the server's answer in data.text)
    const said = [error?.message ?? error, error?.data?.text ?? ''].join(' | ');
    console.log(JSON.stringify({ stopped: said.slice(0, 500) }));
  }
  process.exit(0);
}

const asked = [];
const client = await connect(token, asked);
const seen = { protocol: v1 ? '2025-11-25' : client.getNegotiatedProtocolVersion() };
seen.server = client.getServerVersion().name;
seen.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();

const progress = [];
const shout = await callTool(client, { name: 'shout', arguments: { text: 'via jupyter' } }, {
  onprogress: (p) => progress.push(p.progress),
});
seen.shout = { text: text(shout), progress };

// stall runs until cancelled: abort it once the kernel's probe says it entered, then wait for its cleanup
async function probeUntil(wanted) {
  const started = Date.now();
  let state = text(await client.callTool({ name: 'probe', arguments: {} }));
  while (state !== wanted && Date.now() - started < 20_000) {
    await sleep(50);
    state = text(await client.callTool({ name: 'probe', arguments: {} }));
  }
  return state;
}
const abort = new AbortController();
const stalled = callTool(client, { name: 'stall', arguments: {} }, { signal: abort.signal });
seen.cancel = { entered: await probeUntil('entered') };
abort.abort();
try {
  seen.cancel.result = JSON.stringify(await stalled).slice(0, 300);
} catch (error) {
  seen.cancel.error = String(error).slice(0, 200);
}
seen.cancel.cleaned = await probeUntil('cleaned');

const refund = await client.callTool({ name: 'billing.refund', arguments: { id: 'inv-7' } });
seen.elicitation = { text: text(refund), asked };
seen.resource = (await client.readResource({ uri: 'nb://vars/scores' })).contents[0].text;
seen.prompt = (await client.getPrompt({ name: 'review', arguments: { function: 'f' } })).messages[0].content.text;

if (v1) {
  seen.task = { messages: [] };
  for await (const message of client.experimental.tasks.callToolStream(
    { name: 'report', arguments: { seconds: 2 } },
    undefined,
    { timeout: 1000 },
  )) {
    seen.task.messages.push(message.type);
    if (message.type === 'result') seen.task.text = text(message.result);
    if (message.type === 'error') seen.task.error = String(message.error);
  }
}
await client.close();

seen.refused = {};
for (const [name, credential] of [['missing', ''], ['wrong', 'not-the-jupyter-token']]) {
  try {
    await (await connect(credential)).close();
    seen.refused[name] = 'connected';
  } catch (error) {
    seen.refused[name] = { status: error?.code ?? error?.status ?? null, message: String(error?.message ?? error).slice(0, 200) };
  }
}
console.log(JSON.stringify(seen));
process.exit(0);
