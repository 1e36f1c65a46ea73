package redisstore

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
)

// TestBindingLetters: every binding has its own record letter and reads
// back as itself; the in-process ones are i and k (k is on the claim's
// redispatch allow-list with h and p), and a kind without a letter is
// refused rather than stored as another.
func TestBindingLetters(t *testing.T) {
	want := map[effectspec.BindingKind]string{
		effectspec.BindingHeader: "h", effectspec.BindingBodyPointer: "p", effectspec.BindingUnsupported: "u",
		effectspec.BindingInProcess: "i", effectspec.BindingInProcessKeyed: "k",
	}
	for kind, letter := range want {
		c, ok := bindingCode(kind)
		if !ok || c != letter {
			t.Errorf("bindingCode(%s) = %q, %v; want %q", kind, c, ok, letter)
		}
		if back, ok := codeBinding(c); !ok || back != kind {
			t.Errorf("codeBinding(%q) = %s, %v; want %s", c, back, ok, kind)
		}
	}
	if _, ok := bindingCode("query"); ok {
		t.Error("an unknown binding got a letter")
	}
	if _, ok := codeBinding("q"); ok {
		t.Error("an unknown letter read as a binding")
	}
}
