package main

import (
	"context"
	"errors"
	"time"
)

// This file is the soak's only contact with the linearizability lane of
// proof/internal/lincheck (claim/reserve/renew/finalize/settle histories of
// sampled keys, checked with porcupine). That package is not part of this
// tree yet; until it is, newLane reports errNoLane and the table says the
// lane did not run. Wiring it is this one function:
//
//	l, err := lincheck.NewLane(lincheck.Config{Store: st, Settler: st,
//		Workspace: "ws_lin", Keys: 32, Workers: 4, Seed: seed, Lease: 2 * time.Second})
//
// with st a redisstore.Store on the phase's Redis (through the fault proxy
// in the single phase, on the same Cluster in the other), and laneResult
// filled from lincheck.Result.

// errNoLane: the lincheck package is not available in this build.
var errNoLane = errors.New("soak: the linearizability lane (proof/internal/lincheck) is not in this tree")

// lane is the part of *lincheck.Lane the soak uses.
type lane interface {
	Run(ctx context.Context) error
	Check(timeout time.Duration) laneResult
}

// laneResult mirrors lincheck.Result.
type laneResult struct {
	Ops, Keys, Ambiguous, Violations, Undecided int
	Report                                      string
}

// newLane starts nothing yet: see the file comment.
func newLane(_ context.Context, _ *world) (lane, error) { return nil, errNoLane }
