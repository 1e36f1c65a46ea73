package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// maxRecordBytes is row 5's target for a finalized record without a body.
const maxRecordBytes = 400

// projected is the number of claims row 5 projects: 10 million retained 24h.
const projected = 10_000_000

// recordKind is one kind of finalized record of row 5.
type recordKind struct {
	name   string
	result *idempotency.StoredResult
}

func recordKinds() []recordKind {
	body := []byte(`{"id":"ch_3PqL2x","object":"charge","amount":1200,"currency":"usd","status":"succeeded","metadata":{"order":"`)
	body = append(body, strings.Repeat("x", 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	return []recordKind{
		{"no body", &idempotency.StoredResult{Status: http.StatusNoContent}},
		{"1 KiB body", &idempotency.StoredResult{Status: http.StatusCreated, Body: body, Header: http.Header{
			"Content-Type": {"application/json"}, "Request-Id": {"req_8JfQm2ZcX1"}}}},
	}
}

// finalized claims a fresh key and finalizes it accepted with res, as the
// orchestrator does, and returns the storage key.
func finalized(ctx context.Context, e *env, w *workload, res *idempotency.StoredResult) (string, error) {
	k := idempotency.NewKey()
	c, err := e.store.Claim(ctx, idempotency.ClaimRequest{Scope: w.scope, Key: k, KeySource: idempotency.KeySupplied,
		RequestHash: w.hash, Binding: effectspec.BindingHeader, Route: w.route, Fingerprint: w.fp, OpID: idempotency.NewOpID()})
	if err != nil {
		return "", err
	}
	if c.Status != idempotency.StatusClaimed {
		return "", fmt.Errorf("claim answered %s", c.Status)
	}
	if _, err := e.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: w.scope, Key: k, Token: c.Token,
		Outcome: idempotency.StateAccepted, Result: res, OpID: idempotency.NewOpID()}); err != nil {
		return "", err
	}
	return w.keyBase + k.String(), nil
}

func (e *env) usedMemory(ctx context.Context) (int64, error) {
	info, err := e.client.Do(ctx, e.client.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
}

// memoryRows measures row 5: MEMORY USAGE of one finalized record of each
// kind, and used_memory per record over many (which adds the keyspace and
// expiry dictionaries' entries), projected to 10 million records.
func memoryRows(ctx context.Context, o *options, e *env, t *table) error {
	w, err := newWorkload()
	if err != nil {
		return err
	}
	for _, kind := range recordKinds() {
		if err := e.flush(ctx); err != nil {
			return err
		}
		key, err := finalized(ctx, e, w, kind.result)
		if err != nil {
			return err
		}
		usage, err := e.client.Do(ctx, e.client.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if err != nil {
			return fmt.Errorf("MEMORY USAGE: %w", err)
		}
		enc, err := e.client.Do(ctx, e.client.B().ObjectEncoding().Key(key).Build()).ToString()
		if err != nil {
			return fmt.Errorf("OBJECT ENCODING: %w", err)
		}
		perRecord, err := usedPerRecord(ctx, e, w, kind.result, o.memRecords)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.progress, "memory %s: MEMORY USAGE %d B (%s), used_memory %.0f B per record over %d\n",
			kind.name, usage, enc, perRecord, o.memRecords)
		tgt, v := "-", info
		if kind.result.Body == nil {
			tgt, v = fmt.Sprintf("<= %d B", maxRecordBytes), verdict(usage <= maxRecordBytes)
		}
		t.add(row{"5", fmt.Sprintf("memory, finalized record, %s: MEMORY USAGE (encoding)", kind.name),
			fmt.Sprintf("%d B (%s)", usage, enc), "-", "-", tgt, v})
		t.add(row{"5", fmt.Sprintf("memory, %s: used_memory per record over %d, and for %dM claims retained 24h", kind.name, o.memRecords, projected/1_000_000),
			fmt.Sprintf("%.0f B -> %s", perRecord, bytesIEC(perRecord*projected)), "-", "-", "-", info})
	}
	return e.flush(ctx)
}

// usedPerRecord writes n finalized records of one kind and returns the
// growth of used_memory per record.
func usedPerRecord(ctx context.Context, e *env, w *workload, res *idempotency.StoredResult, n int) (float64, error) {
	if err := e.flush(ctx); err != nil {
		return 0, err
	}
	before, err := e.usedMemory(ctx)
	if err != nil {
		return 0, err
	}
	var (
		left atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	left.Store(int64(n))
	for range 32 {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := finalized(ctx, e, w, res); err != nil {
					mu.Lock()
					fail = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if fail != nil {
		return 0, fail
	}
	if err := e.checkKeys(ctx, int64(n), int64(n)); err != nil {
		return 0, err
	}
	after, err := e.usedMemory(ctx)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}
