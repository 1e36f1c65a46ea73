// Package composio is the broker adapter for Composio tool execution.
// Build the [broker.Broker] with [New] and prepare each tool's routing with
// [broker.Prepare]:
//
//	b, err := composio.New(composio.Config{APIKey: os.Getenv("COMPOSIO_API_KEY")})
//	...
//	target, route, err := broker.Prepare(b, "github.create_issue", map[string]string{
//		"tool_slug": "GITHUB_CREATE_AN_ISSUE", "connected_account_id": "ca_123",
//	})
//
// One request per attempt: POST {BaseURL}/api/v3/tools/execute/{tool_slug}
// with the x-api-key header and the connected account, user and arguments
// as the JSON body. Composio answers HTTP 200 for a tool run that failed,
// with "successful": false: its Dispatch reports that as
// [StatusToolFailed], and a 2xx reply that says neither as unknown
// ([broker.ErrUndecidableReply]). Every other status is Composio's own and
// passes through; [parseReply] reads the envelope for callers who want the
// error text.
//
// The exact wire, its sources, and where the choices the contract leaves
// open are made are in the package's README.md.
package composio
