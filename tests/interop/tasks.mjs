// The TypeScript SDK 1.x task runtime (2025-11-25) against fusion-nb's task tools; prints what it saw.
//
//   node tasks.mjs http URL TOKEN MARKFILE
//   node tasks.mjs stdio MARKFILE COMMAND [ARGS...]      (server env: FUSION_NB_SERVER_ENV, JSON)
//
// Every request of this client times out after 1 s, so a 3 s job only completes through its task.

import { readFileSync, existsSync } from 'node:fs';
import { deadline, load } from './sdk.mjs';

deadline('tasks client');
const lib = await load('v1');
const [kind, ...rest] = process.argv.slice(2);
let transport, mark;
if (kind === 'http') {
  const [url, token, markFile] = rest;
  mark = markFile;
  transport = new lib.StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  const [markFile, command, ...args] = rest;
  mark = markFile;
  const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
  transport = new lib.StdioClientTransport({ command, args, env, stderr: 'ignore' });
}
const client = new lib.Client({ name: 'fusion-nb-tasks', version: '1.0.0' }, { capabilities: {} });
await client.connect(transport);
const seen = {};
seen.capability = client.getServerCapabilities().tasks ?? null;
seen.support = Object.fromEntries(
  (await client.listTools()).tools.map((tool) => [tool.name, tool.execution?.taskSupport ?? null]),
);

const started = Date.now();
seen.train = { messages: [] };
for await (const message of client.experimental.tasks.callToolStream(
  { name: 'train', arguments: { seconds: 3 } },
  undefined,
  { timeout: 1000 },
)) {
  seen.train.messages.push(message.type);
  if (message.type === 'taskCreated') seen.train.taskId = message.task.taskId;
  if (message.type === 'result') seen.train.text = message.result.content?.[0]?.text;
  if (message.type === 'error') seen.train.error = String(message.error);
}
seen.train.ms = Date.now() - started;
seen.listed = (await client.experimental.tasks.listTasks()).tasks.map((task) => [task.taskId, task.status]);
seen.got = (await client.experimental.tasks.getTask(seen.train.taskId)).status;

seen.stuck = {};
const stream = client.experimental.tasks.callToolStream({ name: 'stuck', arguments: { mark } }, undefined, {
  timeout: 1000,
});
const first = await stream.next();
seen.stuck.first = first.value.type;
const taskId = first.value.task?.taskId;
const cancelled = await client.experimental.tasks.cancelTask(taskId);
seen.stuck.cancelled = cancelled.status;
const cancelAt = Date.now();
while (!existsSync(mark) && Date.now() - cancelAt < 2000) await new Promise((r) => setTimeout(r, 10));
seen.stuck.cleaned = existsSync(mark) ? readFileSync(mark, 'utf8') : null;
seen.stuck.cleanupMs = Date.now() - cancelAt;
seen.stuck.after = (await client.experimental.tasks.getTask(taskId)).status;
try {
  await client.experimental.tasks.getTask('no-such-task');
  seen.unknown = 'answered';
} catch (error) {
  seen.unknown = String(error.message ?? error);
}
try {
  await client.callTool({ name: 'train', arguments: { seconds: 3 } }, undefined, { timeout: 1000 });
  seen.plain = 'answered';
} catch (error) {
  seen.plain = String(error.message ?? error);
}
console.log(JSON.stringify(seen));
await client.close();
process.exit(0);
