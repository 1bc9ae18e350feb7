// Bundles the MCP Apps test host (tests/browser/apps_host/host.mjs) with the official host bridge from
// these pinned node_modules into one browser script: node apps_bundle.mjs ENTRY OUT.
import { fileURLToPath } from "node:url";
import path from "node:path";
import { build } from "rolldown";

const here = path.dirname(fileURLToPath(import.meta.url));
const [entry, out] = process.argv.slice(2);
await build({
  input: entry,
  output: { file: out, format: "esm" },
  platform: "browser",
  resolve: { modules: [path.join(here, "node_modules")] },
  logLevel: "warn",
});
