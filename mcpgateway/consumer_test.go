package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// consumerMain is a whole consumer written from go doc alone: the embedded
// store, one in-process tool and one HTTP route, served on os.Args[2] with
// the vendor at os.Args[1].
const consumerMain = `package main

import (
	"context"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

func main() {
	store, _, _ := embedded.New(context.Background(), redisstore.Options{})
	noteSpec, _ := effectspec.Parse([]byte(` + "`" + `{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}` + "`" + `))
	note, _ := mcpgateway.InProcess(mcpgateway.InProcessTool{Spec: noteSpec, Handler: func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil }})
	paySpec, _ := effectspec.Parse([]byte(` + "`" + `{"tool": "pay.charge", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}` + "`" + `))
	route, _ := idempotency.NewRoute(paySpec, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay", URL: os.Args[1], Credential: idempotency.NoCredential})
	pay := mcpgateway.Tool{Spec: paySpec, Connection: "conn_pay", Route: route, Target: &retry.HTTPTarget{URL: os.Args[1]}}
	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{note, pay},
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
	if err != nil {
		panic(err)
	}
	panic(http.ListenAndServe(os.Args[2], gw))
}
`

// The consumer of the documented path fits in 30 lines, builds against this
// module as a fresh module would, serves both tools and replays.
func TestConsumerFromDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	if n := strings.Count(consumerMain, "\n"); n > 30 {
		t.Fatalf("the consumer has %d lines, want at most 30", n)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module consumer\n\ngo 1.24\n\nrequire github.com/obol-gateway/obol v0.0.0\n\nreplace github.com/obol-gateway/obol => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": []byte(consumerMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "consumer")
	build := exec.Command("go", "build", "-o", bin, ".")
	// Offline: every module comes from this module's go.sum and the cache.
	build.Dir, build.Env = dir, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var charges atomic.Int32
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id": "ch_1"}`))
	}))
	defer vendor.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, vendor.URL+"/v1/charges", addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()

	call := func(tool, key string) map[string]any {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"amount":500}}}`
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("the consumer does not answer: %v\n%s", err, stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			var out struct {
				Result struct {
					Meta map[string]any `json:"_meta"`
				} `json:"result"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			rc, _ := out.Result.Meta["dev.obol/receipt"].(map[string]any)
			if err != nil || rc == nil {
				t.Fatalf("%s: status %d, no receipt (%v)", tool, resp.StatusCode, err)
			}
			return rc
		}
	}
	noteKey, payKey := idempotency.NewKey().String(), idempotency.NewKey().String()
	first, second := call("notes.create", noteKey), call("notes.create", noteKey)
	if first["outcome"] != "accepted" || first["replayed"] != false || second["replayed"] != true {
		t.Fatalf("in-process call and its replay: %v, %v", first, second)
	}
	delete(first, "replayed")
	delete(second, "replayed")
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if !bytes.Equal(a, b) {
		t.Errorf("the replay's receipt differs:\n%s\n%s", a, b)
	}
	if rc := call("pay.charge", payKey); rc["outcome"] != "accepted" || rc["status"] != float64(201) {
		t.Errorf("HTTP route: %v", rc)
	}
	if rc := call("pay.charge", payKey); rc["replayed"] != true || charges.Load() != 1 {
		t.Errorf("HTTP route replay: %v, vendor charged %d times", rc, charges.Load())
	}
}
