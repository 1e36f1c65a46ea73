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
// Composio answers HTTP 200 for a tool run that failed, with "successful":
// false: Dispatch reports that as StatusToolFailed, and a 2xx reply that
// says neither as unknown (broker.ErrUndecidableReply). Every other status
// is Composio's own and passes through; ParseReply reads the envelope for
// callers who want the error text. The choices where the contract is silent
// are on the code they govern: parseRouting, send and executePath.
package composio
