// Command bench is Obol's benchmark harness: one run prints a table that sets
// each measurement of ours beside its reference, with the ratio, the target
// and PASS or MISS.
//
// The one recommended way to run it, from the repository root:
//
//	go run ./examples/bench -redis-server
//
// It starts a private redis-server on a free loopback port (persistence off,
// noeviction) and stops it at the end. With -redis host:port it uses that
// Redis instead, in logical database -db (default 15), which must be empty:
// the harness flushes it between measurements. -quick is a smoke test
// (300ms per measurement, one round); -duration and -rounds set the length.
// Progress goes to stderr, the table to stdout.
//
// What each row measures, against which reference and to which target, and
// the figures of the last full run are in the folder's README.md. Other
// processes on the same cores are noise: compare ratios, not absolute rates,
// and rerun a MISS before believing it.
package main
