// What every interop script shares: the pinned SDK a run uses, and a deadline for the whole script.
//
// v1 is @modelcontextprotocol/sdk (negotiates 2025-11-25); v2 is @modelcontextprotocol/client
// (2026-07-28 against fusion-nb with versionNegotiation mode 'auto').

export function deadline(name) {
  setTimeout(() => {
    console.error(`${name}: gave up after 120 s`);
    process.exit(3);
  }, 120_000).unref();
}

export async function load(sdk) {
  return sdk === 'v1'
    ? {
        ...(await import('@modelcontextprotocol/sdk/client/index.js')),
        ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
        ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
        ...(await import('@modelcontextprotocol/sdk/types.js')),
      }
    : { ...(await import('@modelcontextprotocol/client')), ...(await import('@modelcontextprotocol/client/stdio')) };
}
