package lincheck

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
)

// testLease is short, so that leases lapse by the clock many times a run.
const testLease = 300 * time.Millisecond

func newStore(t *testing.T, prefix string, lease time.Duration) *redisstore.Store {
	t.Helper()
	srv := redistest.Start(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      []string{srv.Addr()},
		DisableCache:     true,
		ConnWriteTimeout: 2 * time.Second,
		Dialer:           net.Dialer{Timeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: prefix, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// maxRun bounds a lane run that has not yet reached what its test needs.
const maxRun = 90 * time.Second

// runLane runs a lane on cfg for at least least, then until enough says
// the history has what the test needs (at most maxRun), and checks it.
// Coverage, not time, ends the run, so a slow machine only runs longer.
func runLane(t *testing.T, cfg Config, least time.Duration, enough func(*Lane) bool) (Result, map[string]int, *Lane) {
	t.Helper()
	l, err := NewLane(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			return
		case <-time.After(least):
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for !enough(l) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		cancel()
	}()
	start := time.Now()
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-watched // enough is not called after Run
	if err := l.Run(ctx); !errors.Is(err, ErrRunTwice) {
		t.Errorf("second Run: %v, want ErrRunTwice", err)
	}
	ran := time.Since(start)
	start = time.Now()
	res := l.Check(time.Minute)
	t.Logf("FIGURES run=%v ops=%d keys=%d ambiguous=%d violations=%d undecided=%d check=%v stats=%v",
		ran.Round(time.Millisecond), res.Ops, res.Keys, res.Ambiguous, res.Violations, res.Undecided, time.Since(start).Round(time.Millisecond), l.Stats())
	return res, l.Stats(), l
}

// seen reports whether every status in want occurred, and at least ops
// operations were recorded.
func seen(l *Lane, ops int, want ...string) bool {
	stats := l.Stats()
	n := 0
	for _, c := range stats {
		n += c
	}
	for _, w := range want {
		if stats[w] == 0 {
			return false
		}
	}
	return n >= ops
}

// sealedKeys is how many keys were sealed during the run.
func sealedKeys(l *Lane) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done.Keys
}

var everyRow = []string{
	"claim:claimed", "claim:in_progress", "claim:replay", "claim:outcome_unknown",
	"claim:request_mismatch", "claim:destination_conflict", "claim:claimed+applied",
	"reserve:reserved", "reserve:stale", "reserve:reserved+applied", "renew:renewed", "renew:stale",
	"finalize:finalized", "finalize:stale", "settle:settled", "settle:stale", "settle:not_unknown",
	"lookup:found", "lookup:not_found",
}

// TestLaneRedis: several clients on a real Redis with a 300 ms lease for
// five seconds (or until every row occurred) make a linearizable history
// that exercises every operation.
func TestLaneRedis(t *testing.T) {
	s := newStore(t, "lin:", testLease)
	cfg := Config{Store: s, Settler: s, Lease: testLease, Workers: 6, Keys: 12, Seed: 1, OpTimeout: time.Second}
	var during []Result // checks while the lane runs: ops in flight count as ambiguous
	res, stats, l := runLane(t, cfg, 5*time.Second, func(l *Lane) bool {
		during = append(during, l.Check(10*time.Second))
		return seen(l, 500, everyRow...) && sealedKeys(l) > 0
	})
	if res.Violations != 0 || res.Undecided != 0 {
		t.Fatalf("%d keys not linearizable, %d undecided; first:\n%s", res.Violations, res.Undecided, res.Report)
	}
	for _, r := range during {
		if r.Violations != 0 {
			t.Fatalf("a check during the run: %d keys not linearizable; first:\n%s", r.Violations, r.Report)
		}
	}
	if len(during) == 0 {
		t.Error("no check ran during the run")
	}
	if res.Ops < 500 || res.Keys < 12 {
		t.Errorf("%d ops on %d keys; want at least 500 on 12", res.Ops, res.Keys)
	}
	for _, want := range everyRow {
		if stats[want] == 0 {
			t.Errorf("no %s in the history", want)
		}
	}
	// Keys long retired were sealed during the run: checked, and dropped
	// from memory; their verdicts are part of the result.
	l.mu.Lock()
	sealed, live := l.done.Keys, len(l.order)
	l.mu.Unlock()
	if sealed == 0 || sealed+live != res.Keys {
		t.Errorf("%d keys sealed, %d live, %d in the result; want some sealed, and all counted", sealed, live, res.Keys)
	}
}

// TestLaneConfig: a config the lane cannot run is refused with a clear
// error.
func TestLaneConfig(t *testing.T) {
	s := fixedLease{testLease}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no store", Config{Lease: testLease}, "no store"},
		{"no lease", Config{Store: s}, "lease is required"},
		{"another lease", Config{Store: s, Lease: time.Second}, "store's is 300ms"},
		{"sub-millisecond lease", Config{Store: fixedLease{1500 * time.Microsecond}, Lease: 1500 * time.Microsecond}, "whole milliseconds"},
		{"negative workers", Config{Store: s, Lease: testLease, Workers: -1}, "must not be negative"},
		{"bad workspace", Config{Store: s, Lease: testLease, Workspace: "a:b"}, "workspace"},
	} {
		_, err := NewLane(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewLane(Config{Store: s, Lease: testLease}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// fixedLease is a Store that only knows its lease.
type fixedLease struct{ d time.Duration }

func (f fixedLease) Lease() time.Duration { return f.d }

func (fixedLease) Claim(context.Context, idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	return idempotency.ClaimResult{}, errors.ErrUnsupported
}
func (fixedLease) Reserve(context.Context, idempotency.ReserveRequest) (idempotency.Reservation, error) {
	return idempotency.Reservation{}, errors.ErrUnsupported
}
func (fixedLease) Renew(context.Context, idempotency.RenewRequest) (time.Time, error) {
	return time.Time{}, errors.ErrUnsupported
}
func (fixedLease) Finalize(context.Context, idempotency.FinalizeRequest) (idempotency.Record, error) {
	return idempotency.Record{}, errors.ErrUnsupported
}
func (fixedLease) Lookup(context.Context, idempotency.Scope, idempotency.Key) (idempotency.Record, error) {
	return idempotency.Record{}, errors.ErrUnsupported
}
func (fixedLease) Ticket(context.Context, string) (idempotency.Ticket, error) {
	return idempotency.Ticket{}, errors.ErrUnsupported
}
func (fixedLease) Decide(context.Context, idempotency.DecideRequest) (idempotency.Ticket, error) {
	return idempotency.Ticket{}, errors.ErrUnsupported
}
func (fixedLease) GiveBack(context.Context, idempotency.GiveBackRequest) error {
	return errors.ErrUnsupported
}

// forgetful loses records: every fifth claim goes to a fresh key, as a
// store that salted its keys or lost a write would.
type forgetful struct {
	idempotency.Store
	n atomic.Int64
}

func (f *forgetful) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	if f.n.Add(1)%5 == 0 {
		req.Key = idempotency.NewKey()
	}
	return f.Store.Claim(ctx, req)
}

// tokenBlind renews whatever attempt is current, whatever token it is
// given.
type tokenBlind struct{ idempotency.Store }

func (b tokenBlind) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	if rec, err := b.Store.Lookup(ctx, req.Scope, req.Key); err == nil {
		req.Token = rec.AttemptCount
	}
	return b.Store.Renew(ctx, req)
}

// countBlind settles whatever attempt count the record has, whatever count
// the operator saw.
type countBlind struct {
	idempotency.Store
	idempotency.Settler
}

func (b countBlind) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	if rec, err := b.Store.Lookup(ctx, req.Scope, req.Key); err == nil {
		req.Attempts = rec.AttemptCount
	}
	return b.Settler.Settle(ctx, req)
}

// TestLaneCatchesBrokenStores: a lane over a store that breaks the
// contract reports violations, with the history of the first bad key.
func TestLaneCatchesBrokenStores(t *testing.T) {
	s := newStore(t, "broken:", testLease)
	for _, tc := range []struct {
		name    string
		store   idempotency.Store
		settler idempotency.Settler
	}{
		{"claim forgets records", &forgetful{Store: s}, nil},
		{"renew ignores the token", tokenBlind{s}, nil},
		{"settle ignores the attempt count", s, countBlind{s, s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Store: tc.store, Settler: tc.settler, Lease: testLease, Workers: 4, Keys: 8, Seed: 2}
			// Until a violation shows (a broken step needs the right state
			// to show): the test fails if none does within maxRun.
			res, _, _ := runLane(t, cfg, time.Second, func(l *Lane) bool { return seen(l, 2000) && l.Check(10*time.Second).Violations > 0 })
			if res.Violations == 0 {
				t.Fatalf("no violation in %d ops on %d keys", res.Ops, res.Keys)
			}
			lines := strings.Split(strings.TrimSpace(res.Report), "\n")
			if len(lines) < 3 || !strings.HasPrefix(lines[0], "key k") || !strings.Contains(lines[0], "not linearizable") {
				t.Fatalf("report does not name the key and its history:\n%s", res.Report)
			}
			t.Logf("first violating key, %d lines; head:\n%s", len(lines), strings.Join(lines[:min(len(lines), 6)], "\n"))
		})
	}
}

// lossy loses messages on the way: some requests never reach the store,
// some replies never come back; either way the caller gets an error. It is
// still a correct store, so the history must stay linearizable with those
// operations ambiguous.
type lossy struct {
	idempotency.Store
	idempotency.Settler
	n atomic.Int64
}

var errLost = errors.New("lost on the way")

// drop decides the fate of one call: before (the request is lost), after
// (the reply is lost), or neither.
func (l *lossy) drop() (before, after bool) {
	switch l.n.Add(1) % 23 {
	case 0:
		return true, false
	case 11:
		return false, true
	}
	return false, false
}

func lost[T any](l *lossy, f func() (T, error)) (T, error) {
	before, after := l.drop()
	var zero T
	if before {
		return zero, errLost
	}
	v, err := f()
	if after {
		return zero, errLost
	}
	return v, err
}

func (l *lossy) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	return lost(l, func() (idempotency.ClaimResult, error) { return l.Store.Claim(ctx, req) })
}

func (l *lossy) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	return lost(l, func() (idempotency.Reservation, error) { return l.Store.Reserve(ctx, req) })
}

func (l *lossy) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	return lost(l, func() (time.Time, error) { return l.Store.Renew(ctx, req) })
}

func (l *lossy) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	return lost(l, func() (idempotency.Record, error) { return l.Store.Finalize(ctx, req) })
}

func (l *lossy) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	return lost(l, func() (idempotency.Record, error) { return l.Settler.Settle(ctx, req) })
}

func (l *lossy) Lookup(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, error) {
	return lost(l, func() (idempotency.Record, error) { return l.Store.Lookup(ctx, scope, key) })
}

// TestLaneAmbiguous: with requests and replies lost, the lost operations
// are placed or dropped and re-sent ones answer "already applied"; the
// history stays linearizable.
func TestLaneAmbiguous(t *testing.T) {
	const oddLease = 301 * time.Millisecond // half of it is not whole milliseconds
	s := newStore(t, "lossy:", oddLease)
	ls := &lossy{Store: s, Settler: s}
	want := []string{"claim:ambiguous", "reserve:ambiguous", "renew:ambiguous", "finalize:ambiguous",
		"settle:ambiguous", "claim:claimed+applied", "reserve:reserved+applied"}
	cfg := Config{Store: ls, Settler: ls, Lease: oddLease, Workers: 6, Keys: 12, Seed: 3}
	res, stats, _ := runLane(t, cfg, 3*time.Second, func(l *Lane) bool { return seen(l, 1000, want...) })
	if res.Violations != 0 || res.Undecided != 0 {
		t.Fatalf("%d keys not linearizable, %d undecided; first:\n%s", res.Violations, res.Undecided, res.Report)
	}
	if res.Ambiguous < 50 {
		t.Errorf("%d ambiguous ops of %d; want at least 50", res.Ambiguous, res.Ops)
	}
	for _, w := range want {
		if stats[w] == 0 {
			t.Errorf("no %s in the history", w)
		}
	}
}
