package main

import (
	"context"
	"fmt"
	"time"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// quotaCalls is how many claim-and-finalize calls one side of row 6 makes
// (a tenth with -quick).
const quotaCalls = 2000

// quotaBatch is how many tokens a gateway leases per TakeTokens: 0.1 s of
// the demo's 100 calls/s (mcpgateway's batch).
const quotaBatch = 10

// quotaRows measures row 6: the Redis time fair share adds to a call. One
// side claims and finalizes fresh keys (1 KiB body) through a store with
// no quotas; the other through a store with Options.AccountBytes (the
// stored-bytes counter, flushed every 250 ms) and one TakeTokens of
// quotaBatch tokens per quotaBatch calls, as a gateway with a rate and a
// stored_bytes quota does. Both add their quota work off the call's path;
// what it costs is Redis time, read from INFO cpu (user plus system)
// around each side, the last flush included.
func quotaRows(ctx context.Context, o *options, e *env, t *table) error {
	w, err := newWorkload()
	if err != nil {
		return err
	}
	acct, err := redisstore.New(ctx, e.client, redisstore.Options{AccountBytes: 250 * time.Millisecond})
	if err != nil {
		return err
	}
	kind := recordKinds()[1] // the 1 KiB charge
	calls := quotaCalls
	if o.quick {
		calls /= 10
	}
	side := func(quotas bool) (float64, error) {
		if err := e.flush(ctx); err != nil {
			return 0, err
		}
		st := e.store
		if quotas {
			st = acct
		}
		cpu0, err := e.redisCPU(ctx)
		if err != nil {
			return 0, err
		}
		for i := range calls {
			if quotas && i%quotaBatch == 0 {
				if _, _, err := acct.TakeTokens(ctx, w.scope.Workspace, 1e6, 1e6, quotaBatch); err != nil {
					return 0, err
				}
			}
			k, token, err := claimedOn(ctx, st, w)
			if err != nil {
				return 0, err
			}
			if err := finalizeOn(ctx, st, w, k, token, kind.result(uint64(i))); err != nil {
				return 0, err
			}
		}
		if quotas {
			// Wait out the flusher's next round: its pipeline is this side's.
			time.Sleep(300 * time.Millisecond)
		}
		cpu1, err := e.redisCPU(ctx)
		if err != nil {
			return 0, err
		}
		return (cpu1 - cpu0) / float64(calls), nil
	}
	var with, without []float64
	for round := range o.rounds {
		for j := range 2 {
			q := (round+j)%2 == 0
			us, err := side(q)
			if err != nil {
				return err
			}
			if q {
				with = append(with, us)
			} else {
				without = append(without, us)
			}
		}
		fmt.Fprintf(o.progress, "quota, round %d: Redis %.1fµs/call with quotas, %.1fµs without\n", round+1, with[len(with)-1], without[len(without)-1])
	}
	acct.Close()
	mw, mo := median(with), median(without)
	t.add(row{"6", "quota accounting: Redis time per call (claim + finalize, 1 KiB), with a rate and stored_bytes quota vs none",
		fmt.Sprintf("%.1fµs (%+.1fµs)", mw, mw-mo), fmt.Sprintf("%.1fµs", mo), fmt.Sprintf("%.2f", mw/mo), "-", info})
	return e.flush(ctx)
}
