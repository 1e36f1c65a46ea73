// Package lincheck checks that a Store is linearizable with respect to the
// claim lifecycle of docs/DESIGN.md, "The record and its lifecycle", under
// real lease expiry.
//
// A [Lane] drives a Store (and optionally its Settler) with concurrent
// clients on a few keys at a time and records every call as a porcupine
// operation; [Lane.Check] runs porcupine per key against a sequential model
// of the contract and reports the first key whose history no sequential
// order explains. The one recommended path:
//
//	l, err := lincheck.NewLane(lincheck.Config{Store: st, Settler: st, Lease: st.Lease(), Seed: seed})
//	...
//	err = l.Run(ctx)             // until ctx is done
//	res := l.Check(time.Minute)  // res.Violations == 0, or res.Report says where
//
// The store must never lose a write it acknowledged: a failover that drops
// an unWAITed renewal or finalize shows up as a violation, as it should in
// a run that means to prove the store linearizable.
//
// What the clients do, how keys are rotated and sealed, the model, how it
// judges real lease expiry, and how it treats ambiguous operations are in
// the folder's README.md.
package lincheck
