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
// Flags: -config FILE (DESIGN.md section 11 format), -redis URL (redis://,
// rediss://, valkey://, valkeys://, unix:///path/to/socket, or
// comma-separated Cluster seeds), -addr HOST:PORT (default
// 127.0.0.1:8080). The listen address is printed on stdout on start.
// Without -redis, the URL comes from the environment variable
// OBOL_REDIS_URL, so a password never has to be on the command line (where
// any user of the machine can read it); when both are set, -redis wins and
// the server warns that OBOL_REDIS_URL is ignored. The URL is never printed.
//
// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT is set: a span per
// tools/call (under the client's traceparent, if any) with the claim, each
// attempt and the finalize beneath it, exported over OTLP/HTTP (the other
// OTEL_EXPORTER_OTLP_* variables apply) and flushed at shutdown; each
// native attempt sends its traceparent to the vendor. Spans carry no key,
// argument or credential.
//
// One operator subcommand, read-only:
//
//	refserver scope-status -redis URL -prefix obol: [-progress N]
//
// counts the live records per scope version and state (an in-flight record
// whose lease lapsed counts as unknown) on every master, printing a progress
// line on stderr every N keys; see the README's "Upgrading the key scope".
//
// # Endpoints
//
//	POST /mcp                              MCP: tools/list, tools/call (Bearer workspace key)
//	POST /v1/approvals/{ticket}/approve    approver key
//	POST /v1/approvals/{ticket}/deny       approver key
//	GET  /v1/receipts/{key}?tool=NAME      workspace key; another workspace's key is 404
//	POST /v1/capabilities/{name}/pin       approver key, body {"provider": "tool.name"}
//	GET  /v1/unknown?workspace=ID          approver key; ?cursor=, ?limit= (at most 100)
//	POST /v1/receipts/{key}/resolve?tool=NAME&workspace=ID
//	                                       approver key, body {"outcome": "accepted"|"definitely_rejected",
//	                                       "note": "...", "attempt_count": N (optional, as listed)}
//	GET  /healthz, GET /metrics            no key
//
// # Decisions where the contract is silent
//
// MCP transport. The SDK handler runs stateless (no Mcp-Session-Id), so any
// number of refserver processes can serve one client behind a load balancer:
// every state that matters is in Redis. Answers are application/json rather
// than an SSE stream. A client may call tools/call without initialize.
//
// The front of POST /mcp. Any method but POST gets 405 with Allow: POST
// (with or without a key). Before the SDK sees a request, a thin wrapper
// authenticates the Bearer key (401 otherwise), reads the body (at most
// 1 MiB, else 413 request_too_large) and reads the message once, strictly:
// one JSON object (a batch is refused: one message per POST), valid UTF-8
// without lone surrogates, no member name twice anywhere in the message
// (names compared after unescaping, so "method" and "meth\u006fd" are one
// name), and in the envelope objects (the message, params, params._meta) no
// two names equal up to case. That rule covers the arguments too, compared
// exactly there: the request hash would refuse a repeat later, but this way
// no part of a message reaches a second parser with one. The jsonrpc, id
// (a string or an integer), method (a short printable string), params,
// params.name, arguments and the approval ticket must have their types.
// Each such refusal is HTTP 400 with a JSON-RPC error (code -32700 for a
// body that is not JSON, -32600 for the message, -32602 for params),
// reason invalid_request (invalid_arguments for arguments that are not an
// object) and a fixed message. The SDK reads the same bytes afterwards,
// and can only read what the front read.
//
// Then the wrapper resolves the effective key in one place (effectiveKey):
// from the Idempotency-Key header (idempotency.FromHeader) and
// params._meta["dev.obol/idempotency-key"], which must be a JSON string
// holding a key in either form the header takes. Either alone is the key;
// both must be the same key once parsed. Malformed, repeated, a _meta value
// that is not a string, or a header and a _meta key that differ: HTTP 400
// with a JSON-RPC error, reason malformed_key, no key in the answer;
// checked on every POST, not only on tools/call. For a tools/call the
// wrapper sets the effective key as the response header. A resume that
// carries a ticket and no key answers with the ticket's key: the wrapper
// looks the ticket up. The workspace and key reach the tool handler as the
// request's auth.TokenInfo; the front is the one place that maps an API key
// to a workspace (the SDK's bearer middleware only passes its result on).
//
// Every answer to a tools/call carries the Idempotency-Key header and, when
// it is a refusal, error.data.idempotency_key with the same key; except
// where no key could be read: malformed_key, a message refused for repeated
// members or before it was read as a tools/call, and a resume whose ticket
// could not be read (store_unavailable: its key is the ticket's).
//
// No error quotes the request. The front's own refusals have fixed texts.
// The SDK's answer is held and rewritten before it leaves: a JSON-RPC error
// the SDK made gets a fixed message by code and error.data {"reason",
// "status"} (invalid_request, method_not_found, internal), and a plain-text
// transport refusal becomes a JSON-RPC error with a fixed message. Errors
// this server made keep their texts, none of which names a value of the
// request (unknown_tool does not name the tool). The one part of a request
// that comes back is the JSON-RPC id, as the protocol requires.
//
// Refusals. JSON-RPC errors carry error.data {"reason", "status",
// "idempotency_key"}. Codes: -32602 for unknown_tool, invalid_arguments,
// arguments_too_large and invalid params; -32600 and -32700 for a message
// the front refuses (above); -32603 for internal and store_unavailable;
// -32000 for every other refusal. Reasons beyond DESIGN.md: unauthorized
// (401), method_not_allowed (405), method_not_found (404: a JSON-RPC method
// the server does not serve), invalid_request (400), invalid_arguments (400:
// arguments that are not one JSON object, duplicate names, lone
// surrogates, or break the tool's input schema), arguments_too_large (413,
// over 256 KiB), request_too_large (413), not_found (404: an approval ticket that does not exist or belongs
// to another workspace or tool), scope_version_conflict (409 for a record of
// another scope version; 503 once the fleet's scope version changed),
// store_unavailable (503), internal (500). The /v1 endpoints answer
// {"reason", "status", "message"} with the same reasons, plus
// already_decided (409) for a ticket decided the other way.
//
// Tool descriptions and schemas. A tool entry (native or federated) and a
// capability entry may have "description" and "input_schema", a JSON Schema
// of type object (draft 2020-12 or draft-07), checked at load with
// github.com/google/jsonschema-go, the implementation the MCP SDK uses:
// refs must resolve within the schema (no fetch), defaults must match, and
// x-mcp-header is refused (it would copy arguments into HTTP headers). The
// validator recurses on $refs without a limit (a cycle overflows the stack,
// which no recover catches) and reads keywords regardless of case (where
// clients read "Type" as an unknown member), so a schema must also be a
// finite tree once its $refs are followed: $refs are local JSON pointers
// ("#/$defs/x"), none is recursive, at most 4096 paths lead through it, no
// $dynamicRef or nested $id, and keywords are written exactly. A bad
// schema is a configuration error naming the tool, quoting nothing of it. tools/list shows the description (a generated one without
// it) and the schema as inputSchema ({"type": "object"} without one), and
// annotations from the EffectSpec: readOnlyHint for a read, idempotentHint
// for a write (a repeated call with the same key is answered from its
// record); destructiveHint and openWorldHint keep the protocol's defaults.
// A capability's hints come from its providers (readOnlyHint only when all
// of them read); its description and schema are its own entry's, never a
// provider's, since the pin can change while tools/list is cached. A call
// whose arguments break the schema is invalid_arguments (400) before any
// claim: nothing recorded, nothing sent; a capability call must pass its
// own schema and then the pinned provider's, whose vendor receives the
// arguments. The validator's messages quote the arguments, so the refusal
// has a fixed message that names at most the place in the schema and the
// keyword broken ("at /properties/amount (minimum)"), each checked against
// the schema and the validator's keywords before it is used.
//
// Results. The vendor body is the text content, and also structuredContent
// when it is a JSON object. definitely_rejected and unknown are results with
// isError true. A held call is a result (not an error) with _meta
// dev.obol/approval {"ticket", "status": "pending"}; calling again before
// the decision answers the same ticket.
//
// Federated tools. A tool entry with "broker" names a configured broker; all
// its other members except "spec", "description" and "input_schema" are
// the broker's routing fields (strings), which the broker validates at
// start. The scope's
// connection segment of a federated call is the broker's id.
//
// Capabilities. cap.* names are reserved for capabilities. A capability is
// claimed with the connection segment "unresolved" and the route of the
// pinned provider fingerprinted, so after a pin change an existing key is a
// destination_conflict, never a redispatch. The pin lives in the store, at
// {prefix}pin:{capability} without TTL, so that every refserver process on
// one Redis routes a new key alike: the pin endpoint writes it there (then
// answers), and each capability call reads it with one GET before its claim.
// No stored pin means the configured one. A store error on that read refuses
// the call with store_unavailable, and a stored pin that is not one of the
// capability's providers in this configuration refuses it with internal,
// both before any claim or dispatch. The configured "pin" is only the
// initial value: on start each is stored unless a pin is stored already
// (SET NX), so a restart keeps a pin changed through the endpoint; to return
// to the configured pin, post it. The embedded store behaves the same within
// its one process. A receipt of a capability call names the provider whose
// route matches the record's fingerprint.
//
// Configuration. Loading reads the file with internal/strictjson: it
// refuses a repeated member name (after unescaping) and two names equal up
// to case ({"workspaces": [...], "WORKSPACES": [...]}), members the format
// does not declare by their exact name, invalid UTF-8 and lone surrogates,
// at every depth, and trailing data; and it refuses invalid specs (every problem at once), ids that do not
// match [A-Za-z0-9_.-]{1,128}, API keys shorter than 8 bytes or shared
// between workspaces and approvers, and a secret_env that names an unset or
// empty variable. Errors name the field path, never a value (a member name
// that is not a plain identifier shows as {member N}). The pin body is read
// the same way. A
// connection without secret_env sends no Authorization header. Tools whose
// writes the policy denies in the configured environment are logged at
// start and refused per call with policy_denied. One optional member beyond
// DESIGN.md: "allow_unsupported_writes" (default false), the policy's
// explicit opt-in to writes whose vendor cannot deduplicate (binding
// unsupported, every federated route) in production; such a call whose
// outcome is unknown is never sent again.
//
// The demo (no -config). An in-process vendor on a loopback port serves six
// tools: payments.create_charge (header binding; {"simulate": "503_once"}
// shows the one immediate second attempt), crm.create_contact (body_pointer
// /metadata/idempotency_key), chat.post_message (binding unsupported),
// payments.refund (approval required), email.a and email.b, and the
// capability cap.send_email over the last two. The demo environment is
// "development" so that the policy lets chat.post_message run; in production
// it is policy_denied. The API keys are fixed (printed on start) so that the
// documented curl commands work. GET {vendor}/stats counts vendor requests.
//
// The embedded store (no -redis) is a miniredis in the process, reached over
// loopback with a rueidis client without client-side caching. It is not
// durable and not shared, which the server says loudly on start.
//
// Logs are log/slog text on stderr: one line per call and per attempt with
// workspace, tool, key, outcome and timing. Keys are identifiers, not
// secrets, and are logged; Authorization values, API keys and connection
// secrets never are (error texts pass through a receipt.Redactor of every
// configured secret). Metrics are on their own Prometheus registry.
//
// Admin endpoints. Every /v1 request and /healthz runs under the store
// timeout (2s, the store's read timeout): a store call that does not answer
// in time (Redis down, loading, unreachable) is 503 store_unavailable, never
// a request that hangs. An approve, deny or pin that timed out may still
// have been applied; each is safe to repeat.
//
// Limits and shutdown. Bodies 1 MiB, arguments 256 KiB, /v1 bodies 64 KiB;
// read-header 10s, read 30s, write twice the longest tool timeout plus the
// lease plus 15s, idle 2m. On SIGINT or SIGTERM the server stops accepting
// and waits up to the longest tool timeout plus 5s for in-flight calls; an
// attempt still running then is left in flight, its lease no longer
// renewed, and another gateway takes the slot over once it lapses.
package main
