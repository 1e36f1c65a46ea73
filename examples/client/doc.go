// Command client is an MCP client of the Obol reference gateway that retries
// tool calls safely, with the official Go SDK over Streamable HTTP. It shows
// the two patterns a client has (docs/DESIGN.md sections 3, 6 and 11):
//
//  1. Own key. The client makes an idempotency key before the call and sends
//     it as the Idempotency-Key header. When the reply is lost (here on
//     purpose: the gateway answered, the client sees only an error), the
//     client calls again with the same key and gets the stored result,
//     "replayed": true in _meta["dev.obol/receipt"], and the vendor acted
//     once. This is the pattern to use for writes: the key exists before
//     anything can go wrong.
//
//  2. Minted key. The client sends no key; the gateway mints one and returns
//     it in the Idempotency-Key response header and in
//     _meta["dev.obol/idempotency-key"]. When the outcome is "unknown" (the
//     vendor may or may not have acted), calling again with that key is safe:
//     the gateway sends the vendor the same vendor key, so a vendor that
//     deduplicates acts at most once. A minted key helps only once the answer
//     has arrived: if the reply of a call without a key is lost, so is its
//     key, and no retry is safe. Send your own key.
//
// A retry must repeat the same tool and arguments: the same key with other
// arguments is refused (request_mismatch). A refusal in_progress means an
// attempt is still running; wait retry_after_ms and call again with the
// same key.
//
// The SDK has no per-call headers, so the call's context carries the key to
// an http.RoundTripper, which also reads the Idempotency-Key response header
// the SDK does not expose.
//
// Run it against the demo gateway:
//
//	go run ./refserver        # in one terminal
//	go run ./examples/client  # in another
//
// Flags: -gateway URL (default http://127.0.0.1:8080), -api-key KEY (default
// the demo's ws_acme key), -tool and -args for pattern 1, -minted-tool and
// -minted-args for pattern 2. No demo tool ends "unknown" (its
// {"simulate": "503_once"} is retried by the gateway itself and accepted), so
// against the demo pattern 2 shows the replay; point -minted-tool at a tool
// whose vendor fails once without an answer to see an unknown outcome
// settled by the retry.
package main
