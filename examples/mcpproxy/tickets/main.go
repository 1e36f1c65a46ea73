// Command tickets is an upstream MCP server whose create_ticket takes an
// idempotency_key argument and deduplicates on it, as many vendors' MCP
// servers do; -lose N makes it lose its first N answers after the ticket is
// made (examples/mcpproxy/README.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8091", "listen address")
	lose := flag.Int("lose", 0, "lose this many answers (hang up after the ticket is made)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	d := newDesk(int64(*lose))
	log.Printf("tickets: MCP upstream on http://%s/mcp", ln.Addr())
	log.Fatal(http.Serve(ln, d.handler()))
}

// desk is the ticket system: tickets by idempotency key.
type desk struct {
	mu      sync.Mutex
	byKey   map[string]int // idempotency_key -> ticket number
	made    int            // tickets made (executions)
	calls   int            // create_ticket calls received
	lose    atomic.Int64   // answers still to lose
	dropped atomic.Int64
}

func newDesk(lose int64) *desk {
	d := &desk{byKey: map[string]int{}}
	d.lose.Store(lose)
	return d
}

type createIn struct {
	Title          string `json:"title" jsonschema:"the ticket's title"`
	IdempotencyKey string `json:"idempotency_key" jsonschema:"a unique value for every request; a request with a key seen before returns the ticket it made"`
}

type createOut struct {
	Ticket int  `json:"ticket"`
	New    bool `json:"new"`
}

func (d *desk) create(_ context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, createOut, error) {
	if in.Title == "" || in.IdempotencyKey == "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "title and idempotency_key are required"}}}, createOut{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if n, ok := d.byKey[in.IdempotencyKey]; ok {
		return nil, createOut{Ticket: n}, nil
	}
	d.made++
	d.byKey[in.IdempotencyKey] = d.made
	log.Printf("tickets: made ticket %d %q", d.made, in.Title)
	return nil, createOut{Ticket: d.made, New: true}, nil
}

func (d *desk) count(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return nil, map[string]int{"made": d.made, "calls": d.calls, "lost_answers": int(d.dropped.Load())}, nil
}

// handler serves MCP (stateless, JSON answers), and loses an answer by
// hanging up once the tool has run, while d.lose lasts.
func (d *desk) handler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create_ticket", Description: "Open a ticket. Pass a unique idempotency_key for every request."}, d.create)
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "How many tickets were made.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, d.count)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || d.lose.Load() <= 0 || !createCall(r) {
			h.ServeHTTP(w, r)
			return
		}
		rec := &buffered{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusOK && d.lose.Add(-1) >= 0 {
			d.dropped.Add(1)
			fmt.Println("tickets: answer lost")
			panic(http.ErrAbortHandler) // the connection closes without an answer
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	})
}

// createCall reports whether r is a tools/call of create_ticket, and
// leaves r's body as it was.
func createCall(r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.Params.Name == "create_ticket"
}

// buffered holds an answer until the handler decides to send or lose it.
type buffered struct {
	header http.Header
	status int
	body   []byte
}

func (b *buffered) Header() http.Header { return b.header }
func (b *buffered) WriteHeader(s int) {
	if b.status == 0 {
		b.status = s
	}
}
func (b *buffered) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.body = append(b.body, p...)
	return len(p), nil
}
