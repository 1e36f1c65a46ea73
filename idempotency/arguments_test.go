package idempotency

import (
	"bytes"
	"testing"
)

func TestArgumentsOrEmpty(t *testing.T) {
	empty, err := RequestHash([]byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		absent   bool
	}{
		{"nil", "", true},
		{"whitespace", " \t\r\n", true},
		{"null", "null", true},
		{"null in whitespace", "\n null\t", true},
		{"empty object", "{}", false},
		{"object", `{"a":null}`, false},
		{"array", "[]", false},
		{"string null", `"null"`, false},
		{"nul", "nul", false},
		{"null twice", "null null", false},
		{"null with garbage", "nullx", false},
		// Not JSON whitespace: left for the parser to refuse.
		{"vertical tab", "\v", false},
		{"no-break space", "\u00a0null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []byte
			if tc.in != "" {
				in = []byte(tc.in)
			}
			got := ArgumentsOrEmpty(in)
			if tc.absent {
				if string(got) != "{}" {
					t.Fatalf("ArgumentsOrEmpty(%q) = %q, want {}", tc.in, got)
				}
			} else if !bytes.Equal(got, in) {
				t.Fatalf("ArgumentsOrEmpty(%q) = %q, want the input", tc.in, got)
			}
			// What is sent hashes as what was claimed.
			h1, err1 := RequestHash(in)
			h2, err2 := RequestHash(got)
			if h1 != h2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("RequestHash of input %q, %v; of ArgumentsOrEmpty %q, %v", h1, err1, h2, err2)
			}
			if tc.absent && h1 != empty {
				t.Fatalf("absent arguments hash %s, want the hash of {} %s", h1, empty)
			}
		})
	}
}

// TestArgumentsOrEmptyFresh: callers may write into what they got; the {}
// of one call is not shared with the next.
func TestArgumentsOrEmptyFresh(t *testing.T) {
	a := ArgumentsOrEmpty(nil)
	a[0] = 'x'
	if b := ArgumentsOrEmpty(nil); string(b) != "{}" {
		t.Fatalf("second call = %q", b)
	}
}
