// Package proof holds the reliability suite of Obol: tests that attack the
// promise of the idempotency core (no duplicate side effect, attempt_count
// equal to what the vendor could have seen, no acknowledged record lost)
// with real processes and real Redis on loopback, and check that it holds.
// The package has no API; it is all tests.
//
// The one recommended way to run it (redis-server 7+ in PATH; CI sets
// OBOL_REQUIRE_REDIS=1 so that a missing server fails instead of skipping):
//
//	OBOL_REQUIRE_REDIS=1 go test -count=1 -v ./proof/ | grep FIGURES
//
// Every test logs one FIGURES line: calls made, duplicates found,
// attempt_count mismatches, records lost, wall time, and test-specific
// counts. A test fails when any of the first three figures is not zero.
//
// What each test does, how each crash window is reached deterministically,
// and the decisions behind the figures (what counts as a duplicate or a
// mismatch) are in the folder's README.md. The contract under attack is
// docs/DESIGN.md, "The record and its lifecycle".
package proof
