// Package composio is the broker adapter for Composio tool execution.
//
//	b, err := composio.New(composio.Config{APIKey: os.Getenv("COMPOSIO_API_KEY")})
//	...
//	target, route, err := broker.Prepare(b, "github.create_issue", map[string]string{
//		"tool_slug": "GITHUB_CREATE_AN_ISSUE", "connected_account_id": "ca_123",
//	})
//
// # Wire
//
// One request per attempt:
//
//	POST {BaseURL}/api/v3/tools/execute/{tool_slug}
//	x-api-key: <APIKey>
//	Content-Type: application/json
//
//	{"connected_account_id": "...", "user_id": "...", "arguments": {...}}
//
// (an id absent from the routing is omitted). The reply is
// {"data", "error", "successful", "log_id", ...}, and Composio answers errors
// of the request itself with 4xx/5xx statuses. Sources:
//
//	https://docs.composio.dev/reference/api-reference/tools/postToolsExecuteByToolSlug
//	https://docs.composio.dev/reference/errors
//
// # successful: false
//
// Composio answers HTTP 200 for a tool run that failed, with
// "successful": false. Passing 200 through would let a spec that accepts 200
// record a failed run as accepted. So Dispatch reports a 2xx reply as:
//
//   - "successful": true: the status unchanged;
//   - "successful": false: Responded with StatusToolFailed (424 Failed
//     Dependency: the call depended on the vendor's action, which failed),
//     the body and headers unchanged. 424 is not among the statuses
//     Composio's error reference lists, so it cannot be confused with
//     Composio's own answers. A spec that lists 424 under
//     definitely_rejected says "this tool's failures are clean"; one that
//     does not leaves such calls unknown, the cautious default;
//   - neither (not one JSON object with exactly one boolean "successful", or
//     a body cut at the Executor's limit): post_send with
//     broker.ErrUndecidableReply. The vendor may have acted and the reply
//     cannot say, so the outcome is unknown whatever the spec lists.
//
// Every other status is Composio's own and passes through. ParseReply reads
// the envelope for callers who want the error text.
//
// # Decisions where the contract is silent
//
//   - The routing needs tool_slug and at least one of connected_account_id
//     and user_id; the slug must be 1 to 128 of A-Z a-z 0-9 _ -, so it is one
//     path segment that needs no escaping.
//   - Arguments must be a JSON object (absent reads as {}), as Composio's
//     "arguments" is; they go into the envelope byte for byte.
//   - The API version is v3, as the contract fixes; Composio also serves
//     v3.1 with the same body.
//   - The tool version is not sent, so Composio applies its default.
package composio
