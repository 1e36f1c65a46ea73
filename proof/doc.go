// Package proof holds the reliability suite of Obol: tests that attack the
// promise of the idempotency core with real processes and real Redis on
// loopback, and check that it holds.
package proof
