//go:build !obolmutant

package main

import "github.com/obol-gateway/obol/idempotency/redisstore"

// brokenStore is the identity in a normal build: only a build with the
// obolmutant tag (brokenstore.go) can break the store on purpose.
func brokenStore(opts redisstore.Options) redisstore.Options { return opts }
