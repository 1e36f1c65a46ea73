// Package storetest is the conformance suite that every [idempotency.Store]
// passes. It checks the state table of docs/DESIGN.md, "The record and its
// lifecycle", row by row, the fencing-token compare-and-set of Reserve and
// Finalize, lease expiry, re-sent operations, approval tickets, retention,
// bad input, and concurrent callers.
//
// The one recommended path, in a store package's tests: [Run] with a
// [Harness]:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T, cfg storetest.Config) (idempotency.Store, func(time.Duration)) {
//				return mystore.New(cfg.Prefix, cfg.Lease, cfg.Retention, cfg.UnknownRetention, cfg.MaxResultBytes), nil
//			},
//		})
//	}
//
// The Settle and List groups need the store to be an [idempotency.Settler]
// too; one that is not fails them.
//
// A store on a fake clock returns an advance function; one on wall time
// returns nil and the suite sleeps (a few seconds in all, in parallel).
//
// The suite's own tests run it against a model store built on package
// idempotency/lifecycle (the rows as code) and against broken variants of
// it, each of which a named subtest must catch.
//
// The decisions where the contract is silent, which the suite enforces, are
// listed in the folder's README.md.
package storetest
