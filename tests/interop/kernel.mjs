// Both TypeScript SDKs against a kernel's `%fusion serve`: list the tools and call one with progress.
//   node kernel.mjs URL TOKEN TOOL JSON_ARGUMENTS
const [url, token, tool, args] = process.argv.slice(2);
setTimeout(() => process.exit(3), 60_000).unref();
const v1 = {
  ...(await import('@modelcontextprotocol/sdk/client/index.js')),
  ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
};
const v2 = await import('@modelcontextprotocol/client');
const seen = {};
for (const [sdk, lib] of [['v1', v1], ['v2', v2]]) {
  const options = sdk === 'v2' ? { versionNegotiation: { mode: 'auto' } } : {};
  const client = new lib.Client({ name: `kernel-interop-${sdk}`, version: '1.0.0' }, options);
  const transport = new lib.StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const progress = [];
  const params = { name: tool, arguments: JSON.parse(args) };
  const onprogress = { onprogress: (p) => progress.push(p.progress) };
  const result = sdk === 'v1' ? await client.callTool(params, undefined, onprogress) : await client.callTool(params, onprogress);
  seen[sdk] = {
    protocol: sdk === 'v1' ? '2025-11-25' : client.getNegotiatedProtocolVersion(),
    tools: (await client.listTools()).tools.map((t) => t.name),
    text: result.content[0].text,
    progress,
  };
  await client.close();
}
console.log(JSON.stringify(seen));
process.exit(0);
