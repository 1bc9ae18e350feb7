// What a TypeScript client does with a paged list: prints, as JSON, how many items each list
// call gave by itself ("once": the client's plain list call) and by following nextCursor
// ("walked": a loop passing each nextCursor back, as an application would).
//
//   node pages.mjs v1|v2 COMMAND [ARGS...]      (a stdio server; its env: FUSION_NB_SERVER_ENV, JSON)
//
// v2 (@modelcontextprotocol/client) walks every page itself when called without a cursor;
// v1 (@modelcontextprotocol/sdk) returns the first page only.

import { deadline, load } from './sdk.mjs';

const [sdk, ...command] = process.argv.slice(2);
deadline('pages client');
const lib = await load(sdk);
const options = sdk === 'v1' ? {} : { versionNegotiation: { mode: 'auto' } };
const client = new lib.Client({ name: `fusion-nb-pages-${sdk}`, version: '1.0.0' }, options);
const env = { ...process.env, ...JSON.parse(process.env.FUSION_NB_SERVER_ENV || '{}') };
await client.connect(new lib.StdioClientTransport({ command: command[0], args: command.slice(1), env, stderr: 'ignore' }));

const lists = {
  tools: (params) => client.listTools(params),
  resources: (params) => client.listResources(params),
  resourceTemplates: (params) => client.listResourceTemplates(params),
  prompts: (params) => client.listPrompts(params),
};
const seen = { once: {}, walked: {}, pages: {} };
for (const [key, list] of Object.entries(lists)) {
  const once = await list();
  seen.once[key] = once[key].length;
  let items = [...once[key]];
  let cursor = once.nextCursor;
  let pages = 1;
  while (cursor !== undefined) {
    const page = await list({ cursor });
    items = items.concat(page[key]);
    cursor = page.nextCursor;
    pages += 1;
  }
  seen.walked[key] = new Set(items.map((item) => item.uriTemplate ?? item.uri ?? item.name)).size;
  seen.pages[key] = pages;
}
let forged;
try {
  await client.listTools({ cursor: 'forged' });
} catch (error) {
  forged = { code: error.code, message: error.message };
}
seen.forged = forged;
await client.close();
console.log(JSON.stringify(seen));
