package mcpgateway

import (
	"encoding/json"
	"fmt"
	"github.com/obol-gateway/obol/internal/nearmisstest"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

// nearMissVector is one published near-miss vector (DESIGN, section
// "refserver wire contract").
type nearMissVector = nearmisstest.Vector

func nearMissVectors(t testing.TB) []nearMissVector {
	t.Helper()
	return nearmisstest.Vectors(t, filepath.Join("..", "docs", "DESIGN.md"))
}

func nearMissBody(v nearMissVector, tool, key, ticket string) string {
	return nearmisstest.Body(v, tool, key, ticket, metaKey, metaTicket)
}

// TestNearMissVectors runs the published vectors through the front: each
// refused one is malformed_key (400, no key in the answer, nothing read from
// the store) on a tools/call and on a tools/list; each accepted one passes,
// and a key under an accepted key name is the call's key.
func TestNearMissVectors(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	for _, v := range nearMissVectors(t) {
		for _, tool := range []string{"open.send", ""} {
			method := "tools/call"
			if tool == "" {
				method = "tools/list"
			}
			t.Run(fmt.Sprintf("%s %s %q", v.Where, method, v.Name), func(t *testing.T) {
				h := http.Header{"Authorization": {acmeAuth}}
				if v.Where == "header" {
					h.Add(v.Name, goodKey) // canonicalized, as Go's server does
				}
				r := callFront(t, s, h, nearMissBody(v, tool, goodKey, ticketID))
				if !v.Refused {
					if r.code != http.StatusOK || r.info == nil {
						t.Fatalf("refused an accepted name: %d %s", r.code, r.body)
					}
					readsKey := v.Where == "header" && http.CanonicalHeaderKey(v.Name) == headerKey || v.Where == "_meta" && v.Name == metaKey
					if readsKey && (r.info.key.String() != goodKey || r.info.source != idempotency.KeySupplied) {
						t.Errorf("key %s (%s), want the supplied %s", r.info.key, r.info.source, goodKey)
					}
					if !readsKey && r.info.source != idempotency.KeyMinted {
						t.Errorf("key source %s, want minted", r.info.source)
					}
					return
				}
				if r.code != http.StatusBadRequest || r.info != nil {
					t.Fatalf("code %d, passed %v: %s", r.code, r.info != nil, r.body)
				}
				_, code, d := rpcRefusal(t, r.body)
				if d.Reason != "malformed_key" || d.Status != 400 || code != -32000 || d.IdempotencyKey != "" {
					t.Errorf("code %d data %+v", code, d)
				}
				if r.header.Get(headerKey) != "" {
					t.Error("a refusal carries an Idempotency-Key header")
				}
				if strings.Contains(string(r.body), goodKey) {
					t.Errorf("the refusal quotes the key: %s", r.body)
				}
			})
		}
	}
	// The one store call: the accepted ticket's lookup, a resume without a
	// key.
	if ops := st.ops(); !slices.Equal(ops, []string{"ticket"}) {
		t.Errorf("store calls %v, want the one ticket lookup", ops)
	}
}

// TestNearMissOrder: a message refused as a message (a repeated member) is
// that refusal, not malformed_key; a near miss beside a good key is still
// refused, the same with a ticket, and a near miss in the header beside a
// good key in _meta too. The position of the _meta member is in the text,
// never its name.
func TestNearMissOrder(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	auth := http.Header{"Authorization": {acmeAuth}}
	call := func(meta string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","arguments":{},"_meta":{` + meta + `}}}`
	}
	const stray = `"dev.obol/Idempotency-Key-zq9":"` + otherKey + `"`
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		reason string
		msg    string
	}{
		{"repeated member first", auth, call(`"` + metaKey + `":"` + goodKey + `","` + metaKey + `":"` + goodKey + `",` + stray), "invalid_request", ""},
		{"beside a good key", auth, call(`"` + metaKey + `":"` + goodKey + `",` + stray), "malformed_key", "member 2 of params._meta"},
		{"beside a ticket", auth, call(`"` + metaTicket + `":"` + ticketID + `",` + stray), "malformed_key", "member 2 of params._meta"},
		{"first of two", auth, call(stray + `,"DEV.OBOL/receipt":1`), "malformed_key", "member 1 of params._meta"},
		{"header beside a good _meta key", http.Header{"Authorization": {acmeAuth}, "X-Idempotency-Key": {otherKey}}, call(`"` + metaKey + `":"` + goodKey + `"`), "malformed_key", "header field"},
		{"header beside the same key", http.Header{"Authorization": {acmeAuth}, headerKey: {goodKey}, "Idempotency_key": {goodKey}}, callBody, "malformed_key", "header field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callFront(t, s, tc.header, tc.body)
			if r.code != http.StatusBadRequest || r.info != nil {
				t.Fatalf("code %d, passed %v: %s", r.code, r.info != nil, r.body)
			}
			var resp struct {
				Error struct {
					Message string    `json:"message"`
					Data    ErrorData `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Error.Data.Reason != tc.reason {
				t.Fatalf("reason %q, want %s: %s", resp.Error.Data.Reason, tc.reason, r.body)
			}
			if !strings.Contains(resp.Error.Message, tc.msg) {
				t.Errorf("message %q, want it to say %q", resp.Error.Message, tc.msg)
			}
			for _, q := range []string{"zq9", "Idempotency-Key-", "Idempotency_key", "X-Idempotency", goodKey, otherKey} {
				if strings.Contains(string(r.body), q) {
					t.Errorf("the refusal quotes %q: %s", q, r.body)
				}
			}
		})
	}
	if ops := st.ops(); len(ops) != 0 {
		t.Errorf("store touched: %v", ops)
	}
}

// TestNearMissTrailer: a key in a trailer field would be ignored, so one
// named like it, exactly Idempotency-Key included, is malformed_key; an
// unrelated trailer passes.
func TestNearMissTrailer(t *testing.T) {
	st := &fakeStore{}
	s := newTestGateway(t, st)
	for _, tc := range []struct {
		field  string
		passes bool
	}{{headerKey, false}, {"X-Idempotency-Key", false}, {"X-Checksum", true}} {
		t.Run(tc.field, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(callBody))
			req.Header.Set("Authorization", acmeAuth)
			req.Trailer = http.Header{tc.field: {goodKey}}
			rec := httptest.NewRecorder()
			passed := false
			s.mcpFront(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed = true })).ServeHTTP(rec, req)
			if passed != tc.passes {
				t.Fatalf("passed %v, want %v: %d %s", passed, tc.passes, rec.Code, rec.Body)
			}
			if tc.passes {
				return
			}
			_, _, d := rpcRefusal(t, rec.Body.Bytes())
			if rec.Code != http.StatusBadRequest || d.Reason != "malformed_key" || d.IdempotencyKey != "" || rec.Header().Get(headerKey) != "" {
				t.Errorf("%d %+v, header %q", rec.Code, d, rec.Header().Get(headerKey))
			}
		})
	}
	if ops := st.ops(); len(ops) != 0 {
		t.Errorf("store touched: %v", ops)
	}
}
