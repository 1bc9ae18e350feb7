// The TypeScript SDK 1.x client (2025-11-25) calling a tool that reports progress for a few seconds, over
// Streamable HTTP; prints the progress it saw, the result, the errors it reported and the Last-Event-IDs
// it resumed from, as JSON.
//
//   node resume.mjs URL TOKEN
//
// test_resume.py cuts the call's POST stream mid-call in a loopback proxy; the client reconnects with
// GET + Last-Event-ID (its own reconnection logic) and must still see every step and the result.

import { deadline, load } from './sdk.mjs';

const [url, token] = process.argv.slice(2);
deadline('resume client');
const lib = await load('v1');

const client = new lib.Client({ name: 'fusion-nb-resume', version: '1.0.0' }, { capabilities: {} });
const errors = [];
const resumedFrom = [];
client.onerror = (error) => errors.push(String(error?.message ?? error).slice(0, 200));
const transport = new lib.StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 3 },
});
await client.connect(transport);
const progress = [];
const result = await client.callTool({ name: 'ticks', arguments: {} }, undefined, {
  onprogress: (step) => progress.push(step.progress),
  resumptionToken: undefined,
  onresumptiontoken: (token) => resumedFrom.push(token),
  timeout: 60_000,
});
console.log(JSON.stringify({ progress, result: result.content?.[0]?.text, errors, tokens: resumedFrom.length }));
await client.close();
process.exit(0);
