package main

import (
	"context"
	"fmt"
	"io"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
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
// miniredis when redisURL is empty. release frees everything it opened.
func openStore(ctx context.Context, cfg *config, redisURL string, stderr io.Writer) (_ *redisstore.Store, release func(), err error) {
	opts := redisstore.Options{Prefix: cfg.Prefix, Retention: cfg.Retention, Lease: cfg.Lease, ReadTimeout: storeReadTimeout}
	var (
		clientOpt rueidis.ClientOption
		mr        *miniredis.Miniredis
	)
	if redisURL == "" {
		mr = miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, nil, fmt.Errorf("refserver: embedded store: %w", err)
		}
		fmt.Fprint(stderr, notDurableBanner)
		// miniredis ages TTLs only when told: follow the wall clock so that
		// retention is honoured. (Leases use Redis TIME, which is real.)
		mr.ClockTTL(true)
		clientOpt = rueidis.ClientOption{InitAddress: []string{mr.Addr()}}
		// miniredis has no CONFIG and never evicts.
		opts.SkipEvictionCheck = true
	} else {
		clientOpt, err = redisstore.ParseURL(redisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("refserver: -redis: %w", err)
		}
	}
	// Server-assisted client caching is of no use to scripts and miniredis
	// lacks it.
	clientOpt.DisableCache = true
	client, err := rueidis.NewClient(clientOpt)
	if err != nil {
		if mr != nil {
			mr.Close()
		}
		return nil, nil, fmt.Errorf("refserver: redis: %w", err)
	}
	release = func() {
		client.Close()
		if mr != nil {
			mr.Close()
		}
	}
	st, err := redisstore.New(ctx, client, opts)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("refserver: %w", err)
	}
	return st, release, nil
}
