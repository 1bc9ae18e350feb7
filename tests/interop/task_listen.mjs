// The TypeScript SDK 2.x client listening for task status (2026-07-28 tasks extension) with the
// helpers and schemas of @modelcontextprotocol/ext-tasks; prints what it saw.
//
//   node task_listen.mjs http MARKFILE OTHER_TASK_ID URL TOKEN
//   node task_listen.mjs stdio MARKFILE OTHER_TASK_ID COMMAND [ARGS...]   (server env: FUSION_NB_SERVER_ENV, JSON)
//
// It starts `train` (2 s) and `stuck` as tasks, opens one subscriptions/listen stream for both
// and OTHER_TASK_ID (a task it does not own, or none at all) next to toolsListChanged, waits
// for `train` to be heard completed, cancels `stuck` and waits to hear that, then closes the stream.

import { readFileSync } from 'node:fs';
import {
  CancelTaskResultV2Schema,
  CreateTaskResultV2Schema,
  TASKS_EXTENSION_ID_V2,
  TaskStatusNotificationParamsV2Schema,
  contributeTaskFilterV2,
  isTaskStatusNotificationV2,
  readAcceptedTaskIdsV2,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { deadline, load } from './sdk.mjs';

deadline('task listen client');
const lib = await load('v2');
const [kind, mark, other, ...target] = process.argv.slice(2);
let transport;
if (kind === 'http') {
  const [url, token] = target;
  transport = new lib.StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
  transport = new lib.StdioClientTransport({ command: target[0], args: target.slice(1), env, stderr: 'ignore' });
}
const client = new lib.Client(
  { name: 'fusion-nb-task-listen', version: '1.0.0' },
  { capabilities: { extensions: { [TASKS_EXTENSION_ID_V2]: {} } }, versionNegotiation: { mode: 'auto' } },
);
await client.connect(transport);

const packageJson = new URL('./node_modules/@modelcontextprotocol/ext-tasks/package.json', import.meta.url);
const seen = { extTasks: JSON.parse(readFileSync(packageJson, 'utf8')).version, heard: [] };
let wake = () => {};
client.setNotificationHandler('notifications/tasks', { params: TaskStatusNotificationParamsV2Schema }, (params, raw) => {
  seen.heard.push({
    taskId: params.taskId,
    status: params.status,
    statusMessage: params.statusMessage ?? null,
    text: params.result?.content?.[0]?.text ?? null,
    valid: isTaskStatusNotificationV2(raw),
    subscriptionId: params._meta?.['io.modelcontextprotocol/subscriptionId'] ?? null,
  });
  wake();
});
async function hear(taskId, status) {
  const started = Date.now();
  while (!seen.heard.some((h) => h.taskId === taskId && h.status === status)) {
    if (Date.now() - started > 30_000) throw new Error(`never heard ${taskId} ${status}: ${JSON.stringify(seen.heard)}`);
    await new Promise((resolve) => {
      wake = resolve;
      setTimeout(resolve, 1000);
    });
  }
  return Date.now() - started;
}

// The SDK's client refuses a `resultType: "task"` answer, so task requests go below it, as the
// Inspector's ext-tasks `rawDispatch` does: sent on the transport, their responses taken off it.
const answers = new Map();

const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
  // (the SDK's `honoredFilter` keeps only the core filter keys, so the accepted taskIds are read off the wire)
  if (message.method === 'notifications/subscriptions/acknowledged') seen.ack = message.params;
  const waiting = !('method' in message) ? answers.get(message.id) : undefined;
  if (waiting === undefined) return deliver.call(transport, message, extra);
  answers.delete(message.id);
  if (message.error) waiting.reject(new Error(`${message.error.code} ${message.error.message}`));
  else waiting.resolve(message.result);
};
const envelope = {
  'io.modelcontextprotocol/protocolVersion': client.getNegotiatedProtocolVersion(),
  'io.modelcontextprotocol/clientInfo': { name: 'fusion-nb-task-listen', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION_ID_V2]: {} } },
};
let rawIds = 0;
async function raw(method, params, schema) {
  const id = `raw:${rawIds++}`;
  const answered = new Promise((resolve, reject) => answers.set(id, { resolve, reject }));
  await transport.send({ jsonrpc: '2.0', id, method, params: { ...params, _meta: envelope } });
  return schema.parse(await answered);
}
const start = (name, args) => raw('tools/call', { name, arguments: args }, CreateTaskResultV2Schema);
const train = await start('train', { seconds: 2 });
const stuck = await start('stuck', { mark });
seen.created = [train.resultType, stuck.resultType];
seen.protocol = client.getNegotiatedProtocolVersion();
seen.train = train.taskId;
seen.stuck = stuck.taskId;

const filter = contributeTaskFilterV2({ notifications: { toolsListChanged: true } }, [train.taskId, stuck.taskId, other]);
const subscription = await client.listen(filter.notifications);
seen.honored = subscription.honoredFilter;
seen.accepted = readAcceptedTaskIdsV2(seen.ack);
seen.completedAfterMs = await hear(train.taskId, 'completed');
await raw('tasks/cancel', { taskId: stuck.taskId }, CancelTaskResultV2Schema);
seen.cancelledAfterMs = await hear(stuck.taskId, 'cancelled');
await subscription.close();
seen.closed = await subscription.closed;
console.log(JSON.stringify(seen));
await client.close();
process.exit(0);
