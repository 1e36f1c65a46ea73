package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

func TestNewKeyForm(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		k := idempotency.NewKey()
		s := k.String()
		if len(s) != 36 || !strings.HasPrefix(s, "idt_") || strings.ToLower(s) != s {
			t.Fatalf("bad minted key %q", s)
		}
		if _, err := idempotency.ParseKey(s); err != nil {
			t.Fatalf("minted key does not parse: %v", err)
		}
		if seen[s] {
			t.Fatalf("duplicate minted key %q", s)
		}
		seen[s] = true
	}
}

func TestParseKey(t *testing.T) {
	const good = "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60"
	for _, s := range []string{good, `"` + good + `"`} {
		k, err := idempotency.ParseKey(s)
		if err != nil || k.String() != good {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", s, k, err, good)
		}
	}
	bad := []string{
		"", `""`, `"`, good[:35], good + "0", strings.ToUpper(good), "IDT_" + good[4:],
		"idt_5C1f0a9e2b7d4c3e8f6a1b2c3d4e5f60", " " + good, good + " ", `"` + good, good + `"`,
		`"` + good + `";a=1`, "idx_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60", "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f6g",
		good + ", " + good, `""` + good + `""`, "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f6\x00",
	}
	for _, s := range bad {
		k, err := idempotency.ParseKey(s)
		if !errors.Is(err, idempotency.ErrMalformedKey) || !k.IsZero() {
			t.Errorf("ParseKey(%q) = %q, %v; want ErrMalformedKey and zero key", s, k, err)
		}
	}
}

func TestParseKeyErrorDoesNotEchoInput(t *testing.T) {
	secret := "sk_live_abcdefghijklmnopqrstuvwxyz012345"
	_, err := idempotency.ParseKey(secret)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v must not echo the input", err)
	}
}

func TestFromHeader(t *testing.T) {
	const good = "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60"
	k, src, err := idempotency.FromHeader(nil)
	if err != nil || src != idempotency.KeyMinted || k.IsZero() {
		t.Errorf("no header: %q %q %v", k, src, err)
	}
	k, src, err = idempotency.FromHeader([]string{good})
	if err != nil || src != idempotency.KeySupplied || k.String() != good {
		t.Errorf("one header: %q %q %v", k, src, err)
	}
	if _, _, err = idempotency.FromHeader([]string{good, good}); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Errorf("two header fields: %v, want ErrMalformedKey", err)
	}
	if _, _, err = idempotency.FromHeader([]string{"nope"}); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Errorf("malformed header: %v, want ErrMalformedKey", err)
	}
}

func TestTicketID(t *testing.T) {
	id := idempotency.NewTicketID()
	if !strings.HasPrefix(id, "apt_") || !idempotency.ValidTicketID(id) {
		t.Fatalf("bad ticket %q", id)
	}
	for _, s := range []string{"", "apt_", idempotency.NewKey().String(), strings.ToUpper(id), id + "0"} {
		if idempotency.ValidTicketID(s) {
			t.Errorf("ValidTicketID(%q) = true", s)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add("idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60")
	f.Add(`"idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60"`)
	f.Add("idt_")
	f.Add(`"`)
	f.Fuzz(func(t *testing.T, s string) {
		k, err := idempotency.ParseKey(s)
		if err != nil {
			if !errors.Is(err, idempotency.ErrMalformedKey) || !k.IsZero() {
				t.Fatalf("error %v with key %q", err, k)
			}
			return
		}
		// A parsed key is canonical: it re-parses to itself and is either the
		// input or the input's SF-string form.
		k2, err := idempotency.ParseKey(k.String())
		if err != nil || k2 != k {
			t.Fatalf("round trip %q: %q %v", k, k2, err)
		}
		if s != k.String() && s != `"`+k.String()+`"` {
			t.Fatalf("ParseKey(%q) accepted a non-canonical form as %q", s, k)
		}
	})
}
