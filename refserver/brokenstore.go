//go:build obolmutant

package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// envBrokenStore names the deliberate defect of a build with the obolmutant
// tag. The chaos soak (proof/soak -broken NAME) builds the server so and
// must report a violation; a build without the tag ignores the variable.
const envBrokenStore = "OBOL_BROKEN_STORE"

// brokenStore returns the store options with the defect named by
// OBOL_BROKEN_STORE applied:
//
//   - forget-records: every process claims under its own salted prefix, so
//     a call made through another gateway, or before a restart, is
//     forgotten: a retry opens its slot again and reaches the vendor a
//     second time (under a second vendor key for a vendor binding).
//   - blind-to-loss: the store's data-loss checks (the sentinels and the
//     generations) are off, so a Redis that went back in time or came
//     back empty is claimed on as if nothing happened: a retry of a lost
//     record reaches the vendor again, before anyone acknowledged a loss.
//
// An unknown name stops the server: a mutant run that silently ran the
// sound store would prove nothing.
func brokenStore(opts redisstore.Options) redisstore.Options {
	switch name := os.Getenv(envBrokenStore); name {
	case "":
	case "forget-records":
		var salt [4]byte
		_, _ = rand.Read(salt[:])
		opts.Prefix += "forget" + hex.EncodeToString(salt[:]) + ":"
	case "blind-to-loss":
		opts.SkipDataLossCheck = true
	default:
		panic(envBrokenStore + ": unknown defect " + name)
	}
	return opts
}
