// The host side of an MCP Apps view inside a notebook output (#49 item 4): the view's own HTML in a
// sandboxed iframe (scripts only, no same origin, the CSP a host applies: nothing outside), the
// ext-apps JSON-RPC over postMessage answered here, and its tools/call relayed to the kernel, which
// runs them through the engine as any call. Works offline: this file ships in the wheel.
function policy() {
  return "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; " +
    "font-src data:; media-src data:; connect-src 'none'; frame-src 'none'";
}
export default {
  render({ model, el }) {
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts");
    frame.className = "fusion-nb-app-preview";
    frame.style.cssText = `width:100%;height:${model.get("height")}px;border:1px solid #ccc;background:#fff`;
    const meta = `<meta http-equiv="Content-Security-Policy" content="${policy()}">`;
    frame.srcdoc = model.get("html").replace(/<head[^>]*>/i, (head) => head + meta);
    const waiting = new Map();
    let next = 1;
    const post = (msg) => frame.contentWindow && frame.contentWindow.postMessage({ jsonrpc: "2.0", ...msg }, "*");
    function onMessage(event) {
      if (event.source !== frame.contentWindow) return;
      const msg = event.data;
      if (!msg || msg.jsonrpc !== "2.0" || !msg.method) return;
      if (msg.method === "ui/initialize") {
        post({ id: msg.id, result: { protocolVersion: "2026-01-26",
          hostInfo: { name: "fusion-nb notebook preview", version: "1" },
          hostCapabilities: { serverTools: {}, updateModelContext: { text: {} } },
          hostContext: { toolInfo: { id: "preview", tool: model.get("tool") }, displayMode: "inline" } } });
      } else if (msg.method === "ui/notifications/initialized") {
        post({ method: "ui/notifications/tool-input", params: { arguments: model.get("input") } });
        post({ method: "ui/notifications/tool-result", params: model.get("result") });
      } else if (msg.method === "tools/call") {
        const n = next++;
        waiting.set(n, msg.id);
        model.send({ n, name: (msg.params || {}).name, arguments: (msg.params || {}).arguments || {} });
      } else if (msg.method === "ui/update-model-context") {
        model.set("model_context", (msg.params || {}));
        model.save_changes();
        post({ id: msg.id, result: {} });
      } else if (msg.id !== undefined) {
        post({ id: msg.id, error: { code: -32601, message: `${msg.method} is not supported by the preview` } });
      }
    }
    function onReply(msg) {
      const id = waiting.get(msg.n);
      if (id === undefined) return;
      waiting.delete(msg.n);
      post(msg.error ? { id, error: { code: -32603, message: msg.error } } : { id, result: msg.result });
    }
    window.addEventListener("message", onMessage);
    model.on("msg:custom", onReply);
    el.append(frame);
    return () => { window.removeEventListener("message", onMessage); model.off("msg:custom", onReply); };
  },
};
