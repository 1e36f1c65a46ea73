package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/internal/spanattr"
)

// collector stands in for an OpenTelemetry collector: it keeps the bodies
// POSTed to /v1/traces.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	bad    []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			c.bad = append(c.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		}
		c.bodies = append(c.bodies, body)
		c.mu.Unlock()
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(c.Close)
	return c
}

// spans decodes every span received.
func (c *collector) spans(t *testing.T) (all []*tracepb.Span, raw []byte) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bad) > 0 {
		t.Errorf("collector got %q", c.bad)
	}
	for _, b := range c.bodies {
		raw = append(raw, b...)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("not an OTLP export: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				all = append(all, ss.Spans...)
			}
		}
	}
	return all, raw
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			case *commonpb.AnyValue_BoolValue:
				return fmt.Sprint(v.BoolValue)
			}
			return "?"
		}
	}
	return ""
}

// traceVendor answers 201, echoing the request (credential and arguments
// included), and records each request's traceparent.
type traceVendor struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
	states  []string // each request's Tracestate
}

func newTraceVendor(t *testing.T) *traceVendor {
	v := &traceVendor{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.parents = append(v.parents, r.Header.Get("Traceparent"))
		v.states = append(v.states, strings.Join(r.Header.Values("Tracestate"), ","))
		v.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"auth":%q,"args":%s}`, r.Header.Get("Authorization"), body)
	}))
	t.Cleanup(v.Close)
	return v
}

// startTraced runs the gateway in this process on the e2e configuration
// against vendorURL and returns its base URL and a stop that shuts it down
// and returns its exit code.
func startTraced(t *testing.T, vendorURL string) (base string, stderr *syncBuffer, stop func() int) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	// Development: production refuses the embedded store.
	conf := strings.NewReplacer("{{VENDOR}}", vendorURL, `"environment": "production"`, `"environment": "development"`).Replace(e2eConfig)
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_VENDOR_SECRET", e2eSecret)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr = &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", cfgPath}, pw, stderr)
		pw.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		buf := make([]byte, 64<<10)
		var acc []byte
		for {
			n, err := pr.Read(buf)
			acc = append(acc, buf[:n]...)
			for {
				i := bytes.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- string(acc[:i])
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	for l := range lines {
		if _, rest, ok := strings.Cut(l, "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	stopped := false
	stop = func() int {
		stopped = true
		cancel()
		return <-exit
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
		if t.Failed() {
			t.Logf("refserver stderr:\n%s", stderr.String())
		}
	})
	if base == "" {
		t.Fatalf("did not start:\n%s", stderr.String())
	}
	return base, stderr, stop
}

// sessionWith connects an MCP client that sends headers on every request.
func sessionWith(t *testing.T, base string, h http.Header) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "trace", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{h}},
		DisableStandaloneSSE: true, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTracingExportsSpans: with OTEL_EXPORTER_OTLP_ENDPOINT set, the
// gateway exports over OTLP/HTTP, flushed at shutdown, a tools/call span
// per call with the claim, attempt and finalize beneath it. The call's span
// is a root in a trace of the gateway's, linked to the client's traceparent
// (the trust boundary: the client's span is not its parent); the vendor
// gets the attempt span's traceparent and none of the client's tracestate;
// and no exported byte holds the connection secret, the API key, an
// argument value or the idempotency key.
func TestTracingExportsSpans(t *testing.T) {
	col := newCollector(t)
	vendor := newTraceVendor(t)
	t.Setenv(envOTLPEndpoint, col.URL)
	base, _, stop := startTraced(t, vendor.URL)

	const (
		clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientParent = "00f067aa0ba902b7"
		argValue     = "memo-trace-value-5531"
		argNum       = 918273645
	)
	k := idempotency.NewKey().String()
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {k},
		"Traceparent": {"00-" + clientTrace + "-" + clientParent + "-01"}, "Tracestate": {"clientvendor=ct-state-7781"}}
	s := sessionWith(t, base, h)
	first := call(t, s, "pay.charge", map[string]any{"amount": argNum, "memo": argValue}, "")
	first.wantOutcome(t, "accepted", false)
	// The same key with other arguments: refused before any send.
	call(t, s, "pay.charge", map[string]any{"amount": argNum + 1, "memo": argValue}, "").wantRefusal(t, "request_mismatch", 422)

	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	spans, raw := col.spans(t)
	byName := map[string][]*tracepb.Span{}
	for _, sp := range spans {
		byName[sp.Name] = append(byName[sp.Name], sp)
	}
	if len(byName["tools/call"]) != 2 || len(byName["obol.claim"]) != 2 || len(byName["obol.attempt"]) != 1 || len(byName["obol.finalize"]) != 1 {
		t.Fatalf("exported spans: %v", byName)
	}
	var root, refused *tracepb.Span
	for _, sp := range byName["tools/call"] {
		if spanAttr(sp, spanattr.Outcome) == "accepted" {
			root = sp
		} else if spanAttr(sp, "obol.refusal") == "request_mismatch" {
			refused = sp
		}
	}
	if root == nil || refused == nil {
		t.Fatalf("tools/call spans %v", byName["tools/call"])
	}
	for k, want := range map[string]string{spanattr.Tool: "pay.charge", spanattr.Workspace: "ws_one",
		spanattr.KeySource: "supplied", spanattr.AttemptCount: "1", spanattr.Status: "201"} {
		if got := spanAttr(root, k); got != want {
			t.Errorf("tools/call %s = %q, want %q", k, got, want)
		}
	}
	for _, sp := range byName["tools/call"] {
		if hex.EncodeToString(sp.TraceId) == clientTrace || len(sp.ParentSpanId) != 0 {
			t.Errorf("tools/call span in trace %x under %x, want a root of the gateway's own trace", sp.TraceId, sp.ParentSpanId)
		}
		if len(sp.Links) != 1 || hex.EncodeToString(sp.Links[0].TraceId) != clientTrace || hex.EncodeToString(sp.Links[0].SpanId) != clientParent ||
			sp.Links[0].TraceState != "" {
			t.Errorf("tools/call span links %v, want one to the client's span, without its tracestate", sp.Links)
		}
	}
	if bytes.Contains(raw, []byte("ct-state-7781")) {
		t.Error("the client's tracestate in the exported spans")
	}
	children := 0
	for _, sp := range spans {
		if bytes.Equal(sp.ParentSpanId, root.SpanId) {
			children++
			if !bytes.Equal(sp.TraceId, root.TraceId) {
				t.Errorf("%s in another trace", sp.Name)
			}
		}
	}
	if children != 3 {
		t.Errorf("%d spans under the call's, want claim, attempt and finalize", children)
	}
	attempt := byName["obol.attempt"][0]
	if !bytes.Equal(attempt.ParentSpanId, root.SpanId) || spanAttr(attempt, spanattr.Binding) != "header" ||
		spanAttr(attempt, spanattr.Phase) != "responded" {
		t.Errorf("attempt span %v", attempt)
	}
	vendor.mu.Lock()
	parents, states := vendor.parents, vendor.states
	vendor.mu.Unlock()
	if want := fmt.Sprintf("00-%x-%x-01", attempt.TraceId, attempt.SpanId); len(parents) != 1 || parents[0] != want {
		t.Errorf("vendor got traceparent %q, want %q", parents, want)
	}
	if len(states) != 1 || states[0] != "" {
		t.Errorf("vendor got tracestate %q, want none", states)
	}

	if l := secrettest.Leak(raw, e2eSecret, e2eKeyOne); l != "" {
		t.Errorf("a secret (%s) in the exported spans", l)
	}
	for _, s := range []string{argValue, fmt.Sprint(argNum), fmt.Sprint(argNum + 1), k, strings.TrimPrefix(k, "idt_"), first.rc.VendorKey,
		strings.TrimPrefix(first.rc.VendorKey, "idt_")} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("%q in the exported spans", s)
		}
	}
}

// TestTracingClientCannotUnsample: a client whose traceparent says "not
// sampled" still gets its call traced and exported, and the vendor gets a
// sampled traceparent of the gateway's trace: sampling is the gateway's
// decision, not the client's.
func TestTracingClientCannotUnsample(t *testing.T) {
	col := newCollector(t)
	vendor := newTraceVendor(t)
	t.Setenv(envOTLPEndpoint, col.URL)
	base, _, stop := startTraced(t, vendor.URL)
	const clientTrace = "0af7651916cd43dd8448eb211c80319c"
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {idempotency.NewKey().String()},
		"Traceparent": {"00-" + clientTrace + "-b7ad6b7169203331-00"}}
	call(t, sessionWith(t, base, h), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	spans, _ := col.spans(t)
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name)
		if hex.EncodeToString(sp.TraceId) == clientTrace {
			t.Errorf("%s in the client's trace", sp.Name)
		}
	}
	if len(spans) != 4 {
		t.Errorf("exported %q, want the call's span, claim, attempt and finalize", names)
	}
	vendor.mu.Lock()
	defer vendor.mu.Unlock()
	if len(vendor.parents) != 1 || !strings.HasSuffix(vendor.parents[0], "-01") || strings.Contains(vendor.parents[0], clientTrace) {
		t.Errorf("vendor got traceparent %q, want a sampled one of the gateway's trace", vendor.parents)
	}
}

// TestNoTracingWithoutEndpoint: without OTEL_EXPORTER_OTLP_ENDPOINT the
// vendor gets no traceparent, and a client's is not forwarded.
func TestNoTracingWithoutEndpoint(t *testing.T) {
	t.Setenv(envOTLPEndpoint, "")
	vendor := newTraceVendor(t)
	base, _, stop := startTraced(t, vendor.URL)
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {idempotency.NewKey().String()},
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	call(t, sessionWith(t, base, h), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	vendor.mu.Lock()
	defer vendor.mu.Unlock()
	if len(vendor.parents) != 1 || vendor.parents[0] != "" {
		t.Errorf("vendor got traceparent %q", vendor.parents)
	}
}

// TestTracingExportFailure: a collector that refuses the export changes no
// call; the gateway says an export failed, without the endpoint (which may
// carry credentials), and exits cleanly.
func TestTracingExportFailure(t *testing.T) {
	var exports atomic.Int64
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		exports.Add(1)
		http.Error(w, "no", http.StatusBadRequest) // not retryable
	}))
	t.Cleanup(col.Close)
	vendor := newTraceVendor(t)
	t.Setenv(envOTLPEndpoint, strings.Replace(col.URL, "http://", "http://user:collector-pw-zz91@", 1))
	base, stderr, stop := startTraced(t, vendor.URL)
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {idempotency.NewKey().String()}}
	call(t, sessionWith(t, base, h), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if exports.Load() == 0 { // the flush at shutdown is done when run returns
		t.Error("no export reached the collector")
	}
	out := stderr.String()
	if !strings.Contains(out, "tracing: ") || strings.Contains(out, "collector-pw-zz91") || strings.Contains(out, col.URL[len("http://"):]) {
		t.Errorf("stderr:\n%s", out)
	}
}

// TestTracingConfigErrorsQuoteNothing: OpenTelemetry's complaint about a
// malformed OTEL_EXPORTER_OTLP_HEADERS reaches the log without the header,
// which holds a credential.
func TestTracingConfigErrorsQuoteNothing(t *testing.T) {
	col := newCollector(t)
	vendor := newTraceVendor(t)
	t.Setenv(envOTLPEndpoint, col.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key-hdr-secret-zz42")
	base, stderr, stop := startTraced(t, vendor.URL)
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {idempotency.NewKey().String()}}
	call(t, sessionWith(t, base, h), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := stderr.String()
	if !strings.Contains(out, "tracing: parse headers") || strings.Contains(out, "hdr-secret-zz42") {
		t.Errorf("stderr:\n%s", out)
	}
	if spans, _ := col.spans(t); len(spans) == 0 {
		t.Error("no span exported")
	}
}
