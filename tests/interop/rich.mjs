// A real TypeScript MCP client calling fusion-nb's rich-value tools, reading resources, getting
// prompts and sending bad requests, as PLAN says; prints the answers it received as JSON (the
// test checks them).
//
//   node rich.mjs v1|v2 URL TOKEN PLAN
//
// PLAN (JSON): {"tools": {name: arguments} (omitted: every listed tool, without arguments),
// "reads": [uri], "prompts": [[name, arguments]], "refused": [{"read": uri} | {"prompt": [name, arguments]}]}

import { deadline, load } from './sdk.mjs';

const [sdk, url, token, planText] = process.argv.slice(2);
deadline('rich client');
const plan = JSON.parse(planText);
const v1 = sdk === 'v1';
const lib = await load(sdk);
const options = v1 ? {} : { versionNegotiation: { mode: 'auto' } };
const client = new lib.Client({ name: `fusion-nb-rich-${sdk}`, version: '1.0.0' }, options);
await client.connect(
  new lib.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
);
const seen = { tools: {}, reads: {}, prompts: {}, refused: [] };
const tools = plan.tools ?? Object.fromEntries((await client.listTools()).tools.map(({ name }) => [name, {}]));
for (const [name, args] of Object.entries(tools)) {
  seen.tools[name] = await client.callTool({ name, arguments: args });
}
for (const uri of plan.reads ?? []) {
  seen.reads[uri] = await client.readResource({ uri });
}
for (const [name, args] of plan.prompts ?? []) {
  seen.prompts[name] = await client.getPrompt({ name, arguments: args });
}
for (const bad of plan.refused ?? []) {
  try {
    await (bad.read ? client.readResource({ uri: bad.read }) : client.getPrompt({ name: bad.prompt[0], arguments: bad.prompt[1] }));
    seen.refused.push('no error');
  } catch (error) {
    seen.refused.push(String(error.message));
  }
}
await client.close();
process.stdout.write(JSON.stringify(seen));
