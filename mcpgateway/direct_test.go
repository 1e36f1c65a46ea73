package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// directPair is one gateway served twice: as it is (the front answers
// tools/call itself) and with every message through the SDK.
type directPair struct {
	direct, sdk http.Handler
	answered    atomic.Int64 // calls the front answered itself
}

// newDirectPair serves tools that answer 201 (JSON with escapes, and text
// with invalid UTF-8), 400 and, unless stable, 500: a call on an unknown
// slot makes another attempt, so its answers change from call to call.
func newDirectPair(t testing.TB, stable bool) *directPair {
	t.Helper()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"ch_1","note":"<&> \u2028 é \"q\" \\","n":[1,2.5e3]}`)
		case "/text":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte("plain \xff text <b>\t\n"))
		case "/rej":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"card declined"}}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(vendor.Close)
	tool := func(spec, path string) Tool {
		sp, err := effectspec.Parse([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay", URL: vendor.URL + path, Credential: "PAY_KEY"})
		if err != nil {
			t.Fatal(err)
		}
		return Tool{Spec: sp, Connection: "conn_pay", Route: rt, Target: &retry.HTTPTarget{URL: vendor.URL + path}}
	}
	const status = `"status": {"accepted": [200, 201], "definitely_rejected": [400]}`
	ok := tool(`{"tool": "pay.ok", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, `+status+`}`, "/ok")
	sc, err := ParseInputSchema(json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ok.InputSchema = sc
	tools := []Tool{ok,
		tool(`{"tool": "pay.text", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, `+status+`}`, "/text"),
		tool(`{"tool": "pay.rej", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, `+status+`}`, "/rej"),
		tool(`{"tool": "pay.held", "approval": "required", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, `+status+`}`, "/ok"),
	}
	if !stable {
		tools = append(tools, tool(`{"tool": "pay.err", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, `+status+`}`, "/err"))
	}
	gw, err := New(Config{
		Orchestrator: &retry.Orchestrator{Store: miniStore(t)},
		Authenticate: func(tok string) (string, bool) { return "ws_t", tok == "ob_t_key" },
		Tools:        tools,
		Capabilities: []Capability{{Name: "cap.pay", Providers: []string{"pay.ok", "pay.text"}, Pin: "pay.ok"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &directPair{direct: gw.handler, sdk: gw.mcpHandlerDirect(gw.mcp, false)}
	gw.direct.OnServe = func() { p.answered.Add(1) }
	return p
}

// directReq is one request of the comparison.
type directReq struct {
	body   string
	header map[string]string // set over the defaults; "" deletes
	host   string
}

func (d directReq) send(h http.Handler) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(d.body))
	if d.host != "" {
		r.Host = d.host
	}
	r.Header.Set("Authorization", "Bearer ob_t_key")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range d.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// volatile are the parts of an answer that differ between two fresh calls:
// minted keys, vendor keys, ticket ids, times, request ids.
var volatile = regexp.MustCompile(`idt_[0-9a-f]{32}|apt_[0-9A-Za-z_-]+|"20\d\d-\d\d-\d\dT[0-9:.]+Z"`)

// answerText is what two equal answers share: the status, the headers a
// client reads and the body, volatile parts replaced.
func answerText(w *httptest.ResponseRecorder) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", w.Code)
	for _, k := range []string{"Content-Type", "Cache-Control", "Idempotency-Key", "Retry-After", "Www-Authenticate", "Allow"} {
		fmt.Fprintf(&b, "%s: %s\n", k, w.Header().Get(k))
	}
	if cl := w.Header().Get("Content-Length"); cl != "" && cl != strconv.Itoa(w.Body.Len()) {
		fmt.Fprintf(&b, "Content-Length %s of a %d-byte body\n", cl, w.Body.Len())
	}
	b.Write(w.Body.Bytes())
	return volatile.ReplaceAllString(b.String(), "V")
}

// compare sends d to the direct gateway, then to the SDK one, then to the
// direct one again: a call the first send recorded is replayed by both
// later ones, whose answers must be the same bytes; a fresh call (a minted
// key each time) must be the same but for its volatile parts.
func (p *directPair) compare(t *testing.T, d directReq) (direct bool) {
	t.Helper()
	d.send(p.direct)
	sdk := d.send(p.sdk)
	before := p.answered.Load()
	again := d.send(p.direct)
	direct = p.answered.Load() > before
	if a, b := answerText(again), answerText(sdk); a != b {
		t.Errorf("%s\ndirect:\n%s\nSDK:\n%s", d.body, a, b)
	} else if bytes.Contains(again.Body.Bytes(), []byte("dev.obol/splice")) {
		t.Errorf("a placeholder left the gateway: %s", again.Body)
	}
	return direct
}

func directBody(id, name, args, meta string) string {
	params := `"name":` + name
	if args != "" {
		params += `,"arguments":` + args
	}
	if meta != "" {
		params += `,"_meta":` + meta
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + `}}`
}

// Every tools/call the front answers itself is the SDK's answer, byte for
// byte (but for what differs between two fresh calls); what it leaves to
// the SDK gets the SDK's answer.
func TestDirectMatchesSDK(t *testing.T) {
	p := newDirectPair(t, false)
	key := func() string { return idempotency.NewKey().String() }
	withKey := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	for _, tc := range []struct {
		name   string
		req    directReq
		direct bool
	}{
		{"accepted, supplied key", directReq{body: directBody("1", `"pay.ok"`, `{"amount":5}`, ""), header: withKey(key())}, true},
		{"accepted, minted key", directReq{body: directBody("2", `"pay.ok"`, `{"amount":5}`, "")}, true},
		{"key in _meta", directReq{body: directBody("3", `"pay.ok"`, `{"amount":5}`, `{"dev.obol/idempotency-key":"`+key()+`"}`)}, true},
		{"string id", directReq{body: directBody(`"req-7"`, `"pay.ok"`, `{}`, ""), header: withKey(key())}, true},
		{"id zero", directReq{body: directBody("0", `"pay.ok"`, ``, ""), header: withKey(key())}, true},
		{"id minus zero", directReq{body: directBody("-0", `"pay.ok"`, `{}`, ""), header: withKey(key())}, true},
		{"id 2^53-1", directReq{body: directBody("9007199254740991", `"pay.ok"`, `{}`, ""), header: withKey(key())}, true},
		{"string id with HTML", directReq{body: directBody(`"<a&b>\u00e9"`, `"pay.ok"`, `{}`, ""), header: withKey(key())}, true},
		{"negative id", directReq{body: directBody("-12", `"pay.ok"`, `null`, ""), header: withKey(key())}, true},
		{"text body, invalid UTF-8", directReq{body: directBody("4", `"pay.text"`, `{}`, ""), header: withKey(key())}, true},
		{"rejected", directReq{body: directBody("5", `"pay.rej"`, `{}`, ""), header: withKey(key())}, true},
		// Minted: each call on an unknown slot makes another attempt.
		{"unknown outcome", directReq{body: directBody("6", `"pay.err"`, `{}`, "")}, true},
		{"held", directReq{body: directBody("7", `"pay.held"`, `{}`, ""), header: withKey(key())}, true},
		{"capability", directReq{body: directBody("8", `"cap.pay"`, `{"amount":5}`, ""), header: withKey(key())}, true},
		{"schema refusal", directReq{body: directBody("9", `"pay.ok"`, `{"amount":0}`, ""), header: withKey(key())}, true},
		{"unknown ticket", directReq{body: directBody("10", `"pay.held"`, `{}`, `{"dev.obol/approval-ticket":"apt_00000000000000000000000000000001"}`), header: withKey(key())}, true},
		{"other _meta", directReq{body: directBody("11", `"pay.ok"`, `{}`, `{"progressToken":3,"x":{"y":[1]}}`), header: withKey(key())}, true},
		{"protocol 2025-06-18", directReq{body: directBody("12", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Mcp-Protocol-Version": "2025-06-18"}}, true},
		{"Content-Type with charset", directReq{body: directBody("13", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Content-Type": "application/json; charset=utf-8"}}, true},
		{"Accept */*", directReq{body: directBody("14", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Accept": "*/*"}}, true},

		{"unknown tool", directReq{body: directBody("20", `"pay.nope"`, `{}`, ""), header: withKey(key())}, false},
		{"new protocol", directReq{body: directBody("21", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Mcp-Protocol-Version": "2026-07-28"}}, false},
		{"unsupported protocol", directReq{body: directBody("22", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Mcp-Protocol-Version": "1999-01-01"}}, false},
		{"no event-stream in Accept", directReq{body: directBody("23", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Accept": "application/json"}}, false},
		{"text/plain", directReq{body: directBody("24", `"pay.ok"`, `{}`, ""), header: map[string]string{"Idempotency-Key": key(), "Content-Type": "text/plain"}}, false},
		{"notification", directReq{body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay.ok"}}`, header: withKey(key())}, false},
		{"tools/list", directReq{body: `{"jsonrpc":"2.0","id":30,"method":"tools/list"}`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.compare(t, tc.req); got != tc.direct {
				t.Errorf("answered by the front: %v, want %v", got, tc.direct)
			}
		})
	}
}

// The rebinding check sees a loopback listener only through a real
// connection (httptest.NewRequest has no local address).
func TestDirectRebindingCheck(t *testing.T) {
	p := newDirectPair(t, true)
	for _, h := range []http.Handler{p.direct, p.sdk} {
		srv := httptest.NewServer(h)
		r, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(directBody("1", `"pay.ok"`, `{}`, "")))
		r.Host = "evil.example"
		r.Header.Set("Authorization", "Bearer ob_t_key")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a loopback server reached as evil.example answered %d", resp.StatusCode)
		}
	}
	if n := p.answered.Load(); n != 0 {
		t.Errorf("the front answered %d rebinding calls itself", n)
	}
}

// FuzzDirect: whatever the body, the gateway answers as the SDK does.
func FuzzDirect(f *testing.F) {
	for _, s := range []string{
		directBody("1", `"pay.ok"`, `{"amount":5}`, ""),
		directBody(`"x"`, `"cap.pay"`, `{}`, `{"dev.obol/idempotency-key":"idt_00000000000000000000000000000001"}`),
		directBody("2", `"pay.held"`, `{}`, `{"dev.obol/approval-ticket":"apt_x"}`),
		directBody("3", `"pay.text"`, `[]`, ""),
		directBody("4", `"pay.rej"`, `{"a":"\u00e9\ud83d\ude00"}`, `{"progressToken":"t"}`),
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay.ok","arguments":{},"extra":1}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"pay.ok","inputResponses":{}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}`,
	} {
		f.Add(s)
	}
	p := newDirectPair(f, true)
	f.Fuzz(func(t *testing.T, body string) {
		p.compare(t, directReq{body: body})
	})
}

// gateHandler is a slog handler whose every record waits for release.
type gateHandler struct {
	slog.Handler
	release chan struct{}
	lines   chan string
}

func (gateHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h gateHandler) Handle(_ context.Context, r slog.Record) error {
	<-h.release
	h.lines <- r.Message
	return nil
}

// A call the front answers leaves whole (its length set, not chunked)
// before its log line is written and OnCall's end runs: the client has the
// answer while both are still held back.
func TestDirectAnswersBeforeLog(t *testing.T) {
	spec := effectspec.MustNew(effectspec.Spec{Tool: "t.run", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcess}})
	tool, err := InProcess(InProcessTool{Spec: spec, Handler: func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	gate := gateHandler{Handler: slog.DiscardHandler, release: make(chan struct{}), lines: make(chan string, 4)}
	ends := make(chan CallEnd, 4)
	gw, err := New(Config{Orchestrator: &retry.Orchestrator{Store: miniStore(t), Policy: effectspec.Policy{Environment: effectspec.Development}},
		Tools: []Tool{tool}, Logger: slog.New(gate),
		OnCall: func(ctx context.Context, c CallStart) (context.Context, func(CallEnd)) {
			return ctx, func(e CallEnd) {
				<-gate.release
				ends <- e
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Close()
	var direct atomic.Int64
	gw.direct.OnServe = func() { direct.Add(1) }

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.run","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(HeaderKey, "idt_00000000000000000000000000000042")
	answered := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err != nil {
			answered <- err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			answered <- err
		case resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) != 0:
			answered <- fmt.Errorf("Content-Length %d for %d bytes, Transfer-Encoding %v", resp.ContentLength, len(b), resp.TransferEncoding)
		case !bytes.Contains(b, []byte(`"outcome":"accepted"`)):
			answered <- fmt.Errorf("answer %s", b)
		default:
			answered <- nil
		}
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(gate.release)
		t.Fatal("the answer waited for the log line or OnCall's end")
	}
	if direct.Load() != 1 {
		t.Fatalf("the front answered %d calls itself, want 1", direct.Load())
	}
	select {
	case m := <-gate.lines:
		t.Fatalf("logged %q while held back", m)
	default:
	}
	close(gate.release)
	for _, want := range []string{"tools/call"} {
		select {
		case m := <-gate.lines:
			if m != want {
				t.Errorf("log line %q, want %q", m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the call's line was never written")
		}
	}
	select {
	case e := <-ends:
		if e.Receipt == nil || e.Receipt.Outcome != effectspec.Accepted {
			t.Errorf("end %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnCall's end never ran")
	}
}
