// One MCP session of the TypeScript SDK's client, as its users write it, for the ecosystem tests.
//
//   node drive.mjs URL SCENARIO
//
// A URL ending in /sse is the legacy HTTP+SSE transport (SSEClientTransport), any other
// Streamable HTTP. It prints one JSON line: each tools/call it made, with its outcome (ok,
// error for a result flagged isError, or the error it raised), in order; and the data of each
// log message the server sent it (notifications/message) before it closed the session.
// The everything server logs "Roots updated" on the session's GET stream once it has the
// client's roots: the `everything` session waits for it (10 s at most) before it closes.
// SCENARIO `everything` drives @modelcontextprotocol/server-everything: echo, get-sum (then
// with an argument off its schema), get-structured-content, get-roots-list (the server asks
// the client for its roots on the session's stream) and simulate-research-query, a task
// (callToolStream: the task is created, polled, and its result fetched with tasks/result).
// SCENARIO `tools` drives tests/support's weather tools: add, a bad add, weather, flagged.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, scenario] = process.argv.slice(2);
const CALLS = {
  everything: [
    ["echo", { message: "hello" }],
    ["get-sum", { a: 2, b: 3 }],
    ["get-sum", { a: "x", b: 3 }],
    ["get-structured-content", { location: "New York" }],
    ["get-roots-list", {}],
  ],
  tools: [
    ["add", { a: 2, b: 3 }],
    ["add", { a: "x", b: 1 }],
    ["weather", { city: "Oslo" }],
    ["flagged", {}],
  ],
};

const client = new Client({ name: "tooltap-test", version: "1.0.0" }, { capabilities: { roots: {} } });
client.setRequestHandler(ListRootsRequestSchema, async () => ({
  roots: [{ uri: "file:///work", name: "work" }],
}));
const logged = [];
let rootsLogged;
const rootsLog = new Promise((resolve) => (rootsLogged = resolve));
client.setNotificationHandler(LoggingMessageNotificationSchema, (notice) => {
  logged.push(notice.params.data);
  if (String(notice.params.data).startsWith("Roots updated")) rootsLogged();
});
const transport = url.endsWith("/sse")
  ? new SSEClientTransport(new URL(url))
  : new StreamableHTTPClientTransport(new URL(url));
const timer = setTimeout(() => {
  console.error("the session took longer than 60 s");
  process.exit(2);
}, 60000);
await client.connect(transport);
await client.listTools();
const calls = [];
for (const [name, args] of CALLS[scenario]) {
  try {
    const result = await client.callTool({ name, arguments: args });
    calls.push([name, result.isError ? "error" : "ok"]);
  } catch (error) {
    calls.push([name, error.constructor.name]);
  }
}
if (scenario === "everything") {
  let outcome = "no result";
  const stream = client.experimental.tasks.callToolStream(
    { name: "simulate-research-query", arguments: { topic: "tool loops" } },
    undefined,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    if (message.type === "result") outcome = message.result.isError ? "error" : "ok";
    if (message.type === "error") outcome = message.error.constructor.name;
  }
  calls.push(["simulate-research-query", outcome]);
}
if (scenario === "everything") {
  let waited;
  await Promise.race([rootsLog, new Promise((resolve) => (waited = setTimeout(resolve, 10000)))]);
  clearTimeout(waited);
}
const got = [...logged]; // before the session closes
await client.close();
clearTimeout(timer);
console.log(JSON.stringify({ calls, logged: got }));
