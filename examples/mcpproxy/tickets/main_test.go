package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/internal/upstreamtest"
)

func TestMain(m *testing.M) { refservertest.Main(m) }

// TestREADME runs examples/mcpproxy/README.md: refserver, configured by
// ../obol.json, in front of this ticket desk (losing its first answer) and
// of an Obol-fronted notes server (here a stand-in that deduplicates on
// _meta["dev.obol/idempotency-key"], as examples/mcpserver does). A lost
// answer, retried under the same key with a regenerated idempotency_key,
// makes one ticket; a notes call is made once and replayed.
func TestREADME(t *testing.T) {
	d := newDesk(1)
	desk := httptest.NewServer(d.handler())
	defer desk.Close()
	notes := upstreamtest.Start(t, upstreamtest.Options{Dedup: true, Tools: []upstreamtest.Tool{{Name: "notes.create",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}}})

	conf, err := os.ReadFile("../obol.json")
	if err != nil {
		t.Fatal(err)
	}
	c := strings.NewReplacer("http://127.0.0.1:8090/mcp", notes.URL, "http://127.0.0.1:8091/mcp", desk.URL+"/mcp").Replace(string(conf))
	if c == string(conf) {
		t.Fatal("obol.json names neither upstream's address")
	}
	path := filepath.Join(t.TempDir(), "obol.json")
	if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
		t.Fatal(err)
	}
	s := refservertest.Start(t, refservertest.Options{Args: []string{"-config", path}})
	s.WaitLog("upstream MCP tools imported", 1)
	cl := refservertest.Client{Base: s.Base, APIKey: "ob_demo_acme_key"}
	ctx := context.Background()

	const key = "idt_5c1f0a2b3c4d5e6f708192a3b4c5d6e8"
	first := cl.CallTool(ctx, refservertest.Request{Tool: "tickets.create", Key: key,
		Args: map[string]string{"title": "printer on fire", "idempotency_key": "model-made-1"}})
	if first.Error != nil || first.Result.Meta.Receipt.Outcome != "unknown" {
		t.Fatalf("the lost answer: %s", first)
	}
	again := cl.CallTool(ctx, refservertest.Request{Tool: "tickets.create", Key: key,
		Args: map[string]string{"title": "printer on fire", "idempotency_key": "model-made-2"}})
	rc := again.Result.Meta.Receipt
	if again.Error != nil || rc.Outcome != "accepted" || rc.AttemptCount != 2 || string(again.Result.StructuredContent) != `{"new":false,"ticket":1}` {
		t.Fatalf("the retry: %s", again)
	}
	d.mu.Lock()
	made, calls := d.made, d.calls
	d.mu.Unlock()
	if made != 1 || calls != 2 || d.dropped.Load() != 1 {
		t.Errorf("the desk made %d tickets of %d calls, lost %d answers; want 1 of 2, 1 lost", made, calls, d.dropped.Load())
	}

	for i, want := range []bool{false, true} {
		r := cl.CallTool(ctx, refservertest.Request{Tool: "notes.create", Key: "idt_5c1f0a2b3c4d5e6f708192a3b4c5d6e9",
			Args: map[string]string{"text": "buy milk"}})
		if rc := r.Result.Meta.Receipt; r.Error != nil || rc.Outcome != "accepted" || rc.Replayed != want || rc.Binding != "meta" {
			t.Fatalf("notes call %d: %s", i+1, r)
		}
	}
	if got := notes.Total(); got.Executed != 1 || got.Received != 1 {
		t.Errorf("notes upstream: %+v, want one call executed", got)
	}
}
