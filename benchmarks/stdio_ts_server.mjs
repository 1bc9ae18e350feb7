// The TypeScript SDK's own stdio server with the benchmark's echo tool: the seed's foundation, run here.
//
//   node stdio_ts_server.mjs NODE_MODULES
//
// MCP Fusion (the seed) is built on this server and cannot be installed here (not on npm);
// this row is what a Node server on the same SDK does on this machine with the same client,
// so fusion-nb's row can be read against something measured in the same run. The tool
// answers as benchmarks/stdio.py's servers do: a text block and structured content
// {"result": text} under an output schema. benchmarks/stdio.py runs it.

import { createRequire } from 'node:module';
import path from 'node:path';

const [modules] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modules), 'package.json'));
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { z } = require('zod');

const server = new McpServer({ name: 'bench-ts-sdk', version: '1.0.0' });
server.registerTool(
  'echo',
  { inputSchema: { text: z.string() }, outputSchema: { result: z.string() } },
  async ({ text }) => {
    const structuredContent = { result: text };
    return { content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent };
  },
);
await server.connect(new StdioServerTransport());
