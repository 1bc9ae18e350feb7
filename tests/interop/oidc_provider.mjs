// A certified OpenID provider (the pinned `oidc-provider`) for the OAuth tests, on loopback.
//
//   node oidc_provider.mjs
//
// Prints one JSON line on stdout once serving: {"issuer": URL, "other": URL}. `issuer` is the
// provider the tests trust; `other` is a second provider with the same signing keys at another
// URL (a token it issues verifies, but names another issuer). Both have open dynamic client
// registration, the test accounts alice and bob (devInteractions: the login and consent forms are
// answered over HTTP by the test), RFC 8707 resource indicators (JWT access tokens, RS256, for any
// http(s) resource ending in /mcp; opaque ones for the client `opaque-agent`), client credentials,
// and RFC 7662 introspection for the resource server's client `fusion-nb`.
// Test controls (POST, loopback only):
//   /_test/rotate            sign with a new key from now on (the old one stays published)
//   /_test/clock?seconds=N   issue tokens as if the clock were N seconds off (0 resets)
// It exits when its stdin closes (the test that started it ended).

import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const realNow = Date.now;
let offset = 0;
Date.now = () => realNow() + offset * 1000;

const SCOPES = 'notes:read reports:write';
const ACCOUNTS = new Set(['alice', 'bob']);

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID().slice(0, 8), alg: 'RS256', use: 'sig' };
}

function provider(issuer, keys) {
  const configuration = {
    jwks: { keys },
    clients: [
      { client_id: 'fusion-nb', client_secret: 'introspection-secret', grant_types: [], response_types: [], redirect_uris: [] },
      ...['agent', 'opaque-agent'].map((id) => ({
        client_id: id,
        client_secret: `${id}-secret`,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        scope: SCOPES,
      })),
    ],
    findAccount: (ctx, id) => (ACCOUNTS.has(id) ? { accountId: id, claims: () => ({ sub: id }) } : undefined),
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo(ctx, resource, client) {
          if (!/^https?:\/\/[^/]+\/.*mcp$/.test(resource)) throw new errors.InvalidTarget();
          return {
            scope: SCOPES,
            audience: resource,
            accessTokenTTL: 600,
            accessTokenFormat: client.clientId === 'opaque-agent' ? 'opaque' : 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
    pkce: { required: () => true },
  };
  return new Provider(issuer, configuration);
}

function serve(build) {
  return new Promise((resolve) => {
    const keys = [signingKey()];
    const state = { keys };
    const server = createServer((req, res) => {
      const url = new URL(req.url, state.issuer);
      if (req.method === 'POST' && url.pathname === '/_test/rotate') {
        state.keys = [signingKey(), ...state.keys];
        state.handler = build(state.issuer, state.keys).callback();
        res.end(JSON.stringify({ kid: state.keys[0].kid }));
      } else if (req.method === 'POST' && url.pathname === '/_test/clock') {
        offset = Number(url.searchParams.get('seconds') || 0);
        res.end(JSON.stringify({ offset }));
      } else {
        state.handler(req, res);
      }
    });
    server.listen(0, '127.0.0.1', () => {
      state.issuer = `http://127.0.0.1:${server.address().port}`;
      state.handler = build(state.issuer, state.keys).callback();
      resolve(state);
    });
  });
}

const main = await serve(provider);
const other = await serve((issuer) => provider(issuer, main.keys));
console.log(JSON.stringify({ issuer: main.issuer, other: other.issuer }));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
