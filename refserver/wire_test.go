package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
)

// gateVendor counts every request and holds each request to /slow until
// the test releases it, so a call can be kept in flight without a timer.
type gateVendor struct {
	*httptest.Server
	mu      sync.Mutex
	n       int
	arrived chan struct{}
	release chan struct{}
}

func newGateVendor(t *testing.T) *gateVendor {
	v := &gateVendor{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		v.mu.Lock()
		v.n++
		v.mu.Unlock()
		if r.URL.Path == "/slow" {
			v.arrived <- struct{}{}
			<-v.release
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(func() {
		select {
		case <-v.release:
		default:
			close(v.release)
		}
		v.Close()
	})
	return v
}

func (v *gateVendor) requests() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// rawPost sends body to /mcp as an MCP client would, with the given
// Idempotency-Key (none when empty).
func rawPost(t *testing.T, base, method, auth, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, base+"/mcp", strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// wireError is a JSON-RPC error response as the wire carries it.
type wireError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeWireError(t *testing.T, body []byte) (wireError, errorData) {
	t.Helper()
	var we wireError
	if err := json.Unmarshal(body, &we); err != nil || we.Error == nil || we.JSONRPC != "2.0" {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	var d errorData
	if err := json.Unmarshal(we.Error.Data, &d); err != nil {
		t.Fatalf("error.data %s: %v", we.Error.Data, err)
	}
	return we, d
}

// TestRepeatedMembersNeverDispatch sends a tools/call hidden behind a
// repeated member at each level of the envelope: the front read the first
// duplicate, the SDK the last, so such a message passed the front as "not a
// call" and ran as tools/call. Each is refused with 400 invalid_request,
// without a key, and the vendor sees nothing; the same call sent plainly
// does reach it, so the count can tell.
func TestRepeatedMembersNeverDispatch(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gateway(t, mr, vendor.URL)
	const args = `"arguments":{"amount":1}`
	cases := map[string]string{
		"method":            `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"pay.charge",` + args + `}}`,
		"escaped method":    `{"jsonrpc":"2.0","id":1,"method":"tools/list","meth\u006fd":"tools/call","params":{"name":"pay.charge",` + args + `}}`,
		"method case":       `{"jsonrpc":"2.0","id":1,"Method":"tools/list","method":"tools/call","params":{"name":"pay.charge",` + args + `}}`,
		"jsonrpc":           `{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge",` + args + `}}`,
		"id":                `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"pay.charge",` + args + `}}`,
		"params":            `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"},"params":{"name":"pay.charge",` + args + `}}`,
		"params.name":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","name":"pay.charge",` + args + `}}`,
		"params.name case":  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"nope","name":"pay.charge",` + args + `}}`,
		"params._meta":      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge",` + args + `,"_meta":{},"_meta":{}}}`,
		"inside _meta":      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge",` + args + `,"_meta":{"a":1,"a":2}}}`,
		"_meta ticket case": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge",` + args + `,"_meta":{"dev.obol/approval-ticket":"x","DEV.OBOL/APPROVAL-TICKET":"y"}}}`,
		"inside arguments":  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":1,"amount":2}}}`,
	}
	plain := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge",` + args + `}}`
	before := mr.Keys()
	for name, body := range cases {
		for _, shape := range []string{"alone", "in a batch"} {
			if shape == "in a batch" {
				body = "[" + body + "]"
			}
			t.Run(name+" "+shape, func(t *testing.T) {
				resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, idempotency.NewKey().String(), body)
				we, d := decodeWireError(t, b)
				if resp.StatusCode != 400 || d.Reason != "invalid_request" || d.Status != 400 {
					t.Errorf("%d %s", resp.StatusCode, b)
				}
				if we.Error.Code != codeInvalidRequest {
					t.Errorf("code %d", we.Error.Code)
				}
				if resp.Header.Get("Idempotency-Key") != "" || d.IdempotencyKey != "" {
					t.Errorf("a message refused for repeated members carries a key: %q %s", resp.Header.Get("Idempotency-Key"), b)
				}
			})
		}
	}
	// A batch of one plain call is refused too: one message per POST.
	resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, idempotency.NewKey().String(), "["+plain+"]")
	if _, d := decodeWireError(t, b); resp.StatusCode != 400 || d.Reason != "invalid_request" {
		t.Errorf("batch of one call: %d %s", resp.StatusCode, b)
	}
	if n := vendor.requests(); n != 0 {
		t.Fatalf("the vendor saw %d requests", n)
	}
	if keys := mr.Keys(); !slices.Equal(keys, before) {
		t.Errorf("store keys written: %v, before %v", keys, before)
	}
	resp, b = rawPost(t, p.base, http.MethodPost, e2eKeyOne, idempotency.NewKey().String(), plain)
	if resp.StatusCode != 200 || vendor.requests() != 1 {
		t.Fatalf("the plain call: %d %s; vendor saw %d", resp.StatusCode, b, vendor.requests())
	}
}

// headerRecorder is an http.RoundTripper that adds fixed headers and keeps
// the response headers of every tools/call.
type headerRecorder struct {
	h  http.Header
	mu sync.Mutex
	// calls holds the response headers of each tools/call, in order.
	calls []http.Header
}

func (hr *headerRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range hr.h {
		r.Header[k] = v
	}
	isCall := false
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		isCall = bytes.Contains(b, []byte(`"method":"tools/call"`))
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && isCall {
		hr.mu.Lock()
		hr.calls = append(hr.calls, resp.Header.Clone())
		hr.mu.Unlock()
	}
	return resp, err
}

func (hr *headerRecorder) last(t *testing.T) http.Header {
	t.Helper()
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if len(hr.calls) == 0 {
		t.Fatal("no tools/call went out")
	}
	return hr.calls[len(hr.calls)-1]
}

// recordingSession connects the official client through a headerRecorder.
func recordingSession(t *testing.T, base, apiKey, key string) (*mcp.ClientSession, *headerRecorder) {
	t.Helper()
	hr := &headerRecorder{h: http.Header{"Authorization": {"Bearer " + apiKey}}}
	if key != "" {
		hr.h.Set("Idempotency-Key", key)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "wire", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: hr}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, hr
}

// callRaw is call with arguments sent as given (json.RawMessage allowed).
func callRaw(t *testing.T, s *mcp.ClientSession, params *mcp.CallToolParams) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, params)
	a := answer{res: res, err: err}
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Fatalf("error without JSON-RPC error data: %v", err)
		}
		if err := json.Unmarshal(we.Data, &a.refusal); err != nil {
			t.Fatalf("error.data %s: %v", we.Data, err)
		}
	}
	return a
}

// TestEveryCallAnswerCarriesTheKey drives each kind of refusal through the
// official client: each answer has the Idempotency-Key header, and its
// error.data has reason, status and idempotency_key equal to the header
// (the supplied key, or the one minted for the call).
func TestEveryCallAnswerCarriesTheKey(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gateway(t, mr, vendor.URL)
	check := func(t *testing.T, hr *headerRecorder, a answer, reason string, status int, want string) {
		t.Helper()
		a.wantRefusal(t, reason, status)
		got := hr.last(t).Get("Idempotency-Key")
		if _, err := idempotency.ParseKey(got); err != nil {
			t.Fatalf("%s: Idempotency-Key header %q", reason, got)
		}
		if want != "" && got != want {
			t.Errorf("%s: header %q, want %q", reason, got, want)
		}
		if a.refusal.IdempotencyKey != got {
			t.Errorf("%s: error.data.idempotency_key %q, header %q", reason, a.refusal.IdempotencyKey, got)
		}
	}
	for _, supplied := range []bool{true, false} {
		name := "minted"
		if supplied {
			name = "supplied"
		}
		t.Run(name, func(t *testing.T) {
			key := ""
			if supplied {
				key = idempotency.NewKey().String()
			}
			s, hr := recordingSession(t, p.base, e2eKeyOne, key)
			check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "no.such_tool", Arguments: map[string]any{}}), "unknown_tool", 404, key)
			check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "chat.post", Arguments: map[string]any{}}), "policy_denied", 403, key)
			check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: json.RawMessage(`[1]`)}), "invalid_arguments", 400, key)
			check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{},
				Meta: mcp.Meta{metaTicket: "apt_nope"}}), "invalid_request", 400, key)
			check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{},
				Meta: mcp.Meta{metaTicket: "apt_99999999999999999999999999999999"}}), "not_found", 404, key)
			a := callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{"amount": 1}})
			a.wantOutcomeRaw(t)
			if got := hr.last(t).Get("Idempotency-Key"); got == "" || key != "" && got != key {
				t.Errorf("result: header %q, key %q", got, key)
			}
		})
	}

	key := idempotency.NewKey().String()
	s, hr := recordingSession(t, p.base, e2eKeyOne, key)
	callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{"amount": 1}}).wantOutcomeRaw(t)
	check(t, hr, callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{"amount": 2}}), "request_mismatch", 422, key)

	// in_progress: the first call is held at the vendor until released.
	slowKey := idempotency.NewKey().String()
	first := make(chan answer, 1)
	s1, _ := recordingSession(t, p.base, e2eKeyOne, slowKey)
	go func() { first <- callRaw(t, s1, &mcp.CallToolParams{Name: "pay.slow", Arguments: map[string]any{}}) }()
	<-vendor.arrived
	s2, hr2 := recordingSession(t, p.base, e2eKeyOne, slowKey)
	check(t, hr2, callRaw(t, s2, &mcp.CallToolParams{Name: "pay.slow", Arguments: map[string]any{}}), "in_progress", 409, slowKey)
	close(vendor.release)
	(<-first).wantOutcomeRaw(t)

	// store_unavailable: Redis is gone.
	mr.Close()
	downKey := idempotency.NewKey().String()
	s3, hr3 := recordingSession(t, p.base, e2eKeyOne, downKey)
	check(t, hr3, callRaw(t, s3, &mcp.CallToolParams{Name: "pay.charge", Arguments: map[string]any{"amount": 3}}), "store_unavailable", 503, downKey)
}

func (a answer) wantOutcomeRaw(t *testing.T) {
	t.Helper()
	if a.err != nil || a.res == nil || a.res.IsError {
		t.Fatalf("want a result: err %v", a.err)
	}
}

// TestErrorsNeverQuoteTheRequest sends a card number and a unique marker
// inside many kinds of bad input and checks that no answer, body or header,
// holds either: an error may reach logs and clients that must never see
// what a caller sent.
func TestErrorsNeverQuoteTheRequest(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gateway(t, mr, vendor.URL)
	const card = "4242424242424242"
	marker := "mk" + strings.TrimPrefix(idempotency.NewKey().String(), "idt_")
	secret := card + marker
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
	}
	bodies := map[string]string{
		"name is a number":          call(`{"name":5,"arguments":{"card":"` + secret + `"}}`),
		"name is an object":         call(`{"name":{"card":"` + secret + `"}}`),
		"NaN in arguments":          call(`{"name":"pay.charge","arguments":{"amount":NaN,"card":"` + secret + `"}}`),
		"invalid JSON":              `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"card":"` + secret + `"`,
		"trailing data":             call(`{"name":"pay.charge"}`) + `{"card":"` + secret + `"}`,
		"invalid UTF-8":             call(`{"name":"pay.charge","arguments":{"card":"` + secret + "\xff" + `"}}`),
		"lone surrogate":            call(`{"name":"pay.charge","arguments":{"card":"` + secret + `\ud800"}}`),
		"unknown method":            `{"jsonrpc":"2.0","id":1,"method":"` + secret + `"}`,
		"unknown method notif":      `{"jsonrpc":"2.0","method":"notifications/` + secret + `"}`,
		"huge method":               `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat(secret, 50<<10/len(secret)) + `"}`,
		"method is a number":        `{"jsonrpc":"2.0","id":1,"method":` + card + `}`,
		"jsonrpc version":           `{"jsonrpc":"` + secret + `","id":1,"method":"tools/list"}`,
		"id is an object":           `{"jsonrpc":"2.0","id":{"card":"` + secret + `"},"method":"tools/list"}`,
		"unknown member":            `{"jsonrpc":"2.0","id":1,"method":"tools/list","` + secret + `":1}`,
		"params is an array":        call(`["` + secret + `"]`),
		"params is a string":        call(`"` + secret + `"`),
		"arguments is a string":     call(`{"name":"pay.charge","arguments":"` + secret + `"}`),
		"arguments is an array":     call(`{"name":"pay.charge","arguments":["` + secret + `"]}`),
		"_meta is a string":         call(`{"name":"pay.charge","arguments":{},"_meta":"` + secret + `"}`),
		"ticket is malformed":       call(`{"name":"pay.charge","arguments":{},"_meta":{"dev.obol/approval-ticket":"apt_` + secret + `"}}`),
		"ticket is a number":        call(`{"name":"pay.charge","arguments":{},"_meta":{"dev.obol/approval-ticket":` + card + `}}`),
		"unknown tool":              call(`{"name":"` + secret + `","arguments":{}}`),
		"unknown tool odd name":     call(`{"name":"x y ` + secret + `","arguments":{}}`),
		"repeated member":           call(`{"name":"pay.charge","arguments":{"card":"` + secret + `","card":"` + secret + `"}}`),
		"batch":                     `[` + call(`{"name":"pay.charge","arguments":{"card":"`+secret+`"}}`) + `]`,
		"tools/list bad cursor":     `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + secret + `"}}`,
		"tools/list bad params":     `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":{"card":"` + secret + `"}}}`,
		"initialize bad params":     `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":{"card":"` + secret + `"},"capabilities":"` + secret + `"}}`,
		"initialize bad version":    `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + secret + `","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		"ping with params":          `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"card":"` + secret + `"}}`,
		"resources/read":            `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + secret + `"}}`,
		"prompts/get":               `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + secret + `"}}`,
		"logging/setLevel":          `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"` + secret + `"}}`,
		"response with no request":  `{"jsonrpc":"2.0","id":1,"result":{"card":"` + secret + `"}}`,
		"response with bad error":   `{"jsonrpc":"2.0","id":1,"error":{"code":"` + secret + `"}}`,
		"notification bad params":   `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"card":"` + secret + `"}}}`,
		"request result and method": `{"jsonrpc":"2.0","id":1,"method":"tools/list","result":"` + secret + `"}`,
		"empty body":                ``,
		"nested too deeply":         call(`{"name":"pay.charge","arguments":` + `{"card":"` + secret + `","x":` + strings.Repeat(`{"x":`, 5000) + "1" + strings.Repeat("}", 5001) + `}`),
		"arguments too large":       call(`{"name":"pay.charge","arguments":{"card":"` + strings.Repeat(secret, maxArgBytes/len(secret)+1) + `"}}`),
	}
	check := func(t *testing.T, resp *http.Response, body []byte) {
		t.Helper()
		for _, needle := range []string{card, marker} {
			if bytes.Contains(body, []byte(needle)) {
				t.Errorf("the answer quotes the request: %d %.300s", resp.StatusCode, body)
			}
			for k, vs := range resp.Header {
				for _, v := range vs {
					if strings.Contains(v, needle) {
						t.Errorf("header %s quotes the request: %q", k, v)
					}
				}
			}
		}
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, idempotency.NewKey().String(), body)
			check(t, resp, b)
			if resp.StatusCode >= 400 || bytes.Contains(b, []byte(`"error"`)) {
				we, d := decodeWireError(t, b)
				if d.Reason == "" || d.Status == 0 || we.Error.Message == "" {
					t.Errorf("refusal without reason, status or message: %s", b)
				}
			}
		})
	}
	// The key header and the bearer token are input too.
	for _, h := range [][2]string{{"Idempotency-Key", "idt_" + secret}, {"Authorization", "Bearer " + secret}} {
		req, _ := http.NewRequest(http.MethodPost, p.base+"/mcp", strings.NewReader(call(`{"name":"pay.charge","arguments":{}}`)))
		req.Header.Set("Authorization", "Bearer "+e2eKeyOne)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(h[0], h[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s: %d", h[0], resp.StatusCode)
		}
		check(t, resp, b)
	}
	if n := vendor.requests(); n != 0 {
		t.Errorf("the vendor saw %d requests", n)
	}
}

// TestOtherMethodsOnMCP: anything but POST on /mcp is 405 with Allow: POST,
// with or without a valid API key (before, a valid key reached the SDK and
// got 401).
func TestOtherMethodsOnMCP(t *testing.T) {
	mr := miniredis.RunT(t)
	p := gateway(t, mr, newGateVendor(t).URL)
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch, http.MethodHead} {
		for _, auth := range []string{e2eKeyOne, "", "ob_nobody_key"} {
			resp, b := rawPost(t, p.base, method, auth, "", listBody)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s (auth %q): %d Allow %q %s", method, auth, resp.StatusCode, resp.Header.Get("Allow"), b)
			}
		}
	}
}

// TestClientBasicsThroughFront: the official client still connects, lists
// tools and calls through the
// strict front and the answer rewriting; a notification is answered 202
// with no body.
func TestClientBasicsThroughFront(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gateway(t, mr, vendor.URL)
	s, hr := recordingSession(t, p.base, e2eKeyOne, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// (The client's Ping is not used: go-sdk v1.8.0's client sends ping
	// without the _meta that its own server requires under protocol
	// 2026-07-28. A raw ping is below.)
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	// Arguments are the caller's data: names that differ only in case are
	// two members there.
	a := callRaw(t, s, &mcp.CallToolParams{Name: "pay.charge", Arguments: json.RawMessage(`{"amount":1,"Amount":2}`)})
	a.wantOutcomeRaw(t)
	if hr.last(t).Get("Idempotency-Key") == "" {
		t.Error("no key on the result")
	}
	// The 2025 handshake, by hand: initialize, then the notification.
	resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"protocolVersion":"2025-06-18"`)) {
		t.Errorf("initialize: %d %s", resp.StatusCode, b)
	}
	resp, b = rawPost(t, p.base, http.MethodPost, e2eKeyOne, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted || len(b) != 0 || resp.Header.Get("Idempotency-Key") != "" {
		t.Errorf("notification: %d %q", resp.StatusCode, b)
	}
	// An id that is a string comes back as the same string.
	resp, b = rawPost(t, p.base, http.MethodPost, e2eKeyOne, "", `{"jsonrpc":"2.0","id":"a\u0062","method":"ping"}`)
	var pong struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &pong); err != nil || resp.StatusCode != 200 || pong.ID != "ab" || pong.Result == nil {
		t.Errorf("ping with a string id: %d %s", resp.StatusCode, b)
	}
}
