// The seed framework (MCP Fusion 3.1.31, built from source) serving the benchmark's echo tool on stdio.
//
//   node stdio_seed_server.mjs SEED_DIR
//
// SEED_DIR is a checkout of vinkius-labs/mcp-fusion at v3.1.31 with packages/core built
// (benchmarks/stdio.py's docstring has the commands); MCP Fusion is not on npm, so it is
// loaded from SEED_DIR/packages/core/dist, and the TypeScript SDK and zod from that
// package's own node_modules: the seed runs on the versions its lockfile pins.
//
// The tool is built the way MCP Fusion's scaffold builds its echo tool (`fusion create`:
// src/tools/system/echo.ts and src/server.ts): `initFusion()`, `f.query(...).withString(...)
// .handle(...)` returning raw data (MCP Fusion wraps it in `success()`), `f.registry()`,
// `startServer()` on stdio. Two differences from benchmarks/stdio.py's servers, both
// MCP Fusion's: it has no output schema and no structured content (the answer is the text
// block `{"result":"hi"}` alone), and its input schema is zod's. Telemetry is off
// (`telemetry: false`): the scaffold's default opens an IPC socket for its Inspector TUI
// (a no-op per call with no Inspector attached) that would keep the process alive after
// stdin closes and leave files in the temporary directory.

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [seed] = process.argv.slice(2);
const fusion = await import(pathToFileURL(path.join(path.resolve(seed), 'packages', 'core', 'dist', 'index.js')).href);

const f = fusion.initFusion();
const echo = f
  .query('echo')
  .describe('Echo a message back')
  .withString('text', 'Text to echo back')
  .handle(async (input) => ({ result: input.text }));

const registry = f.registry();
registry.register(echo);
await fusion.startServer({ name: 'bench-seed', registry, contextFactory: () => ({}), telemetry: false });
