// Command mcpserver is a go-sdk MCP server whose notes.create runs through mcpgateway (README.md).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

func main() {
	store, stop := embeddedStore()
	defer stop()
	gw, err := notesGateway(store)
	if err != nil {
		log.Fatal(err)
	}
	listen(gw)
}

// notesGateway serves notes.create (a write that must not repeat) and notes.count (a read).
func notesGateway(store idempotency.Store) (*mcpgateway.Gateway, error) {
	var mu sync.Mutex
	var notes []string
	create, err := mcpgateway.InProcess(mcpgateway.InProcessTool{Description: `Append a note: {"text": string}.`,
		Spec: effectspec.MustNew(effectspec.Spec{Tool: "notes.create", Effect: effectspec.EffectWrite, Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcess}}),
		Handler: func(_ context.Context, a retry.Attempt) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(a.Arguments, &in); err != nil || in.Text == "" {
				return nil, mcpgateway.Reject(fmt.Errorf(`arguments must be {"text": string}`))
			}
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, in.Text)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("note %d saved", len(notes))}}}, nil
		}})
	if err != nil {
		return nil, err
	}
	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{create}, // production denies in_process writes
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
	if err != nil {
		return nil, err
	}
	gw.AddTool(&mcp.Tool{Name: "notes.count", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(notes))}}, StructuredContent: map[string]int{"count": len(notes)}}, nil
		})
	return gw, nil
}
