package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/proof/internal/lincheck"
)

// This file is the soak's only contact with the linearizability lane
// (proof/internal/lincheck): an in-process redisstore.Store on the phase's
// Redis, through the same fault proxies as the gateways, under the same
// storm, whose claim/reserve/renew/finalize/settle/lookup history porcupine
// checks against the lifecycle model.

// laneLease is the lane store's lease: the gateways' (config.go).
const laneLease = 2 * time.Second

// lane is one running lincheck lane and the client under its store.
type lane struct {
	l      *lincheck.Lane
	client rueidis.Client
}

// newLane connects a store under its own prefix (its keys never meet the
// gateways') and makes the lane; Run starts it.
func newLane(ctx context.Context, w *world) (*lane, error) {
	var addrs []string
	for _, p := range w.proxies {
		addrs = append(addrs, p.Addr())
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true,
		ConnWriteTimeout: 2 * time.Second, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		return nil, fmt.Errorf("soak: lane client: %w", err)
	}
	opts := redisstore.Options{Prefix: "soaklin:", Lease: laneLease}
	if w.cluster != nil {
		opts.WaitReplicas = 1
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Faults may already run: a cut connection can end New (its INFO or
	// SET NX) like any other command, so it is tried again until sctx ends.
	st, err := redisstore.New(sctx, c, opts)
	for err != nil && sctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		st, err = redisstore.New(sctx, c, opts)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("soak: lane store: %w", err)
	}
	l, err := lincheck.NewLane(lincheck.Config{Store: st, Settler: st, Workspace: "ws_lin",
		Keys: 16, Workers: 4, Seed: w.opt.seed + int64(len(w.topology)), Lease: st.Lease()})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &lane{l: l, client: c}, nil
}

// run drives the lane until ctx ends.
func (ln *lane) run(ctx context.Context) error { return ln.l.Run(ctx) }

// check checks the history so far (operations still running count as
// ambiguous).
func (ln *lane) check(timeout time.Duration) lincheck.Result { return ln.l.Check(timeout) }

func (ln *lane) close() { ln.client.Close() }

// firstLines keeps a report printable.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}
