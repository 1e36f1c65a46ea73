package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
)

const notDurableBanner = `
************************************************************************
*  EMBEDDED STORE: an in-process miniredis. It is NOT DURABLE.         *
*  Every claim, receipt and approval ticket is lost when this process  *
*  exits, and several processes do not share it. Use -redis URL for    *
*  anything but a demo.                                                *
************************************************************************
`

// openStore connects the store: Redis at redisURL, or the embedded
// miniredis when redisURL is empty, reached over loopback; it is not
// durable and not shared, which the server says loudly on start. The
// returned function frees everything it opened.
func openStore(ctx context.Context, opts redisstore.Options, redisURL string, stderr io.Writer) (*redisstore.Store, func(), error) {
	opts = brokenStore(opts) // the identity unless built with -tags obolmutant
	if redisURL == "" {
		st, release, err := embedded.New(ctx, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("refserver: embedded store: %w", err)
		}
		fmt.Fprint(stderr, notDurableBanner)
		return st, release, nil
	}
	if _, err := redisstore.ParseURL(redisURL); err != nil {
		return nil, nil, fmt.Errorf("refserver: -redis: %w", err)
	}
	// Pooled connections, not auto-pipelining (redisstore.Dial): measured
	// side by side in examples/bench row 4, 1 client 953/s -> 1,056/s, 32
	// clients 2,557/s -> 3,287/s.
	client, err := redisstore.Dial(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("refserver: %w", err)
	}
	st, err := redisstore.New(ctx, client, opts)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("refserver: %w", err)
	}
	return st, func() { st.Close(); client.Close() }, nil
}

const noPersistenceBanner = `
************************************************************************
*  WARNING: the Redis behind this gateway persists NOTHING (appendonly  *
*  no, no save points). A Redis restart forgets every claim, and a      *
*  client's retry after it dispatches a second time. Enable AOF         *
*  (appendonly yes, appendfsync everysec or always) before production.  *
************************************************************************
`

// checkDurability reads the store's persistence settings for /healthz and
// warns, loudly in production, when Redis persists nothing: its restart
// would forget claims. It returns what /healthz shows.
func checkDurability(ctx context.Context, st *redisstore.Store, embedded bool, env effectspec.Environment,
	log *slog.Logger, stderr io.Writer) string {
	if embedded {
		return "none (embedded store)"
	}
	d, err := st.Describe(ctx)
	switch {
	case err != nil || d.Durability == "":
		log.Warn("could not read the Redis persistence settings (CONFIG GET blocked?): a Redis restart may forget claims")
		return "unknown"
	case d.Durability == "none" && env == effectspec.Production:
		fmt.Fprint(stderr, noPersistenceBanner)
		log.Error("Redis persists nothing: a restart forgets every claim", "durability", d.Durability)
	case d.Durability == "none":
		log.Warn("Redis persists nothing: a restart forgets every claim", "durability", d.Durability)
	}
	return d.Durability
}

// logStore writes the startup line that names the store: its addresses
// (never a password), Redis version, topology, prefix, the environment and
// the number of tools.
func logStore(ctx context.Context, log *slog.Logger, st *redisstore.Store, embedded bool, env effectspec.Environment, tools int) {
	d, err := st.Describe(ctx)
	addr := strings.Join(d.Addrs, ",")
	if embedded {
		addr = "embedded (" + addr + ")"
	}
	attrs := []any{"address", addr, "redis_version", d.Version, "topology", d.Topology, "prefix", d.Prefix,
		"environment", string(env), "tools", tools}
	log.Info("store", attrs...)
	// miniredis answers no INFO: the embedded store's version is never read.
	// An error is a warning of its own, never an attribute of an INFO line.
	if err != nil && !embedded {
		log.Warn("store: Redis version and topology not read", "error", err.Error())
	}
}
