// A real TypeScript MCP client asking for log lines and completions; prints what it received as JSON
// (tests/interop/test_logging_interop.py checks it).
//
//   node logging.mjs v1|v2 URL TOKEN
//
// v1 (2025-11-25) sets its level with logging/setLevel; v2 (2026-07-28) opts in per request with
// _meta["io.modelcontextprotocol/logLevel"] (its own setLoggingLevel refuses to send the method).

import { deadline, load } from './sdk.mjs';

const [sdk, url, token] = process.argv.slice(2);
deadline('logging client');
const v1 = sdk === 'v1';
const lib = await load(sdk);
const options = v1 ? {} : { versionNegotiation: { mode: 'auto' } };
const client = new lib.Client({ name: `fusion-nb-logging-${sdk}`, version: '1.0.0' }, options);
const logs = [];
const onLog = (notification) => logs.push(notification.params);
if (v1) client.setNotificationHandler(lib.LoggingMessageNotificationSchema, onLog);
else client.setNotificationHandler('notifications/message', onLog);
await client.connect(
  new lib.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
);
const seen = { capabilities: client.getServerCapabilities() };
try {
  await client.setLoggingLevel('info');
  seen.setLevel = 'ok';
} catch (error) {
  seen.setLevel = String(error.code ?? error.message);
}
const meta = v1 ? {} : { _meta: { [lib.LOG_LEVEL_META_KEY ?? 'io.modelcontextprotocol/logLevel']: 'info' } };
const result = await client.callTool({ name: 'chatty', arguments: {}, ...meta });
seen.result = result.content?.[0]?.text;
seen.logs = logs.slice();
seen.completion = (
  await client.complete({ ref: { type: 'ref/prompt', name: 'paint' }, argument: { name: 'color', value: 'r' } })
).completion;
await client.close();
process.stdout.write(JSON.stringify(seen));
