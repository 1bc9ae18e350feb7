// A real TypeScript MCP client declaring each shape of the elicitation capability, calling a
// form tool and a URL tool of fusion-nb's test app; prints what it observed as JSON.
//
//   node modes.mjs v1|v2 http URL TOKEN
//   node modes.mjs v1|v2 stdio COMMAND [ARGS...]      (server env: FUSION_NB_SERVER_ENV, JSON)
//
// The same observations are expected straight from the server and through `fusion-nb connect`
// (test_modes.py compares them); this script only drives and records.

import { deadline, load } from './sdk.mjs';

const [sdk, transportKind, ...target] = process.argv.slice(2);
deadline('modes client');

const v1 = sdk === 'v1';
const lib = await load(sdk);

function makeTransport() {
  if (transportKind === 'http') {
    return new lib.StreamableHTTPClientTransport(new URL(target[0]), {
      requestInit: { headers: { Authorization: `Bearer ${target[1]}` } },
    });
  }
  const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
  return new lib.StdioClientTransport({ command: target[0], args: target.slice(1), env, stderr: 'pipe' });
}

// name -> [declared elicitation capability (null: none), what the handler does]
const CASES = {
  none: [null, 'answer'],
  form: [{ form: {} }, 'answer'],
  url: [{ url: {} }, 'answer'],
  bare: [{}, 'answer'],
  both: [{ form: {}, url: {} }, 'answer'],
  throws: [{ form: {}, url: {} }, 'throw'],
};
const CALLS = { form: ['billing.refund', { id: 'inv-7' }], url: ['connect', {}] };

async function observe(capability, behaviour) {
  const options = { capabilities: capability === null ? {} : { elicitation: capability } };
  if (!v1) options.versionNegotiation = { mode: 'auto' };
  const client = new lib.Client({ name: `fusion-nb-modes-${sdk}`, version: '2.3.4' }, options);
  const asked = [];
  if (capability !== null) {
    const handler = async (request) => {
      asked.push(request.params.mode ?? 'form');
      if (behaviour === 'throw') throw new Error('form renderer crashed');
      return request.params.mode === 'url' ? { action: 'accept' } : { action: 'accept', content: { confirm: true } };
    };
    if (v1) client.setRequestHandler(lib.ElicitRequestSchema, handler);
    else client.setRequestHandler('elicitation/create', handler);
  }
  const transport = makeTransport();
  await client.connect(transport);
  const seen = { asked };
  for (const [kind, [name, args]] of Object.entries(CALLS)) {
    try {
      const result = await client.callTool({ name, arguments: args });
      seen[kind] = { isError: result.isError ?? false, text: result.content?.[0]?.text };
    } catch (error) {
      const required = error?.data?.requiredCapabilities ?? null;
      seen[kind] = { thrown: String(error?.message ?? error).slice(0, 200), code: error?.code ?? null, required };
    }
  }
  const who = await client.callTool({ name: 'whoami', arguments: {} });
  seen.client = who.structuredContent?.client ?? JSON.parse(who.content[0].text).client;
  await client.close();
  return seen;
}

const seen = {};
for (const [name, [capability, behaviour]] of Object.entries(CASES)) {
  seen[name] = await observe(capability, behaviour);
}
console.log(JSON.stringify(seen));
process.exit(0);
