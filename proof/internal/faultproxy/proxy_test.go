package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/internal/redistest"
)

const incrScript = "return redis.call('INCR', KEYS[1])"

func start(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// client is a bare RESP connection through the proxy, so a test sees
// exactly what the proxy forwards and nothing a client library retries.
type client struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(args ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.t.Fatal(err)
	}
}

// reply reads one reply, waiting at most d.
func (c *client) reply(d time.Duration) (string, error) {
	if err := c.c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	raw, err := readValue(c.r)
	return string(raw), err
}

func nextEvent(t *testing.T, p *Proxy) Event {
	t.Helper()
	select {
	case e := <-p.Events():
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return Event{}
	}
}

// waitValue polls Redis directly until key holds want.
func waitValue(t *testing.T, srv *redistest.Server, key, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := srv.Do("GET", key)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %v, %v; want %q", key, got, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDropRepliesAfterRedisRan: a dropped script reply is an error for the
// client although Redis ran the script; the next script passes.
func TestDropRepliesAfterRedisRan(t *testing.T) {
	srv := redistest.Start(t)
	p := start(t, srv.Addr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true,
		ForceSingleClient: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	incr := func() error {
		return c.Do(ctx, c.B().Eval().Script(incrScript).Numkeys(1).Key("n").Build()).Error()
	}
	p.DropReplies(1)
	if err := incr(); err == nil {
		t.Fatal("a dropped reply came back without an error")
	}
	if got, err := srv.Do("GET", "n"); err != nil || got != "1" {
		t.Fatalf("GET n = %v, %v; want 1: Redis ran the script whose reply was dropped", got, err)
	}
	if e := nextEvent(t, p); e.Action != DropReplyCut || e.Key != "n" {
		t.Errorf("event %v, want drop_reply_cut on n", e)
	}
	if err := incr(); err != nil {
		t.Fatalf("the script after the dropped one: %v", err)
	}
	if n := p.CutAll(); n < 1 {
		t.Errorf("CutAll cut %d connections, want at least the client's", n)
	}
}

// TestRules drives each action through a bare connection and checks what
// Redis ran and what the client got.
func TestRules(t *testing.T) {
	srv := redistest.Start(t)
	p := start(t, srv.Addr())
	eval := func(c *client, key string) { c.send("EVAL", incrScript, "1", key) }

	t.Run("pass", func(t *testing.T) {
		c := dial(t, p.Addr())
		eval(c, "pass")
		if got, err := c.reply(10 * time.Second); err != nil || got != ":1\r\n" {
			t.Fatalf("reply %q, %v; want :1", got, err)
		}
	})

	t.Run("hold command", func(t *testing.T) {
		p.SetRule(OnScript("script?", "held", HoldCommand))
		defer p.SetRule(nil)
		c := dial(t, p.Addr())
		eval(c, "held")
		if e := nextEvent(t, p); e != (Event{HoldCommand, "script?", "held"}) {
			t.Errorf("event %v", e)
		}
		c.send("SET", "after-held", "x") // the rest of the connection is held too
		if got, err := c.reply(300 * time.Millisecond); !isTimeout(err) {
			t.Fatalf("reply %q, %v; want none", got, err)
		}
		for _, k := range []string{"held", "after-held"} {
			if got, err := srv.Do("GET", k); err != nil || got != nil {
				t.Errorf("GET %s = %v, %v; want nil: Redis must never have seen it", k, got, err)
			}
		}
	})

	t.Run("hold reply", func(t *testing.T) {
		p.SetRule(OnScript("script?", "withheld", HoldReply))
		defer p.SetRule(nil)
		c := dial(t, p.Addr())
		eval(c, "withheld")
		if e := nextEvent(t, p); e.Action != HoldReply {
			t.Errorf("event %v", e)
		}
		waitValue(t, srv, "withheld", "1")
		if got, err := c.reply(300 * time.Millisecond); !isTimeout(err) {
			t.Fatalf("reply %q, %v; want none", got, err)
		}
	})

	t.Run("drop reply and cut", func(t *testing.T) {
		p.SetRule(OnScript("script?", "dropped", DropReplyCut))
		defer p.SetRule(nil)
		dropped := make(chan []string, 4)
		p.SetOnDropped(func(cmd []string) { dropped <- cmd })
		defer p.SetOnDropped(nil)
		c := dial(t, p.Addr())
		eval(c, "dropped")
		if got, err := c.reply(10 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("reply %q, %v; want the connection closed", got, err)
		}
		select {
		case cmd := <-dropped:
			if k, key := ScriptKind(cmd); k != "script?" || key != "dropped" {
				t.Errorf("dropped %q (%s %s); want the script on dropped", cmd, k, key)
			}
		default:
			t.Error("SetOnDropped's function was not called before the connection closed")
		}
		if got, err := srv.Do("GET", "dropped"); err != nil || got != "1" {
			t.Errorf("GET dropped = %v, %v; want 1", got, err)
		}
		// OnScript fires once: the re-send passes.
		c = dial(t, p.Addr())
		eval(c, "dropped")
		if got, err := c.reply(10 * time.Second); err != nil || got != ":2\r\n" {
			t.Fatalf("re-send: reply %q, %v; want :2", got, err)
		}
	})

	t.Run("latency", func(t *testing.T) {
		p.SetLatency(5 * time.Millisecond)
		defer p.SetLatency(0)
		c := dial(t, p.Addr())
		c.send("PING")
		if got, err := c.reply(10 * time.Second); err != nil || got != "+PONG\r\n" {
			t.Fatalf("reply %q, %v; want +PONG", got, err)
		}
	})

	t.Run("cut all", func(t *testing.T) {
		c := dial(t, p.Addr())
		c.send("PING")
		if _, err := c.reply(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if n := p.CutAll(); n < 1 {
			t.Fatalf("CutAll cut %d, want at least 1", n)
		}
		c.send("PING")
		if got, err := c.reply(10 * time.Second); err == nil || isTimeout(err) {
			t.Fatalf("reply %q, %v on a cut connection", got, err)
		}
	})
}

// TestPushesPassThrough: RESP3 pushes answer no command and must not
// consume a command's action.
func TestPushesPassThrough(t *testing.T) {
	srv := redistest.Start(t)
	p := start(t, srv.Addr())
	c := dial(t, p.Addr())
	c.send("HELLO", "3")
	if got, err := c.reply(10 * time.Second); err != nil || !strings.HasPrefix(got, "%") {
		t.Fatalf("HELLO 3: %q, %v", got, err)
	}
	c.send("SUBSCRIBE", "ch")
	if got, err := c.reply(10 * time.Second); err != nil || !strings.HasPrefix(got, ">3\r\n") {
		t.Fatalf("SUBSCRIBE: %q, %v", got, err)
	}
	if _, err := srv.Do("PUBLISH", "ch", "hi"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.reply(10 * time.Second); err != nil || !strings.HasSuffix(got, "$2\r\nhi\r\n") {
		t.Fatalf("message: %q, %v", got, err)
	}
	c.send("PING")
	if got, err := c.reply(10 * time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("PING after pushes: %q, %v", got, err)
	}
}

// TestReplicationThroughProxy: a replica of the proxy's address
// replicates, since PSYNC turns its connection into a raw stream.
func TestReplicationThroughProxy(t *testing.T) {
	master := redistest.Start(t)
	p := start(t, master.Addr())
	host, port, _ := net.SplitHostPort(p.Addr())
	replica := redistest.Start(t, "--replicaof", host, port)
	if _, err := master.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	waitValue(t, replica, "k", "v")
	if _, err := master.Do("SET", "k", "w"); err != nil {
		t.Fatal(err)
	}
	waitValue(t, replica, "k", "w")
}

func TestNewRejectsBadTarget(t *testing.T) {
	for _, target := range []string{"", "localhost", "redis://127.0.0.1:6379"} {
		if p, err := New(target); err == nil {
			_ = p.Close()
			t.Errorf("New(%q) = nil error", target)
		}
	}
}

func TestCloseTwice(t *testing.T) {
	p, err := New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
