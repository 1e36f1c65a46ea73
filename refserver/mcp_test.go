package main

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
)

// Input schemas of mcpConfig, as configured.
const (
	chargeSchema = `{"type": "object", "properties": {"amount": {"type": "integer", "minimum": 1},
      "card": {"type": "string", "pattern": "^tok_"}}, "required": ["amount"], "additionalProperties": false}`
	mailASchema = `{"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}`
	capSchema   = `{"type": "object", "properties": {"subject": {"type": "string"}}, "required": ["subject"]}`
)

// mcpConfig has tools with descriptions and input schemas, a read, a write
// without either, and a capability with its own.
const mcpConfig = `{
  "key_prefix": "mcp:", "lease": "10s", "environment": "production",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "description": "Charge a card.", "input_schema": ` + chargeSchema + `,
     "spec": {"tool": "pay.charge", "effect": "write",
              "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/balance", "description": "Read the balance.", "input_schema": {"type": "object"},
     "spec": {"tool": "pay.balance", "effect": "read", "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/mail-a", "description": "Send an email through A.", "input_schema": ` + mailASchema + `,
     "spec": {"tool": "mail.a", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/mail-b",
     "spec": {"tool": "mail.b", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ],
  "capabilities": [{"name": "cap.mail", "providers": ["mail.a", "mail.b"], "pin": "mail.a",
                    "description": "Send an email.", "input_schema": ` + capSchema + `}]
}`

// noRecord fails t unless the store holds only the keys it held when the
// gateway started (its deployment marker and pins), and the receipt
// endpoint knows none of keys.
func noRecord(t *testing.T, mr *miniredis.Miniredis, base []string, p *proc, tool string, keys ...string) {
	t.Helper()
	if ks := mr.Keys(); !slices.Equal(ks, base) {
		t.Fatalf("the store holds %v, it held %v", ks, base)
	}
	for _, k := range keys {
		if code, _ := p.post(t, http.MethodGet, "/v1/receipts/"+k+"?tool="+tool, e2eKeyOne, ""); code != http.StatusNotFound {
			t.Fatalf("receipt of %s: status %d, want 404", k, code)
		}
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestToolsListDescribesTools: tools/list through the official client shows
// each configured description and input schema, {"type": "object"} for a
// tool without one, and hints from the EffectSpec: readOnlyHint for a read,
// idempotentHint for a write, the other hints left at the protocol's
// defaults.
func TestToolsListDescribesTools(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gatewayWith(t, mr, mcpConfig, vendor.URL)
	s := newSession(t, p.base, e2eKeyOne, "")
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	for _, want := range []struct {
		name, description, schema string
		readOnly, idempotent      bool
	}{
		{"pay.charge", "Charge a card.", chargeSchema, false, true},
		{"pay.balance", "Read the balance.", `{"type": "object"}`, true, false},
		{"mail.a", "Send an email through A.", mailASchema, false, true},
		{"mail.b", "", `{"type": "object"}`, false, true},
		{"cap.mail", "Send an email.", capSchema, false, true},
	} {
		tl := got[want.name]
		if tl == nil {
			t.Errorf("%s: not listed", want.name)
			continue
		}
		if want.description != "" && tl.Description != want.description+" "+retryNote || !strings.HasSuffix(tl.Description, " "+retryNote) {
			t.Errorf("%s: description %q, want %q and the retry note", want.name, tl.Description, want.description)
		}
		if !reflect.DeepEqual(tl.InputSchema, jsonValue(t, want.schema)) {
			t.Errorf("%s: inputSchema %v, want %s", want.name, tl.InputSchema, want.schema)
		}
		a := tl.Annotations
		if a == nil {
			t.Errorf("%s: no annotations", want.name)
			continue
		}
		if a.ReadOnlyHint != want.readOnly || a.IdempotentHint != want.idempotent || a.DestructiveHint != nil || a.OpenWorldHint != nil {
			t.Errorf("%s: annotations %+v, want readOnly %v idempotent %v", want.name, a, want.readOnly, want.idempotent)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d tools listed, want 5", len(got))
	}
}

// TestInvalidArgumentsNothingRecorded: arguments that break the tool's
// input schema (or a capability's, or its pinned provider's) are refused
// with invalid_arguments before any claim: the store holds nothing, the
// vendor saw nothing, and the error quotes none of the arguments. The same
// key with good arguments then runs once: the refusal left it unused.
func TestInvalidArgumentsNothingRecorded(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gatewayWith(t, mr, mcpConfig, vendor.URL)
	base := mr.Keys()
	const card = "4242424242424242"
	marker := "mk" + strings.TrimPrefix(idempotency.NewKey().String(), "idt_")
	key := idempotency.NewKey().String()
	s, hr := recordingSession(t, p.base, e2eKeyOne, key)

	for _, tc := range []struct {
		name, tool string
		args       any
	}{
		{"below the minimum", "pay.charge", map[string]any{"amount": 0, "memo": marker}},
		{"wrong type", "pay.charge", map[string]any{"amount": card}},
		{"not an integer", "pay.charge", map[string]any{"amount": 1.5}},
		{"missing required", "pay.charge", map[string]any{"card": "tok_" + marker}},
		{"no arguments", "pay.charge", nil},
		{"pattern", "pay.charge", map[string]any{"amount": 5, "card": card}},
		{"additional property", "pay.charge", map[string]any{"amount": 5, marker: card}},
		{"nested value", "mail.a", map[string]any{"to": []any{card, marker}}},
		{"capability schema", "cap.mail", map[string]any{"to": "ada@example.com", "subject": 4242}},
		{"pinned provider's schema", "cap.mail", map[string]any{"subject": marker}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := callRaw(t, s, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			a.wantRefusal(t, "invalid_arguments", http.StatusBadRequest)
			if a.refusal.IdempotencyKey != key || hr.last(t).Get("Idempotency-Key") != key {
				t.Errorf("key %q, header %q, want %s", a.refusal.IdempotencyKey, hr.last(t).Get("Idempotency-Key"), key)
			}
			if msg := a.err.Error(); strings.Contains(msg, card) || strings.Contains(msg, marker) || strings.Contains(msg, "4242") {
				t.Errorf("the error quotes the arguments: %s", msg)
			}
			if n := vendor.requests(); n != 0 {
				t.Fatalf("the vendor saw %d requests", n)
			}
			noRecord(t, mr, base, p, tc.tool, key)
		})
	}

	call(t, s, "pay.charge", map[string]any{"amount": 5, "card": "tok_1"}, "").wantOutcome(t, "accepted", false)
	if n := vendor.requests(); n != 1 {
		t.Fatalf("the vendor saw %d requests, want 1", n)
	}
	call(t, newSession(t, p.base, e2eKeyOne, idempotency.NewKey().String()), "cap.mail",
		map[string]any{"to": "ada@example.com", "subject": "hi"}, "").wantOutcome(t, "accepted", false)
	if n := vendor.requests(); n != 2 {
		t.Fatalf("the vendor saw %d requests, want 2", n)
	}
}

// TestKeyInMeta: a key that comes only in params._meta is the call's key
// (in the response header and result._meta), and a retry with it in _meta,
// in either form, or in the header, is a replay: the vendor saw one
// request. A header and a _meta key that differ, and a _meta key that is
// not a string or malformed, are malformed_key: no key in the answer,
// nothing recorded, nothing sent.
func TestKeyInMeta(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gatewayWith(t, mr, mcpConfig, vendor.URL)
	base := mr.Keys()
	args := map[string]any{"amount": 5}
	s, hr := recordingSession(t, p.base, e2eKeyOne, "")

	// Refusals first, while the store is empty.
	k2, k3 := idempotency.NewKey().String(), idempotency.NewKey().String()
	hs, hhr := recordingSession(t, p.base, e2eKeyOne, k2)
	for _, tc := range []struct {
		name string
		s    *mcp.ClientSession
		hr   *headerRecorder
		meta any
	}{
		{"header and _meta differ", hs, hhr, k3},
		{"header and _meta differ, structured field form", hs, hhr, `"` + k3 + `"`},
		{"_meta is a number", s, hr, 4242424242424242},
		{"_meta is an object", s, hr, map[string]any{"key": k3}},
		{"_meta is malformed", s, hr, "sk_live_4242424242424242"},
		{"_meta is malformed, with a header", hs, hhr, "idt_" + strings.ToUpper(k3[4:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := callRaw(t, tc.s, &mcp.CallToolParams{Name: "pay.charge", Arguments: args, Meta: mcp.Meta{metaKey: tc.meta}})
			a.wantRefusal(t, "malformed_key", http.StatusBadRequest)
			if a.refusal.IdempotencyKey != "" || tc.hr.last(t).Get("Idempotency-Key") != "" {
				t.Errorf("a key came back: %q, header %q", a.refusal.IdempotencyKey, tc.hr.last(t).Get("Idempotency-Key"))
			}
			if msg := a.err.Error(); strings.Contains(msg, "4242") || strings.Contains(msg, k2) || strings.Contains(msg, k3[4:]) {
				t.Errorf("the error quotes a key: %s", msg)
			}
			if n := vendor.requests(); n != 0 {
				t.Fatalf("the vendor saw %d requests", n)
			}
			noRecord(t, mr, base, p, "pay.charge", k2, k3)
		})
	}

	k := idempotency.NewKey().String()
	first := callMeta(t, s, "pay.charge", args, mcp.Meta{metaKey: k})
	first.wantOutcome(t, "accepted", false)
	if got := first.key; got != k {
		t.Errorf("result _meta key %v, want %s", got, k)
	}
	if got := hr.last(t).Get("Idempotency-Key"); got != k {
		t.Errorf("response header %q, want %s", got, k)
	}
	for _, retry := range []struct {
		name string
		s    *mcp.ClientSession
		meta mcp.Meta
	}{
		{"same _meta key", s, mcp.Meta{metaKey: k}},
		{"structured field form", s, mcp.Meta{metaKey: `"` + k + `"`}},
		{"in the header", newSession(t, p.base, e2eKeyOne, k), nil},
		{"in both", newSession(t, p.base, e2eKeyOne, k), mcp.Meta{metaKey: k}},
	} {
		a := callMeta(t, retry.s, "pay.charge", args, retry.meta)
		a.wantOutcome(t, "accepted", true)
		if a.key != k {
			t.Errorf("%s: result _meta key %q, want %s", retry.name, a.key, k)
		}
	}
	if n := vendor.requests(); n != 1 {
		t.Fatalf("the vendor saw %d requests, want 1", n)
	}
}

// callMeta is call with meta as params._meta.
func callMeta(t *testing.T, s *mcp.ClientSession, name string, args any, meta mcp.Meta) answer {
	t.Helper()
	a := callRaw(t, s, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if a.err == nil {
		b, _ := json.Marshal(a.res.Meta[metaReceipt])
		if err := json.Unmarshal(b, &a.rc); err != nil {
			t.Fatalf("receipt %s: %v", b, err)
		}
		a.key, _ = a.res.Meta[metaKey].(string)
	}
	return a
}
