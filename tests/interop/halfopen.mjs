// The TypeScript SDK 1.x client (2025-11-25), connected over Streamable HTTP, waiting for a tool-list
// change on its GET stream; prints the tools it lists then, and the errors it reported, as JSON.
//
//   node halfopen.mjs URL TOKEN
//
// test_bridge_and_modes.py cuts the client's side of its GET stream in between (the server's side stays
// open, half-open) and watches the client reopen the stream.

import { deadline, load } from './sdk.mjs';

const [url, token] = process.argv.slice(2);
deadline('half-open client');
const lib = await load('v1');

const client = new lib.Client({ name: 'fusion-nb-halfopen', version: '1.0.0' }, { capabilities: {} });
const errors = [];
client.onerror = (error) => errors.push(String(error?.message ?? error).slice(0, 200));
const changed = new Promise((resolve) => client.setNotificationHandler(lib.ToolListChangedNotificationSchema, resolve));
const transport = new lib.StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
await changed;
const tools = (await client.listTools()).tools.map((tool) => tool.name);
console.log(JSON.stringify({ tools, errors }));
process.exit(0);
