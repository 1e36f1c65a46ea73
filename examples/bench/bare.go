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
	"runtime/pprof"
	"runtime/trace"
	"slices"
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
	return serveForward(ctx, "bare server", false, args, stdout, stderr)
}

// serveForward runs row 4's bare server, or with limit its limit server
// (serveLimit): flags, the vendor's secret from the environment, listen,
// serve until ctx ends.
func serveForward(ctx context.Context, name string, limit bool, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench ("+name+")", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vendorURL := fs.String("vendor", "", "vendor endpoint `URL`")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address`")
	redisURL := fs.String("redis", "", "Redis `URL`, as refserver's -redis (limit server only)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to `file` until the server stops")
	execTrace := fs.String("exectrace", "", "write a runtime execution trace to `file` until the server stops")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "bench (%s): %s\n", name, fmt.Sprintf(format, a...))
		return code
	}
	secret := os.Getenv(vendorEnv)
	if *vendorURL == "" || secret == "" || limit && *redisURL == "" {
		return fail(2, "-vendor, $%s and, for the limit server, -redis are required", vendorEnv)
	}
	var around func(ctx context.Context, send func() error) error
	if limit {
		lim, err := newLimit(ctx, *redisURL, *vendorURL)
		if err != nil {
			return fail(1, "%v", err)
		}
		defer lim.client.Close()
		around = lim.around
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(1, "%v", err)
	}
	stopProfiles, err := startProfiles(*cpuProfile, *execTrace)
	if err != nil {
		return fail(1, "%v", err)
	}
	defer stopProfiles()
	hs := &http.Server{Handler: forwardHandler(*vendorURL, secret, around), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "%s listening on http://%s\n", name, ln.Addr())
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(1, "%v", err)
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
	return sdkHandler(s, quiet)
}

// sdkHandler serves s as refserver serves its tools: the SDK's stateless
// handler with JSON answers and refserver's body limit, at /mcp, behind a
// Bearer check of the bench's API key.
func sdkHandler(s *mcp.Server, quiet *slog.Logger) http.Handler {
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

// startProfiles starts a CPU profile into cpuFile and an execution trace
// into traceFile, each if named; stop ends both and closes the files. On
// an error nothing is left running.
func startProfiles(cpuFile, traceFile string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return func() {}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return func() {}, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			stop()
			return func() {}, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}
