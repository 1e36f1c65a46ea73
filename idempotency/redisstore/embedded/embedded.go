// Package embedded runs a [redisstore.Store] on an in-process miniredis, in
// one call, for tests, examples and demos:
//
//	store, closeStore, err := embedded.New(ctx, redisstore.Options{})
//	defer closeStore()
//
// The store is NOT durable: every claim and receipt is lost when the process
// exits, and two processes do not share it. A production server connects to
// Redis with [redisstore.ParseURL] and [redisstore.New] instead; keeping this
// in its own package keeps miniredis out of binaries that do not import it.
package embedded

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// New starts a miniredis on a loopback port and returns a store on it and
// a function that closes the store, its client and the server. TTLs follow
// the wall clock, so records expire after their retention as in Redis.
// opts are the store's options; SkipEvictionCheck is set (miniredis has no
// CONFIG and never evicts).
func New(ctx context.Context, opts redisstore.Options) (*redisstore.Store, func(), error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("embedded: miniredis: %w", err)
	}
	// miniredis ages TTLs only when told. (Leases use Redis TIME, which is
	// real either way.)
	mr.ClockTTL(true)
	store, closeStore, err := On(ctx, mr, opts)
	if err != nil {
		mr.Close()
		return nil, nil, err
	}
	return store, func() { closeStore(); mr.Close() }, nil
}

// On returns a store on mr, a miniredis the caller started and closes (a
// test that fast-forwards its clock or injects faults through it), and a
// function that closes the store and its client, not mr.
func On(ctx context.Context, mr *miniredis.Miniredis, opts redisstore.Options) (*redisstore.Store, func(), error) {
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{mr.Addr()},
		// miniredis has no client-side caching.
		DisableCache: true,
		// Pooled connections: the caller writes and reads its own command
		// instead of handing it to a pipeline's writer and reader
		// goroutines, which is faster for one request at a time.
		DisableAutoPipelining: true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("embedded: client: %w", err)
	}
	opts.SkipEvictionCheck = true
	store, err := redisstore.New(ctx, client, opts)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); client.Close() }, nil
}
