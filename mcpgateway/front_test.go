package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// fakeStore answers Ticket from a map and records every call; every other
// method fails, so a test sees any store access it did not expect.
type fakeStore struct {
	mu        sync.Mutex
	tickets   map[string]idempotency.Ticket
	ticketErr error
	calls     []string
}

func (f *fakeStore) record(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
}

func (f *fakeStore) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

var errFake = errors.New("fake store: not implemented")

func (f *fakeStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	f.record("claim")
	return idempotency.ClaimResult{}, errFake
}
func (f *fakeStore) Reserve(context.Context, idempotency.ReserveRequest) (idempotency.Reservation, error) {
	f.record("reserve")
	return idempotency.Reservation{}, errFake
}
func (f *fakeStore) Renew(context.Context, idempotency.RenewRequest) (time.Time, error) {
	f.record("renew")
	return time.Time{}, errFake
}
func (f *fakeStore) Lease() time.Duration { return 10 * time.Second }
func (f *fakeStore) Finalize(context.Context, idempotency.FinalizeRequest) (idempotency.Record, error) {
	f.record("finalize")
	return idempotency.Record{}, errFake
}
func (f *fakeStore) Lookup(context.Context, idempotency.Scope, idempotency.Key) (idempotency.Record, error) {
	f.record("lookup")
	return idempotency.Record{}, errFake
}
func (f *fakeStore) Decide(context.Context, idempotency.DecideRequest) (idempotency.Ticket, error) {
	f.record("decide")
	return idempotency.Ticket{}, errFake
}
func (f *fakeStore) GiveBack(context.Context, idempotency.GiveBackRequest) error {
	f.record("giveback")
	return errFake
}
func (f *fakeStore) Ticket(_ context.Context, id string) (idempotency.Ticket, error) {
	f.record("ticket")
	if f.ticketErr != nil {
		return idempotency.Ticket{}, f.ticketErr
	}
	t, ok := f.tickets[id]
	if !ok {
		return idempotency.Ticket{}, idempotency.ErrNotFound
	}
	return t, nil
}

// frontResult is what passed the front, or what it refused.
type frontResult struct {
	code    int
	header  http.Header
	body    []byte
	info    *callInfo // nil when the request did not pass
	reached string    // the body the next handler read
}

func callFront(t *testing.T, s *Gateway, h http.Header, body string) frontResult {
	t.Helper()
	var res frontResult
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res.info, _ = r.Context().Value(callInfoKey{}).(*callInfo)
		b, _ := io.ReadAll(r.Body)
		res.reached = string(b)
		w.WriteHeader(http.StatusOK)
	})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	s.mcpFront(next).ServeHTTP(rec, req)
	res.code, res.header, res.body = rec.Code, rec.Header(), rec.Body.Bytes()
	return res
}

// rpcRefusal decodes a JSON-RPC error response of the front.
func rpcRefusal(t *testing.T, body []byte) (id string, code int64, data ErrorData) {
	t.Helper()
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64     `json:"code"`
			Message string    `json:"message"`
			Data    ErrorData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Error == nil || resp.JSONRPC != "2.0" {
		t.Fatalf("not a JSON-RPC error response: %s (%v)", body, err)
	}
	return string(resp.ID), resp.Error.Code, resp.Error.Data
}

const (
	callBody  = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","arguments":{"a":1}}}`
	listBody  = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	goodKey   = "idt_0123456789abcdef0123456789abcdef"
	otherKey  = "idt_ffffffffffffffffffffffffffffffff"
	ticketID  = "apt_00112233445566778899aabbccddeeff"
	acmeAuth  = "Bearer ob_live_acme_2"
	adminAuth = "Bearer ob_admin_key_1"
)

func resumeBody(ticket string) string {
	return `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"open.send","arguments":{},"_meta":{"dev.obol/approval-ticket":"` + ticket + `"}}}`
}

func TestFrontAuth(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	for _, tc := range []struct {
		name string
		auth []string
	}{
		{"missing", nil},
		{"unknown key", []string{"Bearer ob_live_nobody"}},
		{"approver key", []string{adminAuth}},
		{"basic scheme", []string{"Basic ob_live_acme_2"}},
		{"no token", []string{"Bearer "}},
		{"two fields", []string{acmeAuth, acmeAuth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callFront(t, s, http.Header{"Authorization": tc.auth, "Idempotency-Key": {goodKey}}, callBody)
			if r.code != http.StatusUnauthorized || r.info != nil {
				t.Fatalf("code %d, passed %v", r.code, r.info != nil)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate")
			}
			if _, _, d := rpcRefusal(t, r.body); d.Reason != "unauthorized" || d.Status != 401 {
				t.Errorf("data %+v", d)
			}
			if strings.Contains(string(r.body), "ob_live") || strings.Contains(string(r.body), "ob_admin") {
				t.Errorf("refusal echoes the key: %s", r.body)
			}
		})
	}
	for _, auth := range []string{acmeAuth, "bearer ob_live_acme_1", "Bearer ob_live_globex"} {
		r := callFront(t, s, http.Header{"Authorization": {auth}}, callBody)
		want := "ws_acme"
		if strings.HasSuffix(auth, "globex") {
			want = "ws_globex"
		}
		if r.code != http.StatusOK || r.info == nil || r.info.workspace != want {
			t.Errorf("%s: code %d info %+v, want workspace %s", auth, r.code, r.info, want)
		}
	}
	if ops := st.ops(); len(ops) != 0 {
		t.Errorf("store touched: %v", ops)
	}
}

func TestFrontKey(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	auth := http.Header{"Authorization": {acmeAuth}}
	with := func(keys ...string) http.Header {
		h := auth.Clone()
		h["Idempotency-Key"] = keys
		return h
	}

	t.Run("supplied bare", func(t *testing.T) {
		r := callFront(t, s, with(goodKey), callBody)
		if r.code != 200 || r.info.key.String() != goodKey || r.info.source != idempotency.KeySupplied {
			t.Fatalf("code %d info %+v", r.code, r.info)
		}
		if got := r.header.Get("Idempotency-Key"); got != goodKey {
			t.Errorf("response header %q", got)
		}
		if r.reached != callBody {
			t.Errorf("the SDK would read %q, not the body", r.reached)
		}
	})
	t.Run("supplied structured field string", func(t *testing.T) {
		r := callFront(t, s, with(`"`+goodKey+`"`), callBody)
		if r.code != 200 || r.info.key.String() != goodKey || r.header.Get("Idempotency-Key") != goodKey {
			t.Fatalf("code %d info %+v header %q", r.code, r.info, r.header.Get("Idempotency-Key"))
		}
	})
	t.Run("minted", func(t *testing.T) {
		r1 := callFront(t, s, auth, callBody)
		r2 := callFront(t, s, auth, callBody)
		k1, err := idempotency.ParseKey(r1.header.Get("Idempotency-Key"))
		if err != nil || r1.info.source != idempotency.KeyMinted || r1.info.key != k1 {
			t.Fatalf("minted key %q (%v), info %+v", r1.header.Get("Idempotency-Key"), err, r1.info)
		}
		if r2.info.key == k1 {
			t.Error("two calls without a key got the same minted key")
		}
	})
	t.Run("no header on non-call requests", func(t *testing.T) {
		r := callFront(t, s, auth, listBody)
		if r.code != 200 || r.header.Get("Idempotency-Key") != "" {
			t.Errorf("code %d, header %q", r.code, r.header.Get("Idempotency-Key"))
		}
	})
	for _, tc := range []struct {
		name string
		keys []string
		body string
		id   string
	}{
		{"garbage", []string{"nope"}, callBody, "7"},
		{"upper-case hex", []string{strings.ToUpper(goodKey)}, callBody, "7"},
		{"whitespace", []string{" " + goodKey}, callBody, "7"},
		{"sf parameters", []string{`"` + goodKey + `";a=1`}, callBody, "7"},
		{"empty", []string{""}, callBody, "7"},
		{"repeated", []string{goodKey, goodKey}, callBody, "7"},
		{"on tools/list too", []string{"nope"}, listBody, "3"},
	} {
		t.Run("malformed "+tc.name, func(t *testing.T) {
			r := callFront(t, s, with(tc.keys...), tc.body)
			if r.code != http.StatusBadRequest || r.info != nil {
				t.Fatalf("code %d passed %v", r.code, r.info != nil)
			}
			id, code, d := rpcRefusal(t, r.body)
			if d.Reason != "malformed_key" || d.Status != 400 || id != tc.id || code != -32000 {
				t.Errorf("id %s code %d data %+v", id, code, d)
			}
			if r.header.Get("Idempotency-Key") != "" {
				t.Error("a refused key came back as the effective key")
			}
		})
	}
	t.Run("batch with two calls", func(t *testing.T) {
		r := callFront(t, s, with(goodKey), "["+callBody+","+strings.Replace(callBody, `"id":7`, `"id":8`, 1)+"]")
		if _, _, d := rpcRefusal(t, r.body); r.code != 400 || d.Reason != "invalid_request" {
			t.Errorf("code %d data %+v", r.code, d)
		}
	})
	t.Run("batch with one call", func(t *testing.T) {
		r := callFront(t, s, with(goodKey), "["+callBody+","+listBody+"]")
		if _, _, d := rpcRefusal(t, r.body); r.code != 400 || d.Reason != "invalid_request" || r.info != nil {
			t.Errorf("code %d data %+v", r.code, d)
		}
		if r.header.Get("Idempotency-Key") != "" || strings.Contains(string(r.body), goodKey) {
			t.Errorf("a batch got a key: header %q body %s", r.header.Get("Idempotency-Key"), r.body)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open.send","arguments":{"x":"` +
			strings.Repeat("a", defaultMaxRequestBytes) + `"}}}`
		r := callFront(t, s, with(goodKey), big)
		if _, _, d := rpcRefusal(t, r.body); r.code != 413 || d.Reason != "request_too_large" || r.info != nil {
			t.Errorf("code %d data %+v", r.code, d)
		}
	})
	if ops := st.ops(); len(ops) != 0 {
		t.Errorf("store touched: %v", ops)
	}
}

// metaBody is callBody with v as params._meta["dev.obol/idempotency-key"].
func metaBody(v string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","arguments":{"a":1},"_meta":{"` +
		metaKey + `":` + v + `}}}`
}

// TestFrontMetaKey: the key in params._meta follows the header's rules,
// agrees with the header when both come, and is the effective key of the
// answer; everything else is malformed_key with no key in the answer.
func TestFrontMetaKey(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	auth := http.Header{"Authorization": {acmeAuth}}
	with := func(keys ...string) http.Header {
		h := auth.Clone()
		if len(keys) > 0 {
			h["Idempotency-Key"] = keys
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		header []string
		body   string
	}{
		{"bare", nil, metaBody(`"` + goodKey + `"`)},
		{"structured field string", nil, metaBody(`"\"` + goodKey + `\""`)},
		{"escaped", nil, metaBody(`"idt_\u0030` + goodKey[5:] + `"`)},
		{"and the same header", []string{goodKey}, metaBody(`"` + goodKey + `"`)},
		{"and the same header in another form", []string{`"` + goodKey + `"`}, metaBody(`"` + goodKey + `"`)},
		// A key given with a ticket is the call's key: no ticket lookup.
		{"with a ticket", nil, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","arguments":{},` +
			`"_meta":{"dev.obol/approval-ticket":"` + ticketID + `","` + metaKey + `":"` + goodKey + `"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callFront(t, s, with(tc.header...), tc.body)
			if r.code != 200 || r.info == nil || r.info.key.String() != goodKey || r.info.source != idempotency.KeySupplied {
				t.Fatalf("code %d info %+v body %s", r.code, r.info, r.body)
			}
			if got := r.header.Get("Idempotency-Key"); got != goodKey {
				t.Errorf("response header %q", got)
			}
			if r.reached != tc.body {
				t.Error("the body changed on its way to the SDK")
			}
		})
	}
	for _, tc := range []struct {
		name   string
		header []string
		body   string
		id     string
	}{
		{"differs from the header", []string{otherKey}, metaBody(`"` + goodKey + `"`), "7"},
		{"differs from the header in another form", []string{`"` + otherKey + `"`}, metaBody(`"\"` + goodKey + `\""`), "7"},
		{"good, with a malformed header", []string{"nope"}, metaBody(`"` + goodKey + `"`), "7"},
		{"good, with a repeated header", []string{goodKey, goodKey}, metaBody(`"` + goodKey + `"`), "7"},
		{"malformed, with a good header", []string{goodKey}, metaBody(`"nope"`), "7"},
		{"garbage", nil, metaBody(`"sk_live_4242424242424242"`), "7"},
		{"upper-case hex", nil, metaBody(`"` + strings.ToUpper(goodKey) + `"`), "7"},
		{"whitespace", nil, metaBody(`" ` + goodKey + `"`), "7"},
		{"empty", nil, metaBody(`""`), "7"},
		{"a number", nil, metaBody(`4242424242424242`), "7"},
		{"null", nil, metaBody(`null`), "7"},
		{"an object", nil, metaBody(`{"key":"` + goodKey + `"}`), "7"},
		{"an array", nil, metaBody(`["` + goodKey + `"]`), "7"},
		{"on tools/list too", nil, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"` + metaKey + `":"nope"}}}`, "3"},
	} {
		t.Run("malformed "+tc.name, func(t *testing.T) {
			r := callFront(t, s, with(tc.header...), tc.body)
			if r.code != http.StatusBadRequest || r.info != nil {
				t.Fatalf("code %d passed %v", r.code, r.info != nil)
			}
			id, code, d := rpcRefusal(t, r.body)
			if d.Reason != "malformed_key" || d.Status != 400 || id != tc.id || code != -32000 || d.IdempotencyKey != "" {
				t.Errorf("id %s code %d data %+v", id, code, d)
			}
			if r.header.Get("Idempotency-Key") != "" {
				t.Error("a refused key came back as the effective key")
			}
			for _, v := range []string{goodKey, otherKey, "4242", "nope"} {
				if strings.Contains(string(r.body), v) {
					t.Errorf("the refusal quotes %q: %s", v, r.body)
				}
			}
		})
	}
	if ops := st.ops(); len(ops) != 0 {
		t.Errorf("store touched: %v", ops)
	}
}

func TestFrontResume(t *testing.T) {
	tk, _ := idempotency.ParseKey(goodKey)
	const bareTicket = "apt_0123456789abcdef0123456789abcdef"
	st := &fakeStore{tickets: map[string]idempotency.Ticket{
		ticketID: {ID: ticketID, Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_open", Tool: "open.send"}, Key: tk,
			KeySource: idempotency.KeySupplied},
		bareTicket: {ID: bareTicket, Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_open", Tool: "open.send"}, Key: tk},
	}}
	s := newTestGateway(t, st)
	acme := http.Header{"Authorization": {acmeAuth}}

	// No key: the ticket's key, never a fresh one.
	r := callFront(t, s, acme, resumeBody(ticketID))
	if r.code != 200 || r.header.Get("Idempotency-Key") != goodKey || r.info.key != tk {
		t.Fatalf("resume without key: code %d header %q info %+v", r.code, r.header.Get("Idempotency-Key"), r.info)
	}
	// Its source is the held call's, which the record keeps and the
	// receipt shows: the key was not minted here. (The orchestrator reads
	// the ticket again and finds the same key.)
	if r.info.source != idempotency.KeySupplied {
		t.Errorf("source %q, want the ticket's", r.info.source)
	}
	// A ticket that does not say (a store that did not read the record):
	// the key is the ticket's, the source the front's.
	r = callFront(t, s, acme, resumeBody(bareTicket))
	if r.code != 200 || r.info.key != tk || r.info.source != idempotency.KeyMinted {
		t.Errorf("resume of a ticket without a source: code %d info %+v", r.code, r.info)
	}

	// A supplied key is kept as is; the orchestrator refuses a mismatch.
	h := acme.Clone()
	h.Set("Idempotency-Key", otherKey)
	r = callFront(t, s, h, resumeBody(ticketID))
	if r.header.Get("Idempotency-Key") != otherKey || r.info.source != idempotency.KeySupplied {
		t.Errorf("supplied key on resume: header %q info %+v", r.header.Get("Idempotency-Key"), r.info)
	}

	// Another workspace's ticket does not lend its key.
	globex := http.Header{"Authorization": {"Bearer ob_live_globex"}}
	r = callFront(t, s, globex, resumeBody(ticketID))
	if r.code != 200 || r.header.Get("Idempotency-Key") == goodKey || r.info.key == tk {
		t.Errorf("another workspace's ticket: header %q", r.header.Get("Idempotency-Key"))
	}

	// An unknown ticket: a minted key; the handler refuses.
	r = callFront(t, s, acme, resumeBody("apt_99999999999999999999999999999999"))
	if r.code != 200 || r.header.Get("Idempotency-Key") == goodKey || r.info.source != idempotency.KeyMinted {
		t.Errorf("unknown ticket: code %d header %q", r.code, r.header.Get("Idempotency-Key"))
	}
	// A malformed ticket: refused at the front, with the minted key.
	r = callFront(t, s, acme, resumeBody("apt_nope"))
	if _, _, d := rpcRefusal(t, r.body); r.code != 400 || d.Reason != "invalid_request" || r.info != nil ||
		r.header.Get("Idempotency-Key") == "" || d.IdempotencyKey != r.header.Get("Idempotency-Key") {
		t.Errorf("malformed ticket: code %d header %q data %+v", r.code, r.header.Get("Idempotency-Key"), d)
	}
	for _, op := range st.ops() {
		if op != "ticket" {
			t.Errorf("the front made a %s call", op)
		}
	}

	// A store that cannot answer: 503, and nothing passes.
	st.ticketErr = &storeDown{}
	r = callFront(t, s, acme, resumeBody(ticketID))
	if _, _, d := rpcRefusal(t, r.body); r.code != 503 || d.Reason != "store_unavailable" || r.info != nil {
		t.Errorf("store down: code %d data %+v", r.code, d)
	}
}

type storeDown struct{}

func (*storeDown) Error() string { return "redis down" }
func (*storeDown) Unwrap() error { return idempotency.ErrStoreUnavailable }

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		tok  string
		ok   bool
	}{
		{[]string{"Bearer abc"}, "abc", true},
		{[]string{"BEARER  abc "}, "abc", true},
		{[]string{"Bearer a b"}, "", false},
		{[]string{"Bearerabc"}, "", false},
		{[]string{"Token abc"}, "", false},
		{nil, "", false},
		{[]string{"Bearer abc", "Bearer abc"}, "", false},
	} {
		tok, ok := BearerToken(http.Header{"Authorization": tc.vals})
		if tok != tc.tok || ok != tc.ok {
			t.Errorf("%q: %q, %v; want %q, %v", tc.vals, tok, ok, tc.tok, tc.ok)
		}
	}
}

// TestSanitizer rewrites what an SDK handler may write: its own JSON-RPC
// errors (any message, any data) get a fixed message and the error.data of
// docs/DESIGN.md, "refserver wire contract", plain-text refusals become
// JSON-RPC errors, results and empty answers pass unchanged, and an error
// without an id takes the request's.
func TestSanitizer(t *testing.T) {
	const secret = "4242424242424242"
	for _, tc := range []struct {
		name, ctype, body string
		status            int
		key               string
		wantStatus        int
		wantReason        string
		wantID            string
	}{
		{"sdk error", "application/json", `{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad ` + secret + `","data":"` + secret + `"}}`, 200, goodKey, 200, "invalid_request", "5"},
		{"sdk error without id", "application/json", `{"jsonrpc":"2.0","error":{"code":-32601,"message":"` + secret + `"}}`, 400, "", 400, "method_not_found", `"req"`},
		{"sdk error with null id", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"` + secret + `"}}`, 400, "", 400, "invalid_request", `"req"`},
		{"our refusal keeps its text", "application/json", `{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"idempotency: request hash mismatch","data":{"reason":"request_mismatch","status":422}}}`, 200, goodKey, 200, "request_mismatch", "5"},
		{"plain text", "text/plain; charset=utf-8", "malformed payload: " + secret + "\n", 400, goodKey, 400, "invalid_request", `"req"`},
		{"plain text 500", "text/plain", secret, 500, "", 500, "internal", `"req"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sw := &sanitizer{ResponseWriter: rec, id: json.RawMessage(`"req"`)}
			sw.Header().Set("Content-Type", tc.ctype)
			sw.WriteHeader(tc.status)
			sw.Write([]byte(tc.body))
			sw.finish(tc.key)
			b := rec.Body.Bytes()
			if strings.Contains(string(b), secret) {
				t.Fatalf("quotes the input: %s", b)
			}
			id, _, d := rpcRefusal(t, b)
			if rec.Code != tc.wantStatus || d.Reason != tc.wantReason || d.IdempotencyKey != tc.key || id != tc.wantID {
				t.Errorf("%d id %s data %+v: %s", rec.Code, id, d, b)
			}
		})
	}
	for _, body := range []string{"", `{"jsonrpc":"2.0","id":1,"result":{"x":"` + secret + `"}}`} {
		rec := httptest.NewRecorder()
		sw := &sanitizer{ResponseWriter: rec}
		sw.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		if body == "" {
			status = http.StatusAccepted
		}
		sw.WriteHeader(status)
		sw.Write([]byte(body))
		sw.finish(goodKey)
		if rec.Code != status || rec.Body.String() != body {
			t.Errorf("changed a good answer: %d %q", rec.Code, rec.Body.String())
		}
	}
}

// hasError decides which answers leave unread: it must see every error
// member encoding/json would decode, whatever its case, and no other.
func TestHasError(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{"error":{"code":1}}}`: false,
		`{"jsonrpc":"2.0","id":1,"error":null}`:                  false,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}`:       true,
		`{"id":1,"ERROR":{"code":-32602}}`:                       true,
		`{"id":1,"\u0065rror":{"code":-32602}}`:                  true,
		`{"id":1,"error":{"code":1},"error":null}`:               true,
	} {
		if got := hasError([]byte(body)); got != want {
			t.Errorf("hasError(%s) = %v, want %v", body, got, want)
		}
	}
}

// A message nested deeper than the limit is refused naming the limit, not
// as invalid JSON, and quoting nothing of it: on the direct path and on the
// SDK's (a protocol version the front leaves to the SDK), through the
// gateway as a whole and through the SDK handler behind the front.
func TestFrontDepthRefusalNamesTheLimit(t *testing.T) {
	p := newDirectPair(t, true)
	const marker = "mk_depth_5f3a9c"
	args := strings.Repeat(`{"`+marker+`":`, 5000) + "1" + strings.Repeat("}", 5000)
	body := directBody("9", `"pay.ok"`, args, "")
	for _, c := range []struct {
		name   string
		h      http.Handler
		header map[string]string
	}{
		{"direct path", p.direct, nil},
		{"SDK path", p.direct, map[string]string{"Mcp-Protocol-Version": "2026-07-28"}},
		{"SDK handler", p.sdk, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := p.answered.Load()
			w := directReq{body: body, header: c.header}.send(c.h)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %.300s", w.Code, w.Body)
			}
			_, code, data := rpcRefusal(t, w.Body.Bytes())
			var resp struct {
				Error struct{ Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			msg := resp.Error.Message
			if code != codeInvalidRequest || data.Reason != "invalid_request" ||
				!strings.Contains(msg, "nesting depth limit") || !strings.Contains(msg, "256") || strings.Contains(msg, "not one valid JSON") {
				t.Errorf("refusal %d %+v %q, want -32600 invalid_request naming the nesting depth limit of 256", code, data, msg)
			}
			if strings.Contains(w.Body.String(), marker) {
				t.Errorf("the refusal quotes the message: %.300s", w.Body)
			}
			if p.answered.Load() != before {
				t.Errorf("the direct path answered a message the front refuses")
			}
		})
	}
}
