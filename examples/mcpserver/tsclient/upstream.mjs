// The official MCP TypeScript client calls a tool that a gateway fronts
// for an upstream MCP server: the tool is listed, a call under a new key is
// accepted, and the same call again is its replay with the same answer.
// Exit code 0 when all hold.
//
//   node upstream.mjs URL API_KEY TOOL '{"title":"printer on fire"}'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { randomBytes } from "node:crypto";

const [url, apiKey, tool, args] = process.argv.slice(2);
const client = new Client({ name: "obol-tsclient", version: "0.1.0" });
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${apiKey}` } } }),
);

let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  failed ||= !ok;
};

const { tools } = await client.listTools();
check(tools.some((t) => t.name === tool), `tools/list names ${tool}`);

const key = "idt_" + randomBytes(16).toString("hex");
const call = () =>
  client.callTool({ name: tool, arguments: JSON.parse(args), _meta: { "dev.obol/idempotency-key": key } });
const receipt = (r) => r._meta?.["dev.obol/receipt"] ?? {};
const first = await call();
check(!first.isError && receipt(first).outcome === "accepted" && receipt(first).replayed === false,
  `first call accepted, not replayed (${first.content?.[0]?.text})`);
const again = await call();
check(receipt(again).replayed === true && again.content?.[0]?.text === first.content?.[0]?.text,
  "the same key again is the replay, with the same answer");
console.log(`KEY=${key}`);

await client.close();
process.exit(failed ? 1 : 0);
