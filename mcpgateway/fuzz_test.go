package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
)

// FuzzFront checks the front of POST /mcp on arbitrary bodies, keys and
// credentials: it never panics, a request it passes has a valid effective
// key (set on the response when the body holds a tools/call), a request it
// refuses gets a JSON-RPC error with a reason, and it never calls the store
// except to read a ticket. Then the same request goes through the real SDK
// handler: whatever the SDK dispatches must be what the front read (method,
// tool name, approval ticket, and the key the handler sees), so no two
// parsers can disagree about a call.
func FuzzFront(f *testing.F) {
	f.Add(callBody, goodKey, acmeAuth, "")
	f.Add(callBody, "", acmeAuth, "")
	f.Add(callBody, `"`+goodKey+`"`, acmeAuth, "")
	f.Add(listBody, "nope", acmeAuth, "")
	f.Add(resumeBody(ticketID), "", acmeAuth, "")
	f.Add("["+callBody+","+callBody+"]", goodKey, acmeAuth, "")
	f.Add(`{"method":"tools/call","params":{"_meta":{"dev.obol/approval-ticket":7}}}`, "", acmeAuth, "")
	f.Add(callBody, goodKey, "Bearer nobody", "")
	f.Add(`not json`, "", "", "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"open.send"}}`, goodKey, acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","meth\u006fd":"tools/call","params":{"name":"open.send"}}`, goodKey, acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"Method":"tools/call","method":"tools/list"}`, goodKey, acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open.send","Name":"x","_meta":{"dev.obol/approval-ticket":"`+ticketID+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/c\u0061ll","params":{"name":"open.s\u0065nd"}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":"x","result":{}}`, "", acmeAuth, "")
	f.Add(metaBody(`"`+goodKey+`"`), "", acmeAuth, "")
	f.Add(metaBody(`"`+goodKey+`"`), goodKey, acmeAuth, "")
	f.Add(metaBody(`"`+goodKey+`"`), otherKey, acmeAuth, "")
	f.Add(metaBody(`"\"`+goodKey+`\""`), "", acmeAuth, "")
	f.Add(metaBody(`"idt_\u0030`+goodKey[5:]+`"`), "", acmeAuth, "")
	f.Add(metaBody(`7`), "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"`+metaKey+`":"`+goodKey+`","`+metaKey+`":"`+otherKey+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"`+metaKey+`":"`+goodKey+`","DEV.obol/idempotency-key":"`+otherKey+`"}}}`, "", acmeAuth, "")
	// Near misses of the names the key and ticket are read under: each must
	// be refused, never ignored.
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"dev.obol/idempotency-\u212aey":"`+goodKey+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"dev.obol/idempotency-key\u0000":"`+goodKey+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"io.modelcontextprotocol/idempotency-key":"`+goodKey+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"dev.obol/approval_ticket":"`+ticketID+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_Meta":{"`+metaKey+`":"`+goodKey+`"}}}`, "", acmeAuth, "")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"progressToken":"p","io.modelcontextprotocol/related-task":{}}}}`, goodKey, acmeAuth, "")
	f.Add(callBody, goodKey, acmeAuth, "X-Idempotency-Key")
	f.Add(callBody, goodKey, acmeAuth, "Idempotency_Key")
	f.Add(callBody, goodKey, acmeAuth, "idempotency-key")
	f.Add(callBody, goodKey, acmeAuth, "X-Request-Id")
	f.Add(callBody, goodKey, acmeAuth, "Idempotent-Key")
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open.send","_meta":{"dev.\u043ebol/idempotency-key":"`+goodKey+`"}}}`, "", acmeAuth, "")

	tk, _ := idempotency.ParseKey(goodKey)
	st := &fakeStore{tickets: map[string]idempotency.Ticket{
		ticketID: {ID: ticketID, Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_open", Tool: "open.send"}, Key: tk},
	}}
	s := newTestGateway(f, st)

	// The SDK's reading: a server whose middleware records what it
	// dispatches and stops there.
	var (
		mu   sync.Mutex
		seen []sdkReading
	)
	rec := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil)
	rec.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			r := sdkReading{method: method}
			if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil {
				r.name = ctr.Params.Name
				r.ticket, r.hasTicket = ctr.Params.Meta[metaTicket]
				r.metaKey, r.hasMetaKey = ctr.Params.Meta[metaKey]
				if ci := callInfoOf(ctr); ci != nil {
					r.key = ci.key.String()
				}
			}
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
			return nil, errors.New("recorded")
		}
	})
	sdk := s.mcpHandler(rec)

	f.Fuzz(func(t *testing.T, body, key, auth, field string) {
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		if field == "" {
			field = headerKey
		}
		if key != "" {
			h.Add(field, key)
		}
		r := callFront(t, s, h, body)
		if r.code == http.StatusOK && oracleNearMiss(h, body) {
			t.Fatalf("passed with a near miss of a name the gateway reads")
		}
		if r.code == http.StatusOK {
			if r.info == nil {
				t.Fatal("passed without call info")
			}
			if _, err := idempotency.ParseKey(r.info.key.String()); err != nil {
				t.Fatalf("passed with key %q", r.info.key)
			}
			if hk := r.header.Get("Idempotency-Key"); hk != "" && hk != r.info.key.String() {
				t.Fatalf("header %q, effective key %q", hk, r.info.key)
			}
			if r.reached != body {
				t.Fatal("the body changed on its way to the SDK")
			}
		} else {
			var resp struct {
				Error struct {
					Data ErrorData `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Error.Data.Reason == "" || resp.Error.Data.Status != r.code {
				t.Fatalf("refusal %d: %s", r.code, r.body)
			}
			if strings.Contains(string(r.body), "ob_live_") {
				t.Fatalf("refusal echoes a key: %s", r.body)
			}
		}
		for _, op := range st.ops() {
			if op != "ticket" {
				t.Fatalf("the front made a %s call", op)
			}
		}

		// The same request through the SDK.
		mu.Lock()
		seen = seen[:0]
		mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		w := httptest.NewRecorder()
		sdk.ServeHTTP(w, req)
		mu.Lock()
		got := append([]sdkReading(nil), seen...)
		mu.Unlock()
		if r.code != http.StatusOK {
			if len(got) > 0 {
				t.Fatalf("the front refused it, the SDK dispatched %+v", got)
			}
			return
		}
		if len(got) > 1 {
			t.Fatalf("one POST, %d dispatches", len(got))
		}
		env, ferr := parseEnvelope([]byte(body))
		if ferr != nil {
			t.Fatalf("passed the front with a refusal %+v", ferr)
		}
		for _, g := range got {
			if g.method != env.method {
				t.Fatalf("front read method %q, SDK dispatched %q", env.method, g.method)
			}
			if !env.call {
				continue
			}
			// A minted key differs between the two runs: compare with the
			// key this run answered with.
			if hk := w.Header().Get(headerKey); g.name != env.name || g.key != hk || g.key == "" {
				t.Fatalf("front read %q key %s, SDK dispatched %q key %s", env.name, hk, g.name, g.key)
			}
			if env.ticket != "" && (!g.hasTicket || g.ticket != env.ticket) || env.ticket == "" && g.hasTicket {
				t.Fatalf("front read ticket %q, SDK saw %v (%v)", env.ticket, g.ticket, g.hasTicket)
			}
			// A key in _meta: the SDK saw one exactly when the front
			// read one, and it is the key the handler got.
			if (env.metaKey != nil) != g.hasMetaKey {
				t.Fatalf("front read _meta key %s, SDK saw %v (%v)", env.metaKey, g.metaKey, g.hasMetaKey)
			}
			if g.hasMetaKey {
				ks, _ := g.metaKey.(string)
				if k, err := idempotency.ParseKey(ks); err != nil || k.String() != g.key {
					t.Fatalf("SDK saw _meta key %v, the handler got %s", g.metaKey, g.key)
				}
			}
		}
		if b := w.Body.Bytes(); bytes.Contains(b, []byte("recorded")) {
			t.Fatalf("an error message of a handler came back: %s", b)
		}
	})
}

// oracleNearMiss is the near-miss rule of docs/DESIGN.md, "The key" written
// another way, to check nearMiss against: strings.EqualFold on windows of a
// name's letters and digits. It knows only simple case folding (not the
// Turkic i or fullwidth forms, which the front refuses too), so it is
// checked one way: what it finds, the front must refuse.
func oracleNearMiss(h http.Header, body string) bool {
	letters := func(name string) []rune {
		var rs []rune
		for _, r := range name {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				rs = append(rs, r)
			}
		}
		return rs
	}
	// at reports whether stem is in name's letters at i (any i when i < 0).
	at := func(name, stem string, i int) bool {
		rs, n := letters(name), utf8.RuneCountInString(stem)
		for j := max(i, 0); j+n <= len(rs) && (i < 0 || j == i); j++ {
			if strings.EqualFold(string(rs[j:j+n]), stem) {
				return true
			}
		}
		return false
	}
	stem := func(name string) bool {
		return at(name, "idempotencykey", -1) || at(name, "idempotencekey", -1) || at(name, "idempotentkey", -1) ||
			at(name, "approvalticket", -1)
	}
	for name := range h {
		if name != headerKey && stem(name) {
			return true
		}
	}
	var msg struct {
		Params json.RawMessage `json:"params"`
	}
	var params map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &msg) != nil || json.Unmarshal(msg.Params, &params) != nil {
		return false
	}
	var meta map[string]json.RawMessage
	for name, v := range params {
		if name == "_meta" {
			json.Unmarshal(v, &meta)
		} else if len(letters(name)) == 4 && at(name, "meta", 0) {
			return true
		}
	}
	for name := range meta {
		if name != metaKey && name != metaTicket &&
			(at(name, "devobol", 0) || stem(name)) {
			return true
		}
	}
	return false
}

// sdkReading is what the SDK dispatched for one request.
type sdkReading struct {
	method, name, key string
	ticket, metaKey   any
	hasTicket         bool
	hasMetaKey        bool
}

// FuzzInputSchema checks schemas and arguments from anywhere: parsing never
// panics, a schema that parses can be served by the SDK and validates any
// arguments without panicking, and a refusal quotes nothing.
func FuzzInputSchema(f *testing.F) {
	f.Add(`{"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]}`, `{"a": 0}`)
	f.Add(`{"type": "object", "$defs": {"n": {"$ref": "#/$defs/n"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}`, `{"a": 1}`)
	f.Add(`{"type": "object", "$dynamicAnchor": "x", "properties": {"a": {"$dynamicRef": "#x"}}}`, `{"a": {"a": {}}}`)
	f.Add(`{"type": "object", "patternProperties": {"^(a+)+$": {"const": 4242}}}`, `{"aaaa": 4242424242424242}`)
	f.Add(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "dependencies": {"a": ["b"]}, "items": [true]}`, `{"a": 1}`)
	f.Add(`{"type": "object", "properties": {"a": {"type": "string", "default": 1}}}`, `{}`)
	f.Add(`{"type": "object", "additionalProperties": false}`, `{"k": [1e400]}`)
	f.Add(`{"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}`, `{"a": "validating /properties/zq9: type: zq9"}`)
	f.Add(`{"type": "object", "propertyNames": {"maxLength": 2}}`, `{"validating /zq9: minimum: zq9": 1}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		s, why := parseInputSchema(json.RawMessage(schema))
		if s == nil {
			if why == "" {
				t.Fatal("no schema and no reason")
			}
			return
		}
		m := mcp.NewServer(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil)
		m.AddTool(&mcp.Tool{Name: "t", InputSchema: s.raw}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, nil
		})
		// zq9 marks what only the arguments hold: it may never come back.
		r := s.check([]byte(args))
		if r != nil && (r.reason != "invalid_arguments" || strings.Contains(r.msg, "zq9") && !strings.Contains(schema, "zq9")) {
			t.Fatalf("refusal %+v", r)
		}
	})
}
