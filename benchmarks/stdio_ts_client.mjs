// The TypeScript SDK's client driving one stdio server: how the seed framework's figures were taken.
//
//   node stdio_ts_client.mjs NODE_MODULES CALLS DEPTH TOTAL COMMAND [ARGS...]
//
// NODE_MODULES is the folder holding the pinned @modelcontextprotocol/sdk (tests/interop/
// node_modules): the client is loaded from there, so this script needs no install of its own.
// It connects (2025-11-25), warms up, times CALLS sequential calls of `echo`, then measures
// calls/s with DEPTH calls always in flight until TOTAL have answered, and prints
// {"times": [seconds...], "rate": calls_per_second} on stdout. benchmarks/stdio.py runs it.

import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, calls, depth, total, command, ...args] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modules), 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

setTimeout(() => {
  console.error('stdio_ts_client: gave up after 300 s');
  process.exit(3);
}, 300_000).unref();

const client = new Client({ name: 'fusion-nb-bench', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: 'ignore' }));
const params = { name: 'echo', arguments: { text: 'hi' } };
const call = () => client.callTool(params);
await client.listTools(); // (the SDK client validates structured content against the listed output schema)
for (let i = 0; i < 300; i++) await call();

const times = [];
for (let i = 0; i < Number(calls); i++) {
  const start = process.hrtime.bigint();
  await call();
  times.push(Number(process.hrtime.bigint() - start) / 1e9);
}

let started = 0;
async function worker() {
  while (started < Number(total)) {
    started++;
    await call();
  }
}
const start = process.hrtime.bigint();
await Promise.all(Array.from({ length: Number(depth) }, worker));
const rate = Number(total) / (Number(process.hrtime.bigint() - start) / 1e9);

process.stdout.write(JSON.stringify({ times, rate }) + '\n');
await client.close();
