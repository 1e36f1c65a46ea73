package printable

import "testing"

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 10, "plain"},
		{"a\x1b[31mb\u202ec\u2028d\n", 20, "a [31mb c d "},
		{"abcdef", 3, "abc..."},
		{"", 0, ""},
	} {
		if got := Cut(c.in, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
