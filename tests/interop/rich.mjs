// A real TypeScript MCP client calling fusion-nb's rich-value tools, reading a resource and
// getting a prompt; prints the answers it received as JSON (the test checks them).
//
//   node rich.mjs v1|v2 URL TOKEN

import { deadline, load } from './sdk.mjs';

const [sdk, url, token] = process.argv.slice(2);
deadline('rich client');
const v1 = sdk === 'v1';
const lib = await load(sdk);
const options = v1 ? {} : { versionNegotiation: { mode: 'auto' } };
const client = new lib.Client({ name: `fusion-nb-rich-${sdk}`, version: '1.0.0' }, options);
await client.connect(
  new lib.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
);
const seen = { tools: {} };
for (const name of ['figure', 'photo', 'table', 'grid', 'html']) {
  seen.tools[name] = await client.callTool({ name, arguments: {} });
}
seen.resource = await client.readResource({ uri: 'data://table' });
seen.prompt = await client.getPrompt({ name: 'explain', arguments: { topic: 'MCP' } });
try {
  await client.readResource({ uri: 'nope://x' });
  seen.unknown = 'no error';
} catch (error) {
  seen.unknown = String(error.message);
}
await client.close();
process.stdout.write(JSON.stringify(seen));
