// A test host built on the official MCP Apps host bridge (@modelcontextprotocol/ext-apps/app-bridge):
// it lists the server's tools, reads the tool's ui:// resource, renders it in a double iframe (an
// outer sandbox proxy on another origin, the view inside it under the spec's CSP) and passes the
// call's input and result. MCP requests go to the same-origin endpoint as a 2026-07-28 client that
// declares io.modelcontextprotocol/ui. What happened is left on window.host for the test to read.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const APPS = "io.modelcontextprotocol/ui";
const query = new URLSearchParams(location.search);
const token = query.get("token"), toolName = query.get("tool"), args = JSON.parse(query.get("args") || "{}");
const host = (window.host = { tools: [], calls: [], modelContext: [], errors: [], result: null, ready: false });
let number = 0;

async function rpc(method, params) {
  const meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": { extensions: { [APPS]: { mimeTypes: ["text/html;profile=mcp-app"] } } },
    "io.modelcontextprotocol/clientInfo": { name: "fusion-nb test host", version: "0" },
  };
  const headers = {
    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    Authorization: `Bearer ${token}`, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
  };
  if (params.name || params.uri) headers["Mcp-Name"] = params.name || params.uri;
  const response = await fetch("/mcp", { method: "POST", headers,
    body: JSON.stringify({ jsonrpc: "2.0", id: ++number, method, params: { ...params, _meta: meta } }) });
  const text = await response.text();
  const data = text.startsWith("{") ? text : text.split("\n").filter((l) => l.startsWith("data:")).pop().slice(5);
  const answer = JSON.parse(data);
  if (answer.error) throw new Error(answer.error.message);
  const { resultType, ...result } = answer.result; // (the 2026 envelope field; the bridge's schemas predate it)
  if (result._meta) delete result._meta["io.modelcontextprotocol/serverInfo"];
  return result;
}

async function main() {
  host.tools = (await rpc("tools/list", {})).tools;
  const tool = host.tools.find((t) => t.name === toolName);
  const uri = tool._meta.ui.resourceUri;
  const content = (await rpc("resources/read", { uri })).contents[0];
  const outer = document.createElement("iframe");
  outer.id = "sandbox";
  outer.setAttribute("sandbox", "allow-scripts allow-same-origin");
  outer.src = query.get("sandbox");
  outer.style.cssText = "width:900px;height:640px;border:1px solid #999";
  const bridge = new AppBridge(null, { name: "fusion-nb test host", version: "0" },
    { serverTools: {}, updateModelContext: { text: {} }, logging: {} },
    { hostContext: { toolInfo: { id: "call-1", tool } } });
  bridge.oncalltool = async (params) => {
    host.calls.push(params);
    return await rpc("tools/call", { name: params.name, arguments: params.arguments || {} });
  };
  bridge.onupdatemodelcontext = async (params) => { host.modelContext.push(params); return {}; };
  bridge.onsandboxready = () => bridge.sendSandboxResourceReady({ html: content.text, csp: content._meta?.ui?.csp });
  bridge.oninitialized = async () => { // (the view is up while the call runs, as the spec has it)
    host.ready = true;
    await bridge.sendToolInput({ arguments: args });
    host.result = await rpc("tools/call", { name: toolName, arguments: args });
    await bridge.sendToolResult(host.result);
  };
  document.body.append(outer);
  await bridge.connect(new PostMessageTransport(outer.contentWindow, outer.contentWindow));
}
main().catch((e) => host.errors.push(String(e && e.stack || e)));
