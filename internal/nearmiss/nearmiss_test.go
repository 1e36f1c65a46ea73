package nearmiss

import (
	"strings"
	"testing"
)

// TestSkeleton pins the reduction the rule compares: letters and digits
// only, folded; digits never vanish, so they keep names apart.
func TestSkeleton(t *testing.T) {
	for in, want := range map[string]string{
		"dev.obol/Idempotency-Key":           "devobolidempotencykey",
		"dev.obol/idempotency-\u212aey":      "devobolidempotencykey", // Kelvin sign
		"\u017fs":                            "ss",                    // long s
		"\u0130d\u0131":                      "idi",                   // Turkic dotted I, dotless i
		"\uff29\uff44\uff45\uff4d":           "idem",                  // fullwidth
		"i\u0307dem":                         "idem",                  // combining dot above
		"a\x00b\u200bc\u202ed\ufeffe":        "abcde",                 // NUL, zero width, bidi, BOM
		"idempotency2key":                    "idempotency2key",
		"bad\xffutf8":                        "badutf8",
		strings.Repeat("Ab-", 40) + "\u212a": strings.Repeat("ab", 40) + "k", // longer than the stack buffer
	} {
		if got := string(Skeleton(nil, []byte(in))); got != want {
			t.Errorf("Skeleton(%q) = %q, want %q", in, got, want)
		}
	}
}
