package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// Row 5's targets: MEMORY USAGE of a record without a body, and the growth
// of used_memory per record (which adds the keyspace and expiry entries)
// with the realistic 1 KiB charge. A record without a body has no
// used_memory target: the contract's smallest record is above any
// figure worth holding it to.
const (
	maxRecordBytes   = 400
	maxUsedSmallBody = 1000
)

// projected is the number of claims row 5 projects: 10 million retained 24h.
const projected = 10_000_000

// recordKind is one kind of finalized record of row 5.
type recordKind struct {
	name string
	// body is the vendor's answer of the record with this seed; nil for a
	// record without one (a 204).
	body func(seed uint64) []byte
	// share is the part of -mem-records written of this kind (a 64 KiB
	// body gets a twentieth: 20,000 of them would be 1.3 GB).
	share int
	// maxUsed is the target of used_memory per record; 0 for none.
	maxUsed int
}

func recordKinds() []recordKind {
	return []recordKind{
		{name: "no body", share: 1},
		{name: "1 KiB body", body: chargeBody, share: 1, maxUsed: maxUsedSmallBody},
		{name: "64 KiB body", body: func(seed uint64) []byte { return chargeListBody(seed, largeBody) }, share: 20},
	}
}

// result is the vendor's answer stored with the record of seed: a 201 with
// the body and two kept headers, or a 204.
func (k recordKind) result(seed uint64) *idempotency.StoredResult {
	if k.body == nil {
		return &idempotency.StoredResult{Status: http.StatusNoContent}
	}
	return &idempotency.StoredResult{Status: http.StatusCreated, Body: k.body(seed), Header: http.Header{
		"Content-Type": {"application/json"}, "Request-Id": {"req_" + strconv.FormatUint(seed*0x9e3779b97f4a7c15, 36)}}}
}

// claimed claims a fresh key as the orchestrator does and returns it with
// its attempt token.
func claimed(ctx context.Context, e *env, w *workload) (idempotency.Key, int, error) {
	return claimedOn(ctx, e.store, w)
}

// claimedOn is claimed through st.
func claimedOn(ctx context.Context, st *redisstore.Store, w *workload) (idempotency.Key, int, error) {
	k := idempotency.NewKey()
	c, err := st.Claim(ctx, idempotency.ClaimRequest{Scope: w.scope, Key: k, KeySource: idempotency.KeySupplied,
		RequestHash: w.hash, Binding: effectspec.BindingHeader, Route: w.route, OpID: idempotency.NewOpID()})
	if err != nil {
		return k, 0, err
	}
	if c.Status != idempotency.StatusClaimed {
		return k, 0, fmt.Errorf("claim answered %s", c.Status)
	}
	return k, c.Token, nil
}

// finalize finalizes the claim of k accepted with res, as the orchestrator
// does.
func finalize(ctx context.Context, e *env, w *workload, k idempotency.Key, token int, res *idempotency.StoredResult) error {
	return finalizeOn(ctx, e.store, w, k, token, res)
}

// finalizeOn is finalize through st.
func finalizeOn(ctx context.Context, st *redisstore.Store, w *workload, k idempotency.Key, token int, res *idempotency.StoredResult) error {
	_, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: w.scope, Key: k, Token: token,
		Outcome: effectspec.Accepted, Result: res, OpID: idempotency.NewOpID()})
	return err
}

// finalized claims and finalizes one fresh key and returns its storage key.
func finalized(ctx context.Context, e *env, w *workload, res *idempotency.StoredResult) (string, error) {
	k, token, err := claimed(ctx, e, w)
	if err != nil {
		return "", err
	}
	if err := finalize(ctx, e, w, k, token, res); err != nil {
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

// memoryRows measures row 5 through the store's public API, so that it
// measures whatever layout the store writes: MEMORY USAGE of one finalized
// record of each kind; used_memory per record over many records, each with
// its own body, projected to 10 million records; and the Redis time of the
// scripts per claim and per finalize (INFO commandstats).
func memoryRows(ctx context.Context, o *options, e *env, t *table) error {
	w, err := newWorkload()
	if err != nil {
		return err
	}
	for _, kind := range recordKinds() {
		if err := e.flush(ctx); err != nil {
			return err
		}
		key, err := finalized(ctx, e, w, kind.result(0))
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
		n := max(o.memRecords/kind.share, 100)
		m, err := usedPerRecord(ctx, e, w, kind, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.progress, "memory %s: MEMORY USAGE %d B (%s), used_memory %.0f B per record over %d, scripts %v per claim, %v per finalize\n",
			kind.name, usage, enc, m.perRecord, n, m.claim, m.finalize)
		tgt, v := "-", info
		if kind.body == nil {
			tgt, v = fmt.Sprintf("<= %d B", maxRecordBytes), verdict(usage <= maxRecordBytes)
		}
		t.add(row{"5", fmt.Sprintf("memory, finalized record, %s: MEMORY USAGE (encoding)", kind.name),
			fmt.Sprintf("%d B (%s)", usage, enc), "-", "-", tgt, v})
		tgt, v = "-", info
		if kind.maxUsed > 0 {
			tgt, v = fmt.Sprintf("<= %s B", group(int64(kind.maxUsed))), verdict(m.perRecord <= float64(kind.maxUsed))
		}
		t.add(row{"5", fmt.Sprintf("memory, %s: used_memory per record over %d, and for %dM claims retained 24h", kind.name, n, projected/1_000_000),
			fmt.Sprintf("%.0f B -> %s", m.perRecord, bytesIEC(m.perRecord*projected)), "-", "-", tgt, v})
		t.add(row{"5", fmt.Sprintf("Redis script time per claim / per finalize, %s (INFO commandstats)", kind.name),
			fmt.Sprintf("%s / %s", dur(m.claim), dur(m.finalize)), "-", "-", "-", info})
	}
	return e.flush(ctx)
}

// recordCost is what usedPerRecord measured.
type recordCost struct {
	perRecord       float64       // growth of used_memory per record
	claim, finalize time.Duration // Redis script time per operation
}

// usedPerRecord claims n fresh keys, then finalizes them with results of
// kind (each its own body), from 32 goroutines, and returns the growth of
// used_memory per record and the script time of each phase per operation.
func usedPerRecord(ctx context.Context, e *env, w *workload, kind recordKind, n int) (recordCost, error) {
	var cost recordCost
	if err := e.flush(ctx); err != nil {
		return cost, err
	}
	before, err := e.usedMemory(ctx)
	if err != nil {
		return cost, err
	}
	keys := make([]idempotency.Key, n)
	tokens := make([]int, n)
	results := make([]*idempotency.StoredResult, n)
	for i := range results {
		results[i] = kind.result(uint64(i) + 1)
	}
	phase := func(op func(i int) error) (time.Duration, error) {
		s0, err := e.scriptUsec(ctx)
		if err != nil {
			return 0, err
		}
		if err := parallel(n, op); err != nil {
			return 0, err
		}
		s1, err := e.scriptUsec(ctx)
		if err != nil {
			return 0, err
		}
		return time.Duration(float64(s1-s0) / float64(n) * float64(time.Microsecond)), nil
	}
	if cost.claim, err = phase(func(i int) (err error) {
		keys[i], tokens[i], err = claimed(ctx, e, w)
		return err
	}); err != nil {
		return cost, err
	}
	if cost.finalize, err = phase(func(i int) error {
		return finalize(ctx, e, w, keys[i], tokens[i], results[i])
	}); err != nil {
		return cost, err
	}
	if err := e.checkKeys(ctx, int64(n), int64(n)); err != nil {
		return cost, err
	}
	after, err := e.usedMemory(ctx)
	if err != nil {
		return cost, err
	}
	cost.perRecord = float64(after-before) / float64(n)
	return cost, nil
}

// parallel runs op(0) to op(n-1) from 32 goroutines and returns the first
// error.
func parallel(n int, op func(i int) error) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := op(int(i)); err != nil {
					mu.Lock()
					fail = errors.Join(fail, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return fail
}

// scriptUsec is the Redis time spent in scripts so far (INFO commandstats,
// usec of the EVAL and FCALL families; commands a script runs are inside
// it).
func (e *env) scriptUsec(ctx context.Context) (int64, error) {
	info, err := e.client.Do(ctx, e.client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || !(strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall")) {
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				u, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO commandstats: %q: %w", line, err)
				}
				total += u
			}
		}
	}
	return total, nil
}
