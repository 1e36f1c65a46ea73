package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
)

// Row 7's fixed names: the upstream's write tool and the name both servers
// in front of it serve it under.
const (
	upstreamTool = "create_ticket"
	proxyTool    = "desk.create_ticket"
	upstreamPath = "/mcp"
)

// upstream is row 7's upstream MCP server, in the harness's process as
// row 4's vendor is: a go-sdk server (stateless, JSON answers) with one
// write tool. It checks the connection's secret, and counts executions and
// the vendor keys they carried in params._meta.
type upstream struct {
	url  string
	srv  *http.Server
	runs atomic.Int64

	mu      sync.Mutex
	keys    map[string]bool
	badKeys int // executions without a key, or with a key seen before
}

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{url: "http://" + ln.Addr().String() + upstreamPath, keys: map[string]bool{}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := mcp.NewServer(&mcp.Implementation{Name: "obol-bench-desk", Version: "0.1.0"}, &mcp.ServerOptions{Logger: quiet})
	s.AddTool(&mcp.Tool{Name: upstreamTool, Description: "Open a support ticket.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"customer":{"type":"string"}},"required":["title"]}`)},
		u.createTicket)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: quiet,
	})
	auth := "Bearer " + vendorSecret
	mux := http.NewServeMux()
	mux.Handle(upstreamPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != auth {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

// createTicket is the write tool: one execution per call it receives.
func (u *upstream) createTicket(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := u.runs.Add(1)
	key, _ := req.Params.Meta[effectspec.DefaultMetaName].(string)
	u.mu.Lock()
	if !strings.HasPrefix(key, "idt_") || u.keys[key] {
		u.badKeys++
	}
	u.keys[key] = true
	u.mu.Unlock()
	id := "tk_" + strconv.FormatInt(n, 10)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "Opened ticket " + id + "."}},
		StructuredContent: json.RawMessage(`{"id":"` + id + `","status":"open","priority":"normal"}`),
	}, nil
}

// forget drops the keys seen so far: a measurement checks its own.
func (u *upstream) forget() {
	u.mu.Lock()
	clear(u.keys)
	u.badKeys = 0
	u.mu.Unlock()
}

// checkKeys fails if an execution since forget had no vendor key or one
// seen before: each call must reach the upstream once, with its own key.
func (u *upstream) checkKeys() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.badKeys > 0 {
		return fmt.Errorf("%d of %d executions carried no vendor key in _meta[%q] or a key seen before", u.badKeys, len(u.keys), effectspec.DefaultMetaName)
	}
	return nil
}

func (u *upstream) close() { u.srv.Close() }

// upstreamLoad is row 7's load on u.
func upstreamLoad(u *upstream) load {
	return load{tool: proxyTool, args: `{"title":"Printer on fire","customer":"cus_%d"}`, seen: u.runs.Load}
}
