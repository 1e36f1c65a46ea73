// Command example serves an mcp-go server whose notes.create tool is
// idempotent through the mcpgo adapter, on POST /mcp:
//
//	go run ./example                      # an in-process miniredis store
//	go run ./example -redis redis://127.0.0.1:6379/0
//
// Call notes.create twice with one Idempotency-Key header (or _meta
// dev.obol/idempotency-key): the second answer is the replay, and the log
// shows one note.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgo"
	"github.com/obol-gateway/obol/retry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisURL := flag.String("redis", "", "Redis URL of the store; empty: an in-process miniredis (nothing survives a restart)")
	flag.Parse()

	store, closeStore, err := openStore(context.Background(), *redisURL)
	if err != nil {
		log.Fatal(err)
	}
	defer closeStore()

	var mu sync.Mutex
	var notes []string
	s := server.NewMCPServer("notes", "1.0.0")
	s.AddTool(mcp.NewTool("notes.create", mcp.WithDescription("Saves a note."), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, req.GetString("text", ""))
			log.Printf("note %d saved: %q", len(notes), notes[len(notes)-1])
			return mcp.NewToolResultText(fmt.Sprintf("note %d saved", len(notes))), nil
		})
	spec, err := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	if err != nil {
		log.Fatal(err)
	}
	h, err := mcpgo.New(s, mcpgo.Config{
		// A development policy: the production one denies in_process
		// writes, whose unknown outcome can never be retried.
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}},
		Specs:        []effectspec.Spec{spec},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	log.Printf("serving POST http://%s/mcp", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// openStore connects to Redis at url, or starts an in-process miniredis
// when url is empty.
func openStore(ctx context.Context, url string) (*redisstore.Store, func(), error) {
	if url == "" {
		return embedded.New(ctx, redisstore.Options{})
	}
	opt, err := redisstore.ParseURL(url)
	if err != nil {
		return nil, nil, err
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, err
	}
	store, err := redisstore.New(ctx, rc, redisstore.Options{})
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); rc.Close() }, nil
}
