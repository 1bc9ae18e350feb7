// A real TypeScript MCP client that answers every kind of input request (a form, its model,
// its roots), calling tools, a prompt and a resource that ask; prints what it got as JSON.
//
//   node asking.mjs v1|v2 COMMAND [ARGS...]      (a stdio server: `fusion-nb connect URL` here)

import { deadline, load } from './sdk.mjs';

const [sdk, ...target] = process.argv.slice(2);
deadline('asking client');

const v1 = sdk === 'v1';
const lib = await load(sdk);
const options = { capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} } };
if (!v1) options.versionNegotiation = { mode: 'auto' };
const client = new lib.Client({ name: `fusion-nb-asking-${sdk}`, version: '1.0.0' }, options);
const asked = [];
const handlers = {
  elicit: async (request) => {
    asked.push(request.params.message);
    const key = Object.keys(request.params.requestedSchema.properties)[0];
    return { action: 'accept', content: { [key]: 'Ada' } };
  },
  sample: async (request) => {
    asked.push(request.params.messages[0].content.text);
    return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'ts-model' };
  },
  roots: async () => {
    asked.push('roots');
    return { roots: [{ uri: 'file:///work', name: 'work' }] };
  },
};
if (v1) {
  client.setRequestHandler(lib.ElicitRequestSchema, handlers.elicit);
  client.setRequestHandler(lib.CreateMessageRequestSchema, handlers.sample);
  client.setRequestHandler(lib.ListRootsRequestSchema, handlers.roots);
} else {
  client.setRequestHandler('elicitation/create', handlers.elicit);
  client.setRequestHandler('sampling/createMessage', handlers.sample);
  client.setRequestHandler('roots/list', handlers.roots);
}
const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
await client.connect(new lib.StdioClientTransport({ command: target[0], args: target.slice(1), env, stderr: 'pipe' }));
const seen = { asked };
async function record(name, call) {
  try {
    seen[name] = await call();
  } catch (error) {
    seen[name] = { thrown: String(error?.message ?? error).slice(0, 300) };
  }
}
for (const tool of ['sample', 'roots', 'everything']) {
  await record(tool, async () => (await client.callTool({ name: tool, arguments: {} })).content[0].text);
}
await record('prompt', async () => {
  const got = await client.getPrompt({ name: 'greeting', arguments: { city: 'Oslo' } });
  return got.messages[0].content.text;
});
await record('resource', async () => (await client.readResource({ uri: 'data://secret' })).contents[0].text);
await client.close();
console.log(JSON.stringify(seen));
process.exit(0);
