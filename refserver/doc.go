// Command refserver is the Obol reference gateway: an MCP server (Streamable
// HTTP, official Go SDK) at POST /mcp whose every tools/call runs the
// idempotency core end to end: claim in Redis, dispatch to the vendor or a
// broker, finalize, replay.
//
// The one recommended path to try it:
//
//	go run ./refserver            # demo config, demo vendor, embedded store
//
// and for real use:
//
//	refserver -config gateway.json -redis redis://127.0.0.1:6379 -addr 0.0.0.0:8080
//
// The -config file has the format of docs/DESIGN.md, "refserver wire
// contract". Without -redis the URL comes from OBOL_REDIS_URL, so a password
// never has to be on the command line; without either, the embedded store is
// not durable.
//
// Every flag, the operator subcommands scope-status and store init, the HTTP
// endpoints and the keys each needs, and where the code makes the choices
// the wire contract leaves open are in the folder's README.md. The wire
// contract is docs/DESIGN.md, "refserver wire contract".
package main
