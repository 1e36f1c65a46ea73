package mcpgo_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgo"
	"github.com/obol-gateway/obol/retry"
)

// exampleStore is a store on an in-process miniredis.
func exampleStore() (*redisstore.Store, func()) {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	return store, closeStore
}

// An mcp-go server whose notes.create tool is idempotent: two calls under
// one key, through mcp-go's own client, make one note; the second answer
// is the replay, with the same receipt.
func Example() {
	store, closeStore := exampleStore()
	defer closeStore()

	var notes []string
	s := server.NewMCPServer("notes", "1.0.0")
	s.AddTool(mcp.NewTool("notes.create", mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			notes = append(notes, req.GetString("text", ""))
			return mcp.NewToolResultText(fmt.Sprintf("note %d saved", len(notes))), nil
		})
	spec, err := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	if err != nil {
		panic(err)
	}
	h, err := mcpgo.New(s, mcpgo.Config{
		// The production policy denies in_process writes; a development
		// server runs them.
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}},
		Specs:        []effectspec.Spec{spec},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c, err := client.NewStreamableHttpClient(srv.URL)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		panic(err)
	}
	key := idempotency.NewKey().String()
	for range 2 {
		req := mcp.CallToolRequest{}
		req.Params.Name = "notes.create"
		req.Params.Arguments = map[string]any{"text": "buy milk"}
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{mcpgateway.MetaKey: key}}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			panic(err)
		}
		rc, _ := res.Meta.AdditionalFields[mcpgateway.MetaReceipt].(map[string]any)
		fmt.Println(res.Content[0].(mcp.TextContent).Text, rc["outcome"], rc["replayed"])
	}
	fmt.Println("notes:", len(notes))
	// Output:
	// note 1 saved accepted false
	// note 1 saved accepted true
	// notes: 1
}
