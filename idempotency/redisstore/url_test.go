package redisstore

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/internal/redistest"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in    string
		addrs []string
		user  string
		pass  string
		db    int
		tls   bool
		unix  bool
	}{
		{in: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{in: "redis://localhost", addrs: []string{"localhost:6379"}},
		{in: "REDIS://localhost", addrs: []string{"localhost:6379"}},
		{in: "redis://u:p%40ss@r.example:6380/2", addrs: []string{"r.example:6380"}, user: "u", pass: "p@ss", db: 2},
		{in: "rediss://:secret@r.example:6380", addrs: []string{"r.example:6380"}, pass: "secret", tls: true},
		{in: "redis://a:7000,b:7001,c", addrs: []string{"a:7000", "b:7001", "c:6379"}},
		{in: "redis://:pw@a:7000,b:7001?dial_timeout=2s", addrs: []string{"a:7000", "b:7001"}, pass: "pw"},
		{in: "rediss://a:7000,b:7001/", addrs: []string{"a:7000", "b:7001"}, tls: true},
		{in: "127.0.0.1:7000,127.0.0.1:7001", addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
		{in: " redis://[::1]:7000,[::1]:7001 ", addrs: []string{"[::1]:7000", "[::1]:7001"}},
		{in: "valkey://u:pw@v.example:6390/3", addrs: []string{"v.example:6390"}, user: "u", pass: "pw", db: 3},
		{in: "valkey://a:7000,b", addrs: []string{"a:7000", "b:6379"}},
		{in: "valkeys://:pw@v.example", addrs: []string{"v.example:6379"}, pass: "pw", tls: true},
		{in: "valkeys://a:7000,b:7001", addrs: []string{"a:7000", "b:7001"}, tls: true},
		{in: "unix:///run/redis/redis.sock", addrs: []string{"/run/redis/redis.sock"}, unix: true},
		{in: "unix://u:p%40ss@/run/redis.sock?db=4", addrs: []string{"/run/redis.sock"}, user: "u", pass: "p@ss", db: 4, unix: true},
		{in: "unix:///tmp/a,b.sock", addrs: []string{"/tmp/a,b.sock"}, unix: true}, // a comma is part of the path
		{in: "unix:///tmp/my%20redis.sock", addrs: []string{"/tmp/my redis.sock"}, unix: true},
	} {
		opt, err := ParseURL(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !slices.Equal(opt.InitAddress, c.addrs) || opt.Username != c.user || opt.Password != c.pass || opt.SelectDB != c.db || (opt.TLSConfig != nil) != c.tls {
			t.Fatalf("%s: got %v %q %q db %d tls %v", c.in, opt.InitAddress, opt.Username, opt.Password, opt.SelectDB, opt.TLSConfig != nil)
		}
		if (opt.DialCtxFn != nil) != c.unix {
			t.Fatalf("%s: unix dialer %v, want %v", c.in, opt.DialCtxFn != nil, c.unix)
		}
		if !opt.DisableCache || opt.ConnLifetime != 0 {
			t.Fatalf("%s: cache %v lifetime %v", c.in, opt.DisableCache, opt.ConnLifetime)
		}
	}
}

// The TLS schemes verify the server's name: the host of the URL.
func TestParseURLTLSServerName(t *testing.T) {
	for _, in := range []string{"rediss://r.example:6380", "valkeys://r.example:6380"} {
		opt, err := ParseURL(in)
		if err != nil {
			t.Fatal(err)
		}
		if opt.TLSConfig.ServerName != "r.example" || opt.TLSConfig.InsecureSkipVerify {
			t.Errorf("%s: server name %q, skip verify %v", in, opt.TLSConfig.ServerName, opt.TLSConfig.InsecureSkipVerify)
		}
	}
}

func TestParseURLErrorsHideSecrets(t *testing.T) {
	for _, in := range []string{
		"",
		"http://a:1",
		"hunter2://a:1",
		"redis://user:hunter2@a:1,,b:2",
		"redis://user:hunter2@a:1,user:hunter2@b:2",
		"redis://user:hunter2@a:notaport",
		"redis://user:hunter2@a:1,b:2/3",
		"redis://user:hunter2@a:1/x",
		"redis://user:hunter2@a:1,b:2/x/y",
		"redis://user:hunter2@a:1,b:hunter2",
		"redis://user:hunter2@a:1,hunter2 b:2",
		"redis://user:%hunter2@a:1",           // a bad escape: net/url quotes it
		"redis://user:hun/ter2@a:1",           // an unescaped '/' ends the authority early
		"redis://user:hunter2@a:1/hunter2",    // rueidis quotes a bad database number
		"redis://user:hunter2@a:1?db=hunter2", // ... from the query too
		"redis://user:hunter2@a:1?dial_timeout=hunter2",
		"rediss://user:hunter2@a:1?skip_verify=hunter2",
		"valkey://user:hunter2@a:1/x/y",
		"valkeys://user:hunter2@a:notaport",
		"unix://user:hunter2@",
		"unix://user:hunter2@/",
		"unix://user:hunter2@/tmp/",
		"unix://user:hunter2@hunter2/tmp/redis.sock",
		"unix://localhost/tmp/redis.sock",
		"unix://user:hunter2@/tmp/redis.sock?addr=hunter2:1",
		"unix://user:hunter2@/tmp/redis.sock?db=hunter2",
		"unix://user:%hunter2@/tmp/redis.sock",
		"unix://user:hunter2@x@/tmp/redis.sock",
	} {
		_, err := ParseURL(in)
		if err == nil {
			t.Errorf("%q accepted", in)
			continue
		}
		// Not even a part of the secret, nor anything quoted from the URL.
		if msg := err.Error(); strings.Contains(msg, "hun") || strings.Contains(msg, "ter2") || strings.ContainsAny(msg, "\"%") || !strings.HasPrefix(msg, "redisstore: redis URL: ") {
			t.Errorf("%q: error %q", in, err)
		}
	}
}

// TestParseURLUnixSocketOnRedis connects through a unix:// URL, password
// and database included, to a real Redis and runs a Store over the socket.
func TestParseURLUnixSocketOnRedis(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	srv := redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	opt, err := ParseURL("unix://:s3cret@" + sock + "?db=1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().ClientInfo().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "addr="+sock) || !strings.Contains(info, " db=1 ") {
		t.Errorf("client is not on the socket and database 1: %s", info)
	}
	if _, err := New(context.Background(), c, Options{}); err != nil {
		t.Fatalf("New over the socket: %v", err)
	}
}

// FuzzParseURL: no panic, no password and nothing quoted in any error, and
// every accepted input keeps the store's required options.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://u:p@h:1/2", "a:1,b:2", "redis://:p@a,b,c?dial_timeout=1s", "redis://[::1]:1",
		"valkey://h:1/2", "valkeys://a:1,b:2", "unix:///tmp/redis.sock?db=1", "unix://h/tmp/s",
	} {
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
			if msg := err.Error(); strings.Contains(msg, pw) || strings.Contains(msg, `"`) {
				t.Fatalf("error leaks the password or quotes the URL: %v", err)
			}
			return
		}
		if !opt.DisableCache || opt.ConnLifetime != 0 || len(opt.InitAddress) == 0 {
			t.Fatalf("%q: options %+v", in, opt)
		}
		scheme, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(in)), "://")
		if unix := scheme == "unix"; unix != (opt.DialCtxFn != nil) || unix && (len(opt.InitAddress) != 1 || !strings.HasPrefix(opt.InitAddress[0], "/")) {
			t.Fatalf("%q: scheme %q: dialer %v, addresses %q", in, scheme, opt.DialCtxFn != nil, opt.InitAddress)
		}
		if tls := scheme == "rediss" || scheme == "valkeys"; tls != (opt.TLSConfig != nil) {
			t.Fatalf("%q: scheme %q: TLS %v", in, scheme, opt.TLSConfig != nil)
		}
	})
}
