package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/internal/redistest"
)

// TestFaultProxyDropsAfterRedisRan: a dropped script reply is an error for
// the client although Redis ran the script; the next script passes.
func TestFaultProxyDropsAfterRedisRan(t *testing.T) {
	srv := redistest.Start(t)
	p, err := newFaultProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true,
		ForceSingleClient: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	incr := func() error {
		return c.Do(ctx, c.B().Eval().Script("return redis.call('INCR', KEYS[1])").Numkeys(1).Key("n").Build()).Error()
	}
	p.dropReplies(1)
	if err := incr(); err == nil {
		t.Fatal("a dropped reply came back without an error")
	}
	if got, err := srv.Do("GET", "n"); err != nil || got != "1" {
		t.Fatalf("GET n = %v, %v; want 1: Redis ran the script whose reply was dropped", got, err)
	}
	if err := incr(); err != nil {
		t.Fatalf("the script after the dropped one: %v", err)
	}
	if n := p.cutAll(); n < 1 {
		t.Errorf("cutAll cut %d connections, want at least the client's", n)
	}
}
