// The official MCP TypeScript client against examples/mcpserver: a note
// created twice under one idempotency key is one note (the second answer
// is the replay), another key makes a second note, and the same key with
// other arguments is refused request_mismatch. Exit code 0 when all hold.
//
//   npm install && node client.mjs http://127.0.0.1:8090/mcp
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { randomBytes } from "node:crypto";

const url = new URL(process.argv[2] ?? "http://127.0.0.1:8090/mcp");
const client = new Client({ name: "obol-tsclient", version: "0.1.0" });
await client.connect(new StreamableHTTPClientTransport(url));

const newKey = () => "idt_" + randomBytes(16).toString("hex");
const create = (key, text) =>
  client.callTool({ name: "notes.create", arguments: { text }, _meta: { "dev.obol/idempotency-key": key } });
const count = async () => (await client.callTool({ name: "notes.count", arguments: {} })).structuredContent.count;

let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  failed ||= !ok;
};

const before = await count();
const key = newKey();
const first = await create(key, "buy milk");
const receipt = (r) => r._meta?.["dev.obol/receipt"] ?? {};
check(!first.isError && receipt(first).outcome === "accepted" && receipt(first).replayed === false,
  `first call accepted, not replayed (${first.content?.[0]?.text})`);
const again = await create(key, "buy milk");
check(receipt(again).replayed === true && again.content?.[0]?.text === first.content?.[0]?.text,
  "the same key again is the replay, with the same answer");
check((await count()) === before + 1, "one note for two calls under one key");

let mismatch = "";
try {
  await create(key, "buy bread");
} catch (e) {
  mismatch = e?.data?.reason ?? String(e);
}
check(mismatch === "request_mismatch", `the same key with other arguments is refused (${mismatch})`);

await create(newKey(), "buy milk");
check((await count()) === before + 2, "another key makes a second note");

await client.close();
process.exit(failed ? 1 : 0);
