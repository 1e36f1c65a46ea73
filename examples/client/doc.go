// Command client is an MCP client of the Obol reference gateway that retries
// tool calls safely, with the official Go SDK over Streamable HTTP. It shows
// the two patterns a client has (docs/DESIGN.md, "The key", "The record and
// its lifecycle" and "refserver wire contract"):
//
//  1. Own key, the pattern to use for writes: make an idempotency key before
//     the call, send it as the Idempotency-Key header, and when the reply is
//     lost call again with the same key to get the stored result.
//  2. Minted key: send no key, read the one the gateway minted, and retry an
//     "unknown" outcome with it. A minted key is lost with a lost reply.
//
// A retry must repeat the same tool and arguments. Run it against the demo
// gateway:
//
//	go run ./refserver        # in one terminal
//	go run ./examples/client  # in another
//
// The patterns in full, the refusals a retry meets, how the key travels
// without per-call headers, and the flags are in the folder's README.md.
package main
