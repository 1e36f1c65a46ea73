package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/retry"
)

// serveBare is the reference server of row 4, run as its own process (the
// harness starts itself with OBOL_BENCH_ROLE=bare): the same go-sdk MCP server
// as refserver (stateless, JSON answers, the same body limit) with a Bearer
// check and one tool whose handler forwards the arguments to the vendor
// with a retry.Executor, exactly as refserver's target does, and renders the
// answer as refserver does. What it leaves out is the promise: no key
// resolution, no request hash, no claim, no finalize, no receipt, no log
// line per call.
func serveBare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench (bare server)", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vendorURL := fs.String("vendor", "", "vendor endpoint `URL`")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	secret := os.Getenv(vendorEnv)
	if *vendorURL == "" || secret == "" {
		fmt.Fprintf(stderr, "bench (bare server): -vendor and $%s are required\n", vendorEnv)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "bench (bare server): %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: forwardHandler(*vendorURL, secret, nil), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "bare server listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "bench (bare server): %v\n", err)
		return 1
	}
	return 0
}

// forwardHandler is the bare server's handler. If around is non-nil (the
// limit server), the tool's vendor call runs inside it, and its error fails
// the call.
func forwardHandler(vendorURL, secret string, around func(ctx context.Context, send func() error) error) http.Handler {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	exec := &retry.Executor{}
	auth := "Bearer " + secret
	s := mcp.NewServer(&mcp.Implementation{Name: "obol-bench-bare", Version: "0.1.0"}, &mcp.ServerOptions{Logger: quiet})
	s.AddTool(&mcp.Tool{Name: mcpTool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			body := []byte(req.Params.Arguments)
			if len(bytes.TrimSpace(body)) == 0 {
				body = []byte("{}")
			}
			hr, err := http.NewRequestWithContext(ctx, http.MethodPost, vendorURL, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Authorization", auth)
			var res retry.Result
			if around == nil {
				res = exec.Do(ctx, hr)
			} else if err := around(ctx, func() error { res = exec.Do(ctx, hr); return nil }); err != nil {
				return nil, err
			}
			out := &mcp.CallToolResult{IsError: res.Phase != retry.Responded || res.Status < 200 || res.Status > 299}
			text := string(res.Body)
			if res.Err != nil {
				text = res.Err.Error()
			}
			if t := bytes.TrimSpace(res.Body); len(t) > 0 && t[0] == '{' && json.Valid(t) {
				out.StructuredContent = json.RawMessage(t)
			}
			out.Content = []mcp.Content{&mcp.TextContent{Text: text}}
			return out, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, MaxRequestBodyBytes: 1 << 20, Logger: quiet,
	})
	want := []byte("Bearer " + mcpAPIKey)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	return mux
}
