// The TypeScript SDK 1.x OAuth client against `fusion-nb serve --auth-issuer`: the whole flow; prints what it saw.
//
//   node oauth_flow.mjs MCP_URL LOGIN
//
// No token is configured: the SDK reads the 401, the protected-resource metadata, the
// authorization server's metadata, registers itself (RFC 7591), and sends the "browser" to the
// authorization endpoint with PKCE and the resource (RFC 8707). This script plays the person:
// it follows the redirects with a cookie jar and answers the provider's login (as LOGIN) and
// consent forms over HTTP, then hands the code back (finishAuth). Then: a call, a task, an
// elicitation; and the token, sent by hand to a tool needing a scope it lacks, gets a 403 naming the
// scope. (The SDK would step up to that scope with the client it registered, but a provider holds a
// registered client to the scope it registered with: oidc-provider answers invalid_scope.)

import { deadline, load } from './sdk.mjs';

deadline('oauth flow');
const lib = await load('v1');
const { UnauthorizedError } = await import('@modelcontextprotocol/sdk/client/auth.js');
const [url, login] = process.argv.slice(2);
const REDIRECT = 'http://127.0.0.1:9/callback'; // never reached: the script reads the code off the redirect

const seen = { wire: [], authorizations: [], prompts: [] };
const logged = async (input, init) => {
  const response = await fetch(input, init);
  const target = new URL(String(input instanceof Request ? input.url : input));
  seen.wire.push(`${init?.method ?? 'GET'} ${target.pathname} ${response.status}`);
  return response;
};

const store = {};
let pendingCode;
const provider = {
  get redirectUrl() {
    return REDIRECT;
  },
  get clientMetadata() {
    return {
      client_name: 'fusion-nb oauth test',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (client) => {
    store.client = client;
  },
  tokens: () => store.tokens,
  saveTokens: (tokens) => {
    store.tokens = tokens;
  },
  saveCodeVerifier: (verifier) => {
    store.verifier = verifier;
  },
  codeVerifier: () => store.verifier,
  async redirectToAuthorization(authorization) {
    const asked = Object.fromEntries(authorization.searchParams);
    seen.authorizations.push({
      scope: asked.scope,
      resource: asked.resource,
      method: asked.code_challenge_method,
      challenge: Boolean(asked.code_challenge),
    });
    pendingCode = await actAsThePerson(authorization);
  },
};

// The browser: follow redirects, keep cookies, answer each form; the code in the last redirect.
async function actAsThePerson(start) {
  const jar = new Map();
  const keep = (response) => {
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
  };
  const cookies = () => [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
  let next = new URL(start);
  for (let hop = 0; hop < 20; hop += 1) {
    if (next.href.startsWith(REDIRECT)) {
      if (!next.searchParams.get('code')) throw new Error(`no code: ${next.search}`);
      return next.searchParams.get('code');
    }
    const page = await fetch(next, { redirect: 'manual', headers: { cookie: cookies() } });
    keep(page);
    if (page.status >= 300 && page.status < 400) {
      next = new URL(page.headers.get('location'), next);
      continue;
    }
    const html = await page.text();
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (!prompt || !action) throw new Error(`unexpected page ${page.status} at ${next.pathname}: ${html.slice(0, 300)}`);
    seen.prompts.push(prompt);
    const form = prompt === 'login' ? { prompt, login, password: 'not checked' } : { prompt };
    const answered = await fetch(new URL(action.replaceAll('&amp;', '&'), next), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookies(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    });
    keep(answered);
    next = new URL(answered.headers.get('location'), next);
  }
  throw new Error('the authorization did not end in a redirect with a code');
}

// Run `step` on a connected client; an UnauthorizedError means the person was asked: hand the code back, retry.
async function withAuth(step) {
  for (let attempt = 0; ; attempt += 1) {
    const transport = new lib.StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: logged });
    const client = new lib.Client({ name: 'fusion-nb-oauth', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(lib.ElicitRequestSchema, async (request) => {
      seen.elicited = request.params.message;
      return { action: 'accept', content: { go: true } };
    });
    try {
      await client.connect(transport);
      return await step(client);
    } catch (error) {
      if (!(error instanceof UnauthorizedError) || attempt > 1 || !pendingCode) throw error;
      await transport.finishAuth(pendingCode);
      pendingCode = undefined;
    } finally {
      await client.close();
    }
  }
}

await withAuth(async (client) => {
  seen.echo = (await client.callTool({ name: 'echo', arguments: { text: 'over oauth' } })).structuredContent;
  seen.taskSupport = (await client.listTools()).tools.find((tool) => tool.name === 'work').execution?.taskSupport;
  seen.task = [];
  for await (const message of client.experimental.tasks.callToolStream({ name: 'work', arguments: { n: 3 } })) {
    seen.task.push(message.type);
    if (message.type === 'result') seen.taskResult = message.result.structuredContent;
  }
  seen.elicitation = (await client.callTool({ name: 'confirm', arguments: {} })).structuredContent;
});
seen.scope = store.tokens.scope;
const refused = await fetch(url, {
  method: 'POST',
  headers: {
    authorization: `Bearer ${store.tokens.access_token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'report', arguments: {} } }),
});
seen.report = { status: refused.status, challenge: refused.headers.get('www-authenticate') };
seen.tokenIsJwt = store.tokens.access_token.split('.').length === 3;
seen.registered = Boolean(store.client?.client_id);
console.log(JSON.stringify(seen));
process.exit(0);
