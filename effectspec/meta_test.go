package effectspec

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMetaBinding: a meta binding parses with or without its name,
// deduplicates as a header binding does (window, propagation, production
// policy), lists no HTTP status, and Apply leaves the request to the MCP
// target.
func TestMetaBinding(t *testing.T) {
	def, err := Parse([]byte(`{"tool": "pay.create", "idempotency": {"binding": "meta"}}`))
	if err != nil {
		t.Fatal(err)
	}
	named, err := Parse([]byte(`{"tool": "pay.create", "idempotency": {"binding": "meta", "meta": "com.example.pay/Idempotency_Key", "window": "1h"}, "status": {"tool_error": "definitely_rejected"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if def.Idempotency.Meta != "" || named.Idempotency.Meta != "com.example.pay/Idempotency_Key" || named.Status.ToolError != DefinitelyRejected {
		t.Errorf("parsed %+v and %+v", def.Idempotency, named)
	}
	if !def.vendorDedup() || def.VendorWindow() != DefaultVendorWindow || def.Propagation() != PropagationMeta ||
		named.VendorWindow() != time.Hour {
		t.Errorf("meta: dedup %v window %v/%v propagation %s", def.vendorDedup(), def.VendorWindow(), named.VendorWindow(), def.Propagation())
	}
	if err := (Policy{Environment: Production}).Check(def); err != nil {
		t.Errorf("production refuses a meta write: %v", err)
	}
	for _, code := range []int{200, 429, 503} {
		if def.Retryable(code) || def.Classify(code) != Unknown {
			t.Errorf("meta spec classifies HTTP %d by itself", code)
		}
	}
	h := http.Header{"Idempotency-Key": {"client"}}
	body := []byte(`{"a":1}`)
	out, prop, err := def.Apply(h, body, "idt_00000000000000000000000000000001")
	if err != nil || prop != PropagationMeta || string(out) != string(body) || len(h) != 1 || h.Get("Idempotency-Key") != "client" {
		t.Errorf("Apply: %s %s %v %v", out, prop, err, h)
	}
	if _, _, err := def.Apply(nil, body, "bad key"); !errors.Is(err, errInvalidKey) {
		t.Errorf("Apply with an invalid key: %v", err)
	}
	// The name round-trips through json.Marshal and Parse.
	enc, err := json.Marshal(named)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(enc)
	if err != nil || !reflect.DeepEqual(again, named) {
		t.Errorf("round trip of %s: %+v, %v", enc, again, err)
	}
	for _, doc := range []string{
		`{"tool":"t","idempotency":{"binding":"meta","meta":"` + DefaultMetaName + `"}}`,
		`{"tool":"t","idempotency":{"binding":"meta","meta":"key"}}`,
		`{"tool":"t","idempotency":{"binding":"meta","meta":"a.b-c.d9/x.y_z-0"}}`,
		`{"tool":"t","idempotency":{"binding":"meta","meta":"` + strings.Repeat("k", 128) + `"}}`,
		`{"tool":"t","idempotency":{"binding":"meta","meta":"com.mcptools/k"}}`,
		`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/idempotency_key"},"status":{"tool_error":"unknown"}}`,
		`{"tool":"t","status":{"tool_error":"definitely_rejected"}}`,
	} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// TestMetaRefused: every rule of the meta binding and of tool_error has its
// error, on the field it names.
func TestMetaRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"tool":"t","idempotency":{"binding":"meta","meta":""}}`,
			`idempotency.meta: must not be empty (omit the field for its default)`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"` + strings.Repeat("k", 129) + `"}}`,
			`idempotency.meta: longer than 128 bytes`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"-key"}}`, `idempotency.meta: "-key" is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"key."}}`, `idempotency.meta: "key." is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"a b"}}`, `idempotency.meta: "a b" is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"example.com/"}}`, `is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"1x.com/k"}}`, `is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"a..b/k"}}`, `is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"a/b/k"}}`, `is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"/k"}}`, `is not an MCP _meta key`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"io.modelcontextprotocol/key"}}`,
			`idempotency.meta: the prefix io.modelcontextprotocol/ is reserved by MCP`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"modelcontextprotocol.io/key"}}`, `is reserved by MCP`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"tools.MCP.com/key"}}`, `is reserved by MCP`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"dev.obol/receipt"}}`,
			`idempotency.meta: the prefix dev.obol/ is the gateway's own`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"DEV.OBOL/idempotency-key"}}`, `is the gateway's own`},
		{`{"tool":"t","idempotency":{"binding":"meta","header":"X-Key"}}`, `idempotency.header: not allowed with binding meta`},
		{`{"tool":"t","idempotency":{"binding":"meta","pointer":"/k"}}`, `idempotency.pointer: not allowed with binding meta`},
		{`{"tool":"t","idempotency":{"binding":"header","header":"X-Key","meta":"k"}}`, `idempotency.meta: not allowed with binding header`},
		{`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k","meta":"k"}}`, `idempotency.meta: not allowed with binding body_pointer`},
		{`{"tool":"t","idempotency":{"meta":"k"}}`, `idempotency.meta: not allowed with binding unsupported`},
		{`{"tool":"t","route":"federated","idempotency":{"binding":"meta"}}`, `idempotency.binding: a federated route propagates no key`},
		{`{"tool":"t","idempotency":{"binding":"meta"},"status":{"accepted":[200]}}`, `status: not allowed with binding meta`},
		{`{"tool":"t","idempotency":{"binding":"meta"},"status":{"retryable":[503]}}`, `status: not allowed with binding meta`},
		{`{"tool":"t","idempotency":{"binding":"meta","window":"0.5s"}}`, `idempotency.window: 500ms is less than the minimum 1s`},
		{`{"tool":"t","idempotency":{"binding":"meta"},"status":{"tool_error":"accepted"}}`,
			`status.tool_error: "accepted" is not "definitely_rejected" or "unknown"`},
		{`{"tool":"t","status":{"tool_error":""}}`, `status.tool_error: must not be empty`},
		{`{"tool":"t","status":{"tool_error":null}}`, `status.tool_error: must be a string, not null`},
		{`{"tool":"t","idempotency":{"binding":"header","header":"X-Key"},"status":{"tool_error":"unknown"}}`,
			`status.tool_error: not allowed with binding header`},
		{`{"tool":"t","idempotency":{"binding":"in_process"},"status":{"tool_error":"unknown"}}`,
			`status.tool_error: not allowed with binding in_process`},
		{`{"tool":"t","route":"federated","status":{"tool_error":"unknown"}}`, `status.tool_error: not allowed on a federated route`},
		// Near misses are unknown fields, never read as the right one.
		{`{"tool":"t","idempotency":{"binding":"meta","Meta":"k"}}`, `idempotency.Meta: unknown field`},
		{`{"tool":"t","status":{"tool_errors":"unknown"}}`, `status.tool_errors: unknown field`},
		{`{"tool":"t","idempotency":{"binding":"Meta"}}`, `idempotency.binding: "Meta" is not`},
		{`{"tool":"t","idempotency":{"binding":"meta","meta":"k","meta":"j"}}`, `idempotency.meta: repeated member`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}
