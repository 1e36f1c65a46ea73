package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

var testKey, _ = idempotency.ParseKey("idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60")

func TestStorageKeyLayout(t *testing.T) {
	s := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "stripe.create_charge"}
	got, err := s.StorageKey("obol:", testKey)
	if err != nil {
		t.Fatal(err)
	}
	want := "obol:idem:ws_acme:conn_stripe:" + idempotency.ToolHash("stripe.create_charge") + ":" + testKey.String()
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if h := idempotency.ToolHash("stripe.create_charge"); len(h) != 16 || strings.ToLower(h) != h {
		t.Errorf("tool hash %q is not 16 lowercase hex", h)
	}
	c := idempotency.Scope{Workspace: "ws_acme", Tool: "cap.send_email"}
	got, err = c.StorageKey("obol:", testKey)
	if err != nil || !strings.Contains(got, ":unresolved:") {
		t.Errorf("capability key %q, %v", got, err)
	}
}

func TestToolHashIsXXHash64(t *testing.T) {
	// xxhash64("") with seed 0 is ef46db3751d8e999 (the algorithm's published test vector).
	if got := idempotency.ToolHash(""); got != "ef46db3751d8e999" {
		t.Errorf("ToolHash(\"\") = %s", got)
	}
}

func TestScopeValidation(t *testing.T) {
	long := strings.Repeat("a", 129)
	bad := []idempotency.Scope{
		{Workspace: "", Connection: "c", Tool: "t"},
		{Workspace: "w", Connection: "", Tool: "t"},
		{Workspace: "w", Connection: "c", Tool: ""},
		{Workspace: "a:b", Connection: "c", Tool: "t"},
		{Workspace: "w", Connection: "b:c", Tool: "t"},
		{Workspace: "w{x}", Connection: "c", Tool: "t"},
		{Workspace: "w", Connection: "{c}", Tool: "t"},
		{Workspace: long, Connection: "c", Tool: "t"},
		{Workspace: "w", Connection: "unresolved", Tool: "t"},
		{Workspace: "w", Connection: "conn", Tool: "cap.x"},
		{Workspace: "w s", Connection: "c", Tool: "t"},
		{Workspace: "w", Connection: "c\n", Tool: "t"},
		{Workspace: "wé", Connection: "c", Tool: "t"},
	}
	for _, s := range bad {
		if _, err := s.StorageKey("obol:", testKey); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Errorf("%+v: err %v, want ErrInvalidScope", s, err)
		}
	}
	for _, p := range []string{"{obol}:", "ob ol", "a}", strings.Repeat("p", 65)} {
		s := idempotency.Scope{Workspace: "w", Connection: "c", Tool: "t"}
		if _, err := s.StorageKey(p, testKey); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Errorf("prefix %q: err %v, want ErrInvalidScope", p, err)
		}
	}
	ok := idempotency.Scope{Workspace: strings.Repeat("a", 128), Connection: "A-z_0.9", Tool: "any tool: {name}"}
	if _, err := ok.StorageKey("", testKey); err != nil {
		t.Errorf("valid scope refused: %v", err)
	}
	if _, err := ok.StorageKey("obol:", idempotency.Key{}); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Errorf("zero key: %v", err)
	}
}

// Two different scopes never render the same storage key: segments cannot
// hold the separator, so the rendering is injective up to a 64-bit collision
// of tool hashes (which the record's route fingerprint, which names the tool,
// turns into a destination_conflict).
func TestStorageKeyInjective(t *testing.T) {
	segs := []string{"a", "b", "a.b", "a_b", "ab", "a-b", "b.a", "unresolved2", "A", "a.", ".a"}
	tools := []string{"t", "t2", "cap.t", "cap.t2", "a:b", "a"}
	seen := map[string]idempotency.Scope{}
	for _, w := range segs {
		for _, c := range append(segs, "") {
			for _, tool := range tools {
				s := idempotency.Scope{Workspace: w, Connection: c, Tool: tool}
				k, err := s.StorageKey("obol:", testKey)
				if err != nil {
					continue
				}
				if prev, dup := seen[k]; dup {
					t.Fatalf("%+v and %+v both render %q", prev, s, k)
				}
				seen[k] = s
			}
		}
	}
	if len(seen) < 300 {
		t.Fatalf("only %d scopes rendered; the test lost its power", len(seen))
	}
}

func FuzzStorageKeyInjective(f *testing.F) {
	f.Add("a", "b:c", "t", "a:b", "c", "t")
	f.Add("ws", "conn", "cap.x", "ws", "", "cap.x")
	f.Fuzz(func(t *testing.T, w1, c1, t1, w2, c2, t2 string) {
		s1 := idempotency.Scope{Workspace: w1, Connection: c1, Tool: t1}
		s2 := idempotency.Scope{Workspace: w2, Connection: c2, Tool: t2}
		k1, err1 := s1.StorageKey("obol:", testKey)
		k2, err2 := s2.StorageKey("obol:", testKey)
		if err1 != nil || err2 != nil {
			return
		}
		if strings.ContainsAny(k1, "{}") {
			t.Fatalf("key %q has a brace", k1)
		}
		same := s1.Workspace == s2.Workspace && s1.Connection == s2.Connection &&
			idempotency.ToolHash(s1.Tool) == idempotency.ToolHash(s2.Tool)
		if (k1 == k2) != same {
			t.Fatalf("%+v -> %q, %+v -> %q", s1, k1, s2, k2)
		}
	})
}
