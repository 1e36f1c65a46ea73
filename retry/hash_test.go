package retry

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

func TestRequestHashWithoutPointer(t *testing.T) {
	bp := effectspec.BindingBodyPointer
	hash := func(b effectspec.BindingKind, pointer, args string) (string, string) {
		t.Helper()
		h, prev, err := requestHashes(b, pointer, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return h, prev
	}
	a, prevA := hash(bp, "/idempotency_key", `{"title":"t","idempotency_key":"uuid-1"}`)
	b, _ := hash(bp, "/idempotency_key", `{ "idempotency_key" : "uuid-2", "title":"t"}`)
	none, prevNone := hash(bp, "/idempotency_key", `{"title":"t"}`)
	other, _ := hash(bp, "/idempotency_key", `{"title":"u","idempotency_key":"uuid-1"}`)
	whole, _, _ := idempotency.RequestHashes([]byte(`{"title":"t","idempotency_key":"uuid-1"}`))
	if a != b || a != none || a == other {
		t.Fatalf("hashes %s %s %s %s: one for the first three, another for the last", a, b, none, other)
	}
	if prevA != whole || prevNone != "" {
		t.Fatalf("previous %q %q, want the whole arguments' hash, then none", prevA, prevNone)
	}
	// Nested, with escaped tokens, and exact numbers kept.
	n1, _ := hash(bp, "/meta/a~1b~0c", `{"meta":{"a/b~c":"k1","x":1},"amount":9007199254740993}`)
	n2, _ := hash(bp, "/meta/a~1b~0c", `{"amount":9007199254740993,"meta":{"x":1.0,"a/b~c":"k2"}}`)
	n3, _ := hash(bp, "/meta/a~1b~0c", `{"amount":9007199254740992,"meta":{"x":1,"a/b~c":"k1"}}`)
	if n1 != n2 || n1 == n3 {
		t.Fatalf("nested: %s %s %s", n1, n2, n3)
	}
	// Other bindings hash the whole arguments.
	h1, _ := hash(effectspec.BindingHeader, "", `{"title":"t","idempotency_key":"uuid-1"}`)
	h2, _ := hash(effectspec.BindingUnsupported, "", `{"title":"t","idempotency_key":"uuid-2"}`)
	if h1 != whole || h1 == h2 {
		t.Fatalf("header %s unsupported %s, want the whole arguments' hashes", h1, h2)
	}
	// An element of an array reads as null.
	e1, _ := hash(bp, "/keys/1", `{"keys":["a","k1"]}`)
	e2, _ := hash(bp, "/keys/1", `{"keys":["a","k2"]}`)
	e3, _ := hash(bp, "/keys/1", `{"keys":["b","k1"]}`)
	if e1 != e2 || e1 == e3 {
		t.Fatalf("array: %s %s %s", e1, e2, e3)
	}
}
