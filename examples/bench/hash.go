package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/obol-gateway/obol/idempotency"
)

// maxHashAllocs bounds the allocations of one RequestHash, whatever the
// document's size: the target of row 3 is a constant, not a per-byte cost.
const maxHashAllocs = 8

// document returns tool-call arguments of about size bytes: members out of
// order and an array of order-like records with strings (some escaped, some
// non-ASCII), integers, decimals, exponents and nested objects, as in the
// idempotency package's benchmarks.
func document(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"to": "billing@example.com", "idempotent": true, "currency": "EUR", "items": [`)
	for i := 0; b.Len() < size-120; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%05d", "quantity": %d, "price": %d.%02d, "name": "Widget \u00e9 n\u00b0%d \"deluxe\"", `+
			`"tags": ["red", "large", "%d"], "dims": {"w": 1.5e1, "h": 0.25, "d": %d}, "note": "Größe 😀 line\nbreak"}`,
			i, i%7+1, 10+i%90, i%100, i, i*31, i%13)
	}
	b.WriteString(`], "amount": 1234.50, "customer": {"name": "Ada Lovelace", "id": 1e3, "address": {"city": "London", "zip": "NW1"}}}`)
	return []byte(b.String())
}

// jcsHash is the reference of row 3: gowebpki/jcs and SHA-256, formatted as
// RequestHash formats.
func jcsHash(doc []byte) (string, error) {
	canon, err := jcs.Transform(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// hashResult is one measurement of a hash function.
type hashResult struct {
	nsPerOp     float64
	allocsPerOp float64
	bytesPerOp  float64
}

// measureHash calls f on one goroutine for d, after a GC, and reads the
// allocator's counters around the loop (as testing.B does).
func measureHash(ctx context.Context, d time.Duration, doc []byte, f func([]byte) (string, error)) (hashResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	var ops int
	for ctx.Err() == nil {
		for range 8 {
			if _, err := f(doc); err != nil {
				return hashResult{}, err
			}
		}
		ops += 8
		if time.Now().After(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err := ctx.Err(); err != nil {
		return hashResult{}, err
	}
	n := float64(ops)
	return hashResult{
		nsPerOp:     float64(elapsed.Nanoseconds()) / n,
		allocsPerOp: float64(after.Mallocs-before.Mallocs) / n,
		bytesPerOp:  float64(after.TotalAlloc-before.TotalAlloc) / n,
	}, nil
}

func (h hashResult) String() string {
	return fmt.Sprintf("%s/op, %.0f allocs, %s", dur(time.Duration(h.nsPerOp)), h.allocsPerOp, bytesIEC(h.bytesPerOp))
}

// hashRows measures row 3: per document size and round, ours and the
// reference back to back, alternating which goes first.
func hashRows(ctx context.Context, o *options, t *table) error {
	for _, size := range []struct {
		name string
		n    int
	}{{"1 KiB", 1 << 10}, {"64 KiB", 64 << 10}} {
		doc := document(size.n)
		want, err := jcsHash(doc)
		if err != nil {
			return err
		}
		if got, err := idempotency.RequestHash(doc); err != nil || got != want {
			return fmt.Errorf("RequestHash of the %s document = %q, %v; jcs+sha256 = %q", size.name, got, err, want)
		}
		var ours, ref []hashResult
		sides := []func() error{
			func() error {
				r, err := measureHash(ctx, o.duration, doc, idempotency.RequestHash)
				ours = append(ours, r)
				return err
			},
			func() error {
				r, err := measureHash(ctx, o.duration, doc, jcsHash)
				ref = append(ref, r)
				return err
			},
		}
		for round := range o.rounds {
			for j := range sides {
				if err := sides[(round+j)%2](); err != nil {
					return err
				}
			}
			fmt.Fprintf(o.progress, "hash %s round %d: ours %v, jcs %v\n", size.name, round+1, last1(ours), last1(ref))
		}
		mo, mr := medianHash(ours), medianHash(ref)
		ratio := mr.nsPerOp / mo.nsPerOp
		t.add(row{"3", fmt.Sprintf("request hash, %s JSON (%d B): RequestHash vs gowebpki/jcs + SHA-256", size.name, len(doc)),
			mo.String(), mr.String(), fmt.Sprintf("%.1fx", ratio),
			fmt.Sprintf(">= 10x, <= %d allocs", maxHashAllocs), verdict(ratio >= 10 && mo.allocsPerOp <= maxHashAllocs)})
	}
	return nil
}

func last1(xs []hashResult) hashResult { return xs[len(xs)-1] }

// medianHash takes the median of each figure on its own.
func medianHash(rs []hashResult) hashResult {
	var ns, al, by []float64
	for _, r := range rs {
		ns, al, by = append(ns, r.nsPerOp), append(al, r.allocsPerOp), append(by, r.bytesPerOp)
	}
	return hashResult{median(ns), median(al), median(by)}
}
