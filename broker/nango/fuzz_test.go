package nango_test

import (
	"net/url"
	"path"
	"strings"
	"testing"
)

// FuzzProxyPath: a proxy path the adapter accepts can never leave /proxy/,
// whatever a server does with dot segments or percent-escapes.
func FuzzProxyPath(f *testing.F) {
	for _, s := range []string{"/crm/v3/objects", "a/b?x=1", "../a", "a/%2e%2e/b", "%2E", "a//b", "a?../..", "/", "a/.%2e", "a%2fb", "..%2f..", "%2e%2e%2fa", "a%5c..%5cb"} {
		f.Add(s)
	}
	b := newBroker(f, "https://nango.example")
	f.Fuzz(func(t *testing.T, p string) {
		rt, err := b.Route("t", proxyRouting("POST", p))
		if err != nil {
			return
		}
		u, err := url.Parse("https://nango.example" + rt.Path)
		if err != nil {
			t.Fatalf("accepted %q but its URL does not parse: %v", p, err)
		}
		// u.Path is fully decoded, %2F included: the strictest reading a
		// server could make.
		if !strings.HasPrefix(path.Clean(u.Path)+"/", "/proxy/") {
			t.Fatalf("accepted %q which escapes /proxy/: %q", p, u.Path)
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("accepted %q with a dot segment: %q", p, u.Path)
			}
		}
	})
}
