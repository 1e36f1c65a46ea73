package ident

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want "" means valid
	}{
		{"letters digits and punctuation", "Acme_42.prod-eu", ""},
		{"one byte", "a", ""},
		{"dot only", ".", ""},
		{"capability", "cap.send_email", ""},
		{"longest", strings.Repeat("x", MaxLen), ""},
		{"empty", "", "must not be empty"},
		{"one too long", strings.Repeat("x", MaxLen+1), "longer than 128 bytes"},
		{"colon", "acme:evil", "byte 4 is not in [A-Za-z0-9_.-]"},
		{"open brace", "{acme}", "byte 0 is not in [A-Za-z0-9_.-]"},
		{"space", "ac me", "byte 2 is not in [A-Za-z0-9_.-]"},
		{"slash", "a/b", "byte 1 is not in [A-Za-z0-9_.-]"},
		{"nul", "ab\x00", "byte 2 is not in [A-Za-z0-9_.-]"},
		{"del", "\x7f", "byte 0 is not in [A-Za-z0-9_.-]"},
		{"non-ASCII", "caf\u00e9", "byte 3 is not in [A-Za-z0-9_.-]"},
		{"first bad byte wins", "a:b c", "byte 1 is not in [A-Za-z0-9_.-]"},
		{"too long beats bad bytes", strings.Repeat(":", MaxLen+1), "longer than 128 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.in)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("Check = %q, want %q", got, tc.want)
			}
			if Valid(tc.in) != (tc.want == "") {
				t.Fatalf("Valid = %v, but Check = %q", Valid(tc.in), got)
			}
		})
	}
}

// FuzzCheck holds Check and Valid to the alphabet, byte by byte, and to the
// promise that an error never quotes its input.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", "a", "acme", "cap.x", "a:b", "{x}", "caf\u00e9", strings.Repeat("z", MaxLen+1)} {
		f.Add(s)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && len(s) <= MaxLen
		for i := 0; i < len(s); i++ {
			if strings.IndexByte(alphabet, s[i]) < 0 {
				want = false
			}
		}
		err := Check(s)
		if (err == nil) != want || Valid(s) != want {
			t.Fatalf("%q: Check = %v, Valid = %v, want valid %v", s, err, Valid(s), want)
		}
		if err != nil && len(s) >= 4 && strings.Contains(err.Error(), s) {
			t.Fatalf("error %q quotes the input", err)
		}
	})
}
