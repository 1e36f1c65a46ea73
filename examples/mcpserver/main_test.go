package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway"
)

// TestNotesThroughTheSDKClient drives the server with the official go-sdk
// client: notes.create twice under one _meta key leaves one note and the
// second answer is the replay; another key makes a second note;
// notes.count answers {"count": N} as structured content.
func TestNotesThroughTheSDKClient(t *testing.T) {
	store, stop := embeddedStore()
	defer stop()
	gw, err := notesGateway(store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	create := func(key string) (text string, replayed bool) {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "notes.create", Arguments: map[string]any{"text": "buy milk"},
			Meta: mcp.Meta{mcpgateway.MetaKey: key}})
		if err != nil || res.IsError {
			t.Fatalf("notes.create: %v %+v", err, res)
		}
		rc, _ := res.Meta[mcpgateway.MetaReceipt].(map[string]any)
		if rc["idempotency_key"] != key || rc["outcome"] != "accepted" {
			t.Fatalf("receipt %v", rc)
		}
		return res.Content[0].(*mcp.TextContent).Text, rc["replayed"] == true
	}
	count := func() float64 {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "notes.count"})
		if err != nil || res.IsError {
			t.Fatalf("notes.count: %v %+v", err, res)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		n, ok := sc["count"].(float64)
		if !ok {
			t.Fatalf("structured content %v", res.StructuredContent)
		}
		return n
	}
	key := idempotency.NewKey().String()
	if text, replayed := create(key); text != "note 1 saved" || replayed {
		t.Errorf("first: %q replayed %v", text, replayed)
	}
	if text, replayed := create(key); text != "note 1 saved" || !replayed {
		t.Errorf("same key: %q replayed %v, want the replay", text, replayed)
	}
	if n := count(); n != 1 {
		t.Errorf("count %v after one key, want 1", n)
	}
	if text, replayed := create(idempotency.NewKey().String()); text != "note 2 saved" || replayed {
		t.Errorf("another key: %q replayed %v", text, replayed)
	}
	if n := count(); n != 2 {
		t.Errorf("count %v after two keys, want 2", n)
	}
}
