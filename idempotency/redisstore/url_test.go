package redisstore

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in    string
		addrs []string
		user  string
		pass  string
		db    int
		tls   bool
	}{
		{in: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{in: "redis://localhost", addrs: []string{"localhost:6379"}},
		{in: "redis://u:p%40ss@r.example:6380/2", addrs: []string{"r.example:6380"}, user: "u", pass: "p@ss", db: 2},
		{in: "rediss://:secret@r.example:6380", addrs: []string{"r.example:6380"}, pass: "secret", tls: true},
		{in: "redis://a:7000,b:7001,c", addrs: []string{"a:7000", "b:7001", "c:6379"}},
		{in: "redis://:pw@a:7000,b:7001?dial_timeout=2s", addrs: []string{"a:7000", "b:7001"}, pass: "pw"},
		{in: "rediss://a:7000,b:7001/", addrs: []string{"a:7000", "b:7001"}, tls: true},
		{in: "127.0.0.1:7000,127.0.0.1:7001", addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
		{in: " redis://[::1]:7000,[::1]:7001 ", addrs: []string{"[::1]:7000", "[::1]:7001"}},
	} {
		opt, err := ParseURL(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !slices.Equal(opt.InitAddress, c.addrs) || opt.Username != c.user || opt.Password != c.pass || opt.SelectDB != c.db || (opt.TLSConfig != nil) != c.tls {
			t.Fatalf("%s: got %v %q %q db %d tls %v", c.in, opt.InitAddress, opt.Username, opt.Password, opt.SelectDB, opt.TLSConfig != nil)
		}
		if !opt.DisableCache || opt.ConnLifetime != 0 {
			t.Fatalf("%s: cache %v lifetime %v", c.in, opt.DisableCache, opt.ConnLifetime)
		}
	}
}

func TestParseURLErrorsHideSecrets(t *testing.T) {
	for _, in := range []string{
		"",
		"http://a:1",
		"redis://user:hunter2@a:1,,b:2",
		"redis://user:hunter2@a:1,user:hunter2@b:2",
		"redis://user:hunter2@a:notaport",
		"redis://user:hunter2@a:1,b:2/3",
		"redis://user:hunter2@a:1/x",
		"redis://user:hunter2@a:1,b:2/x/y",
	} {
		_, err := ParseURL(in)
		if err == nil {
			t.Fatalf("%q accepted", in)
		}
		if strings.Contains(err.Error(), "hunter2") || !strings.HasPrefix(err.Error(), "redisstore: ") {
			t.Fatalf("%q: error %q", in, err)
		}
	}
}

// FuzzParseURL: no panic, no password in any error, and every accepted
// input keeps the store's required options.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379", "rediss://u:p@h:1/2", "a:1,b:2", "redis://:p@a,b,c?dial_timeout=1s", "redis://[::1]:1"} {
		f.Add(s, "s3cr3tpw")
	}
	f.Fuzz(func(t *testing.T, s, pw string) {
		if len(pw) < 6 || strings.ContainsAny(pw, "@/?#:,%[] \"\\") || strings.Contains(strconv.Quote(s), pw) {
			return
		}
		in := "redis://user:" + pw + "@" + s
		if strings.Contains(s, "://") {
			in = strings.Replace(s, "://", "://user:"+pw+"@", 1)
		}
		opt, err := ParseURL(in)
		if err != nil {
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("error leaks the password: %v", err)
			}
			return
		}
		if !opt.DisableCache || opt.ConnLifetime != 0 || len(opt.InitAddress) == 0 {
			t.Fatalf("%q: options %+v", in, opt)
		}
	})
}
