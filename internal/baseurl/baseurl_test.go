package baseurl

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"https://api.example", "https://api.example"},
		{"http://127.0.0.1:9000/api", "http://127.0.0.1:9000/api"},
		{"https://api.example/", "https://api.example"},
		{"https://api.example/v1//", "https://api.example/v1"},
		// An escaped slash is decoded: the URL sent is the path the route
		// records.
		{"https://api.example/a%2Fb/", "https://api.example/a/b"},
		{"https://api.example/a%20b", "https://api.example/a%20b"},
	} {
		u, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := u.String(); got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if u.RawPath != "" {
			t.Errorf("Parse(%q): RawPath %q, want cleared", tc.in, u.RawPath)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	const secret = "sk_live_0123456789abcdef"
	for _, tc := range []struct {
		in, want string
	}{
		{"", "required"},
		{"https://h/%zz" + secret, "not a URL"},
		{"::" + secret, "not a URL"},
		{"ftp://h/" + secret, "must be http or https"},
		{"/relative/" + secret, "must be http or https"},
		{"HTTPS://h", ""}, // url.Parse lowercases the scheme
		{"https://", "must have a host"},
		{"https:" + secret, "must have a host"},
		{"https://u:" + secret + "@h", "must not hold credentials"},
		{"https://" + secret + "@h", "must not hold credentials"},
		{"https://h/?k=" + secret, "must not have a query or fragment"},
		{"https://h/?", "must not have a query or fragment"},
		{"https://h#" + secret, "must not have a query or fragment"},
	} {
		_, err := Parse(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Parse(%q) error %q, want %q", tc.in, got, tc.want)
		}
		if err != nil && strings.Contains(got, secret) {
			t.Errorf("Parse(%q): error quotes the input", tc.in)
		}
		if (tc.want == "must not hold credentials") != errors.Is(err, ErrCredentials) {
			t.Errorf("Parse(%q): errors.Is(ErrCredentials) = %v", tc.in, errors.Is(err, ErrCredentials))
		}
	}
}
