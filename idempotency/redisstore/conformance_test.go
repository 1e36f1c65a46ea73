package redisstore_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/storetest"
	"github.com/obol-gateway/obol/internal/redistest"
)

func options(cfg storetest.Config) redisstore.Options {
	return redisstore.Options{Prefix: cfg.Prefix, Lease: cfg.Lease, Retention: cfg.Retention, UnknownRetention: cfg.UnknownRetention, MaxResultBytes: cfg.MaxResultBytes}
}

func newClient(t testing.TB, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func newStore(t *testing.T, c rueidis.Client, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(t.Context(), c, opts)
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s
}

// TestConformanceMiniredis gives every subtest its own miniredis, whose clock
// the suite moves: SetTime drives TIME (which the scripts read, in miniredis
// as in Redis), FastForward drives key TTLs.
func TestConformanceMiniredis(t *testing.T) {
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, cfg storetest.Config) (idempotency.Store, func(time.Duration)) {
		mr := miniredis.RunT(t)
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		mr.SetTime(now)
		c := newClient(t, rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
		opts := options(cfg)
		opts.SkipEvictionCheck = true // miniredis has no CONFIG GET and never evicts
		return newStore(t, c, opts), func(d time.Duration) {
			now = now.Add(d)
			mr.SetTime(now)
			mr.FastForward(d)
		}
	}})
}

// TestConformanceRedis runs the suite against one real redis-server; the
// subtests share it, kept apart by their key prefixes.
func TestConformanceRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, cfg storetest.Config) (idempotency.Store, func(time.Duration)) {
		return newStore(t, c, options(cfg)), nil
	}})
}

// TestConformanceCluster runs the suite against a 3-master Redis Cluster
// through the rueidis cluster client: every script touches one key, so
// records spread over all masters.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	c := newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()})
	if len(c.Nodes()) < 3 {
		t.Fatalf("client sees %d nodes, want a cluster client over 3 masters", len(c.Nodes()))
	}
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, cfg storetest.Config) (idempotency.Store, func(time.Duration)) {
		return newStore(t, c, options(cfg)), nil
	}})
}
