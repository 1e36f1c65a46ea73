package retry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// backend opens a fresh claim store with the given lease.
type backend struct {
	name string
	open func(t *testing.T, lease time.Duration) idempotency.Store
}

func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T, lease time.Duration) idempotency.Store {
			m := miniredis.RunT(t)
			return openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, lease, true)
		}},
		{"redis", func(t *testing.T, lease time.Duration) idempotency.Store {
			s := redistest.Start(t)
			return openStore(t, rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true}, lease, false)
		}},
	}
}

func openStore(t *testing.T, opt rueidis.ClientOption, lease time.Duration, skipEviction bool) idempotency.Store {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st, err := redisstore.New(context.Background(), c, redisstore.Options{Lease: lease, SkipEvictionCheck: skipEviction})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// forEachBackend runs f against miniredis and a real redis-server.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// vendor is an HTTP vendor that counts the requests it read.
type vendor struct {
	*httptest.Server
	seen    atomic.Int64
	mu      sync.Mutex
	keys    []string
	handler func(n int64, w http.ResponseWriter, r *http.Request)
}

func newVendor(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request)) *vendor {
	v := &vendor{handler: h}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := v.seen.Add(1)
		v.mu.Lock()
		v.keys = append(v.keys, r.Header.Get("Idempotency-Key"))
		v.mu.Unlock()
		v.handler(n, w, r)
	}))
	t.Cleanup(v.Close)
	return v
}

func status(code int) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"status":%d}`, code)
	}
}

func spec(binding effectspec.BindingKind) effectspec.Spec {
	s := effectspec.Spec{
		Tool: "pay.charge", Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: binding},
		Status: effectspec.Statuses{Accepted: []int{200, 201}, DefinitelyRejected: []int{400, 422},
			Retryable: []int{429, 503}},
		Approval: effectspec.ApprovalNone,
	}
	switch binding {
	case effectspec.BindingHeader:
		s.Idempotency.Header = "Idempotency-Key"
	case effectspec.BindingBodyPointer:
		s.Idempotency.Pointer = "/meta/idempotency_key"
	}
	return effectspec.MustNew(s)
}

func call(url string, sp effectspec.Spec, key idempotency.Key, ex *retry.Executor) retry.Call {
	return retry.Call{
		Scope:     idempotency.Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: sp.Tool},
		Key:       key,
		KeySource: idempotency.KeySupplied,
		Arguments: []byte(`{"amount": 100, "currency": "eur"}`),
		Spec:      sp,
		Route:     payRoute(sp),
		Target:    &retry.HTTPTarget{Executor: ex, URL: url + "/charge", Header: http.Header{"Authorization": {"Bearer sk_test_secret"}}},
	}
}

// payRoute is the route of sp's calls to the test vendor, or the zero Route
// when sp cannot have one (a spec a test expects Do to refuse first).
func payRoute(sp effectspec.Spec) idempotency.Route {
	r, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
		URL: "https://vendor/charge", Credential: "PAY_SECRET"})
	if err != nil {
		return idempotency.Route{}
	}
	return r
}

func orch(st idempotency.Store, lease time.Duration) *retry.Orchestrator {
	return &retry.Orchestrator{Store: st, Policy: effectspec.Policy{Environment: effectspec.Development}}
}

func expect(t *testing.T, out retry.Answer, err error, outcome effectspec.Outcome, attempts int, seen int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if out.Receipt.Outcome != outcome || out.Receipt.AttemptCount != attempts {
		t.Fatalf("outcome %s with %d attempts, want %s with %d", out.Receipt.Outcome, out.Receipt.AttemptCount, outcome, attempts)
	}
	if int64(attempts) < seen {
		t.Fatalf("vendor saw %d requests but attempt_count is %d", seen, attempts)
	}
}

func TestConnectionRefusedThenSuccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		v := newVendor(t, status(201))
		var dials atomic.Int64
		ex := &retry.Executor{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		out, err := o.Do(context.Background(), call(v.URL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), ex))
		expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())
		if v.seen.Load() != 1 {
			t.Fatalf("vendor saw %d, want 1", v.seen.Load())
		}
	})
}

// closeAfterRead is a raw vendor that reads one whole request and closes the
// connection without answering.
func closeAfterRead(t *testing.T) (addr string, seen *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				seen.Add(1)
			}()
		}
	}()
	return "http://" + ln.Addr().String(), seen
}

func TestVendorClosesAfterReading(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		url, seen := closeAfterRead(t)
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		for _, bind := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingUnsupported} {
			out, err := o.Do(context.Background(), call(url, spec(bind), idempotency.NewKey(), &retry.Executor{}))
			expect(t, out, err, effectspec.Unknown, 1, 0)
		}
		if seen.Load() != 2 {
			t.Fatalf("vendor saw %d requests for 2 calls of 1 attempt each", seen.Load())
		}
	})
}

// A vendor that closes each keep-alive connection right after answering (no
// Connection: close header), so the next call finds a dead pooled connection.
func TestKeepAliveClosedByVendorNoHiddenResend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var seen atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					seen.Add(1)
					io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
					time.Sleep(5 * time.Millisecond)
				}()
			}
		}()
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		ex := &retry.Executor{}
		total, accepted := 0, int64(0)
		for i := 0; i < 20; i++ {
			out, err := o.Do(context.Background(), call("http://"+ln.Addr().String(), spec(effectspec.BindingHeader), idempotency.NewKey(), ex))
			if err != nil {
				t.Fatal(err)
			}
			total += out.Receipt.AttemptCount
			switch out.Receipt.Outcome {
			case effectspec.Accepted:
				accepted++
			case effectspec.Unknown:
				// The request went into a connection the vendor had closed:
				// bytes left, nobody read them, and nobody may re-send them.
			default:
				t.Fatalf("outcome %s", out.Receipt.Outcome)
			}
		}
		// Every request the vendor read was a reserved attempt that was
		// answered: a transport re-send would show as seen > accepted.
		if got := seen.Load(); got != accepted || got > int64(total) || accepted == 0 {
			t.Fatalf("vendor saw %d requests, %d accepted, %d attempts reserved", got, accepted, total)
		}
	})
}

func TestRetryable503(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		// header binding: 503 earns the one second attempt.
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				status(503)(n, w, r)
				return
			}
			status(201)(n, w, r)
		})
		key := idempotency.NewKey()
		out, err := o.Do(context.Background(), call(v.URL, spec(effectspec.BindingHeader), key, &retry.Executor{}))
		expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())
		vk := out.Receipt.VendorKey
		if v.seen.Load() != 2 || v.keys[0] != vk || v.keys[1] != vk || vk == key.String() {
			t.Fatalf("vendor saw %d requests with keys %v; want the receipt's vendor key %s twice, never the client's %s",
				v.seen.Load(), v.keys, vk, key)
		}
		// unsupported: no second attempt.
		u := newVendor(t, status(503))
		out, err = o.Do(context.Background(), call(u.URL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{}))
		expect(t, out, err, effectspec.Unknown, 1, u.seen.Load())
		if u.seen.Load() != 1 {
			t.Fatalf("vendor saw %d, want 1", u.seen.Load())
		}
		// 503 twice: unknown with two attempts, never a third.
		w := newVendor(t, status(503))
		out, err = o.Do(context.Background(), call(w.URL, spec(effectspec.BindingBodyPointer), idempotency.NewKey(), &retry.Executor{}))
		expect(t, out, err, effectspec.Unknown, 2, w.seen.Load())
		if w.seen.Load() != 2 || out.Receipt.Status != 503 {
			t.Fatalf("vendor saw %d, status %d", w.seen.Load(), out.Receipt.Status)
		}
	})
}

func TestRejectedIsReplayed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		v := newVendor(t, status(422))
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.DefinitelyRejected, 1, v.seen.Load())
		again, err := o.Do(context.Background(), c)
		expect(t, again, err, effectspec.DefinitelyRejected, 1, v.seen.Load())
		if !again.Receipt.Replayed || v.seen.Load() != 1 || string(again.Result.Body) != `{"status":422}` {
			t.Fatalf("replayed=%v seen=%d body=%q", again.Receipt.Replayed, v.seen.Load(), again.Result.Body)
		}
		if again.Receipt.RequestHash != out.Receipt.RequestHash || again.Receipt.IdempotencyKey != out.Receipt.IdempotencyKey {
			t.Fatalf("replay receipt disagrees: %+v vs %+v", again.Receipt, out.Receipt)
		}
	})
}

// leaseSpy remembers the lease deadline of every claim the store granted.
type leaseSpy struct {
	idempotency.Store
	mu      sync.Mutex
	granted []time.Time
}

func (s *leaseSpy) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, r)
	if err == nil && res.Status == idempotency.StatusClaimed {
		s.mu.Lock()
		s.granted = append(s.granted, res.LeaseDeadline)
		s.mu.Unlock()
	}
	return res, err
}

// A vendor that never answers: the attempt runs past its lease (renewed by its
// owner) and is cut at the tool's timeout, which bounds its context; the call
// ends unknown with its one attempt counted (docs/DESIGN.md, "The record and
// its lifecycle").
func TestSlowVendorEndsAtItsTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const lease, timeout = time.Second, 3 * time.Second
		spy := &leaseSpy{Store: b.open(t, lease)}
		release, testEnd := make(chan struct{}), t.Context()
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done(): // the gateway gave up on the attempt
			case <-release:
			case <-testEnd.Done(): // a failed test must not hang in the server's Close
			}
			status(201)(n, w, r)
		})
		sp := spec(effectspec.BindingHeader)
		sp.Timeout = timeout
		c := call(v.URL, effectspec.MustNew(sp), idempotency.NewKey(), &retry.Executor{})
		inner := c.Target
		var deadlines []time.Time
		var results []retry.Result
		c.Target = retry.TargetFunc(func(ctx context.Context, a retry.Attempt) retry.Result {
			d, ok := ctx.Deadline()
			if !ok {
				t.Error("the attempt's context has no deadline")
			}
			deadlines = append(deadlines, d)
			res := inner.Send(ctx, a)
			results = append(results, res)
			return res
		})
		o := orch(spy, lease)
		var renewals atomic.Int64
		o.OnRenew = func(_ *retry.Call, _ int, _ time.Time, err error) {
			if err == nil {
				renewals.Add(1)
			}
		}
		out, err := o.Do(context.Background(), c)
		close(release)
		v.Close() // waits for the handler: seen is final
		expect(t, out, err, effectspec.Unknown, 1, v.seen.Load())
		if v.seen.Load() != 1 || len(deadlines) != 1 || len(spy.granted) != 1 {
			t.Fatalf("vendor saw %d, %d attempts sent, %d claims granted; want 1 of each", v.seen.Load(), len(deadlines), len(spy.granted))
		}
		if res := results[0]; res.Phase != retry.PostSend || !errors.Is(res.Err, context.DeadlineExceeded) {
			t.Fatalf("attempt: phase %s err %v; want post_send cut by its deadline", res.Phase, res.Err)
		}
		// The attempt's deadline is the tool's timeout from its reservation
		// (the store's lease deadline is the reservation plus the lease; both
		// in whole milliseconds).
		limit := spy.granted[0].Add(timeout - lease).Add(time.Millisecond)
		if deadlines[0].After(limit) || !deadlines[0].After(spy.granted[0]) {
			t.Fatalf("attempt deadline %v: want after the first lease deadline %v and by the timeout %v", deadlines[0], spy.granted[0], limit)
		}
		if renewals.Load() == 0 {
			t.Fatal("the lease was never renewed while the attempt ran past it")
		}
	})
}

// A worker paused past its lease: another gateway takes the slot over (the
// vendor deduplicates on our key) and the late worker's finalize is stale.
func TestLateWorkerFinalizeIsStale(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// The store's lease must lapse while the late worker's attempt is held;
		// the taking-over worker then runs under it too.
		const lease = time.Second
		st := b.open(t, lease)
		arrived, release, testEnd := make(chan struct{}), make(chan struct{}), t.Context()
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				close(arrived)
				select {
				case <-release:
				case <-r.Context().Done():
				case <-testEnd.Done(): // a failed test must not hang in the server's Close
				}
			}
			status(201)(n, w, r)
		})
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		// The late worker cannot renew (a paused or cut-off process), so its
		// lease lapses while its attempt is at the vendor.
		late := orch(noRenew{st}, lease)
		type res struct {
			out retry.Answer
			err error
		}
		done := make(chan res, 1)
		go func() {
			out, err := late.Do(context.Background(), c)
			done <- res{out, err}
		}()
		select {
		case <-arrived:
		case r := <-done:
			t.Fatalf("the late worker ended before its attempt reached the vendor: %v, receipt %+v", r.err, r.out.Receipt)
		}
		waitLeaseLapsed(t, st, c, lease)
		out, err := orch(st, lease).Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())
		close(release)
		r := <-done
		if !errors.Is(r.err, idempotency.ErrStale) {
			t.Fatalf("late finalize: %v, want ErrStale", r.err)
		}
		rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
		if err != nil || rec.State != effectspec.Accepted || rec.AttemptCount != 2 || v.seen.Load() != 2 {
			t.Fatalf("record %+v err %v, vendor saw %d", rec, err, v.seen.Load())
		}
	})
}

// noRenew is a store whose renewals never reach Redis.
type noRenew struct{ idempotency.Store }

func (noRenew) Renew(context.Context, idempotency.RenewRequest) (time.Time, error) {
	return time.Time{}, idempotency.ErrStoreUnavailable
}

// waitLeaseLapsed polls until c's in-flight record reads unknown, which it
// does once the store's clock passes its lease deadline.
func waitLeaseLapsed(t *testing.T, st idempotency.Store, c retry.Call, lease time.Duration) {
	t.Helper()
	giveUp := time.Now().Add(30 * lease) // only against a hang: a lease that never lapses
	for {
		rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
		if err != nil {
			t.Fatalf("lookup: %v", err)
		}
		if rec.State != effectspec.InProgress {
			if rec.State != effectspec.Unknown {
				t.Fatalf("record %s, want unknown once its lease lapsed", rec.State)
			}
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("the lease of %v has not lapsed after %v", lease, 30*lease)
		}
		time.Sleep(lease / 50)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		target := newVendor(t, status(201))
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/charge", http.StatusTemporaryRedirect)
		})
		out, err := orch(b.open(t, 5*time.Second), 5*time.Second).Do(context.Background(),
			call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{}))
		expect(t, out, err, effectspec.Unknown, 1, v.seen.Load())
		if target.seen.Load() != 0 || out.Receipt.Status != 307 {
			t.Fatalf("redirect followed: target saw %d, status %d", target.seen.Load(), out.Receipt.Status)
		}
	})
}

func TestLaterCallOnUnknownSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		url, seen := closeAfterRead(t)
		good := newVendor(t, status(201))
		// Vendor binding: the next call makes one new attempt.
		c := call(url, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 1, seen.Load())
		c.Target = &retry.HTTPTarget{URL: good.URL + "/charge"}
		out, err = o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 2, seen.Load()+good.seen.Load())
		if good.seen.Load() != 1 {
			t.Fatalf("second call sent %d requests", good.seen.Load())
		}
		// Without a vendor binding: refused, nothing sent.
		u := call(url, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{})
		out, err = o.Do(context.Background(), u)
		expect(t, out, err, effectspec.Unknown, 1, 1)
		before := seen.Load()
		u.Target = &retry.HTTPTarget{URL: good.URL + "/charge"}
		if _, err = o.Do(context.Background(), u); !errors.Is(err, idempotency.ErrOutcomeUnknown) {
			t.Fatalf("unsupported retry: %v, want ErrOutcomeUnknown", err)
		}
		if seen.Load() != before || good.seen.Load() != 1 {
			t.Fatal("a refused call reached a vendor")
		}
	})
}

func TestCallerCancelsMidCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			cancel()
			time.Sleep(100 * time.Millisecond)
			status(201)(n, w, r)
		})
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(ctx, c)
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		again, err := o.Do(context.Background(), c)
		expect(t, again, err, effectspec.Accepted, 1, v.seen.Load())
		if !again.Receipt.Replayed || v.seen.Load() != 1 {
			t.Fatalf("replayed=%v, vendor saw %d", again.Receipt.Replayed, v.seen.Load())
		}
	})
}

// faultStore fails chosen operations as a Redis outage would. The flags are
// atomic: a claim's background re-sender reads them too.
type faultStore struct {
	idempotency.Store
	failClaim, failReserve atomic.Bool
}

func (f *faultStore) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	if f.failClaim.Load() {
		return idempotency.ClaimResult{}, fmt.Errorf("%w: injected", idempotency.ErrStoreUnavailable)
	}
	return f.Store.Claim(ctx, r)
}

func (f *faultStore) Reserve(ctx context.Context, r idempotency.ReserveRequest) (idempotency.Reservation, error) {
	if f.failReserve.Load() {
		return idempotency.Reservation{}, fmt.Errorf("%w: injected", idempotency.ErrStoreUnavailable)
	}
	return f.Store.Reserve(ctx, r)
}

func TestStoreErrorsMeanNoSend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		v := newVendor(t, status(503))
		fs := &faultStore{Store: b.open(t, 5*time.Second)}
		fs.failClaim.Store(true)
		o := orch(fs, 5*time.Second)
		t.Cleanup(o.Close)
		if _, err := o.Do(context.Background(), call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})); !errors.Is(err, idempotency.ErrStoreUnavailable) {
			t.Fatalf("claim outage: %v", err)
		}
		if v.seen.Load() != 0 {
			t.Fatal("sent without a claim")
		}
		fs.failClaim.Store(false)
		fs.failReserve.Store(true)
		out, err := o.Do(context.Background(), call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{}))
		expect(t, out, err, effectspec.Unknown, 1, v.seen.Load())
		if v.seen.Load() != 1 {
			t.Fatalf("sent %d requests with one reservation", v.seen.Load())
		}
	})
}

func TestSecretsStayOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const secret = "sk_live_TOPSECRET_42"
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Authorization"), secret) {
				t.Error("vendor did not get the credential")
			}
			w.Header().Set("Set-Cookie", "session="+secret)
			w.Header().Set("X-Echo-Auth", secret)
			status(201)(n, w, r)
		})
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		var logged strings.Builder
		o.OnAttempt = func(c *retry.Call, n int, res retry.Result, _ time.Duration) {
			fmt.Fprintf(&logged, "%v %d %v %d %v", c.Scope, n, res.Phase, res.Status, res.Err)
		}
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		c.Target.(*retry.HTTPTarget).Header.Set("Authorization", "Bearer "+secret)
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		again, _ := o.Do(context.Background(), c)
		for _, h := range []http.Header{out.Result.Header, again.Result.Header} {
			if fmt.Sprint(h) != "map[Content-Type:[application/json]]" {
				t.Errorf("stored headers %v", h)
			}
		}
		enc, _ := out.Receipt.MarshalJSON()
		// And a failing path: an unreachable vendor.
		c.Target.(*retry.HTTPTarget).URL = "http://user:" + secret + "@127.0.0.1:1/x?token=" + secret
		c.Key = idempotency.NewKey()
		_, err2 := o.Do(context.Background(), c)
		for what, s := range map[string]string{"receipt": string(enc), "log": logged.String(), "error": fmt.Sprint(err2)} {
			if strings.Contains(s, secret) {
				t.Errorf("secret in %s: %s", what, s)
			}
		}
	})
}

func TestInvalidRequestIsNotRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var sends atomic.Int64
		c := call("http://unused", spec(effectspec.BindingHeader), idempotency.NewKey(), nil)
		inner := &retry.HTTPTarget{URL: "ftp://127.0.0.1:1/x"}
		c.Target = retry.TargetFunc(func(ctx context.Context, a retry.Attempt) retry.Result {
			sends.Add(1)
			return inner.Send(ctx, a)
		})
		st := b.open(t, 5*time.Second)
		_, err := orch(st, 5*time.Second).Do(context.Background(), c)
		if !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Fatalf("Do: %v, want idempotency.ErrInvalidRequest", err)
		}
		if sends.Load() != 1 {
			t.Fatalf("an invalid request was tried %d times", sends.Load())
		}
		// Its one reservation counts, but nothing left: the slot is not burned.
		rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
		if err != nil || rec.AttemptCount != 1 || rec.SentAttempts != 0 {
			t.Fatalf("record %+v (%v): want 1 reservation, 0 that may have left", rec, err)
		}
	})
}

func TestPolicyDeniedBeforeClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		v := newVendor(t, status(201))
		c := call(v.URL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), nil)
		o := &retry.Orchestrator{Store: st} // zero Policy: production
		if _, err := o.Do(context.Background(), c); !errors.Is(err, effectspec.ErrPolicyDenied) {
			t.Fatalf("unsupported write in production: %v", err)
		}
		if _, err := st.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) || v.seen.Load() != 0 {
			t.Fatalf("a denied call left a record (%v) or reached the vendor (%d)", err, v.seen.Load())
		}
	})
}

func TestBadArgumentsChangeNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		v := newVendor(t, status(201))
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), nil)
		c.Arguments = []byte(`{"a":1,"a":2}`)
		if _, err := orch(st, 5*time.Second).Do(context.Background(), c); !errors.Is(err, idempotency.ErrInvalidJSON) {
			t.Fatalf("duplicate member: %v", err)
		}
		if _, err := st.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) || v.seen.Load() != 0 {
			t.Fatalf("bad input left a record (%v) or reached the vendor", err)
		}
	})
}

// spyStore counts every call that reaches the store.
type spyStore struct {
	idempotency.Store
	calls atomic.Int64
}

func (s *spyStore) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	s.calls.Add(1)
	return s.Store.Claim(ctx, r)
}

func (s *spyStore) Reserve(ctx context.Context, r idempotency.ReserveRequest) (idempotency.Reservation, error) {
	s.calls.Add(1)
	return s.Store.Reserve(ctx, r)
}

func (s *spyStore) Finalize(ctx context.Context, r idempotency.FinalizeRequest) (idempotency.Record, error) {
	s.calls.Add(1)
	return s.Store.Finalize(ctx, r)
}

func (s *spyStore) Lookup(ctx context.Context, scope idempotency.Scope, k idempotency.Key) (idempotency.Record, error) {
	s.calls.Add(1)
	return s.Store.Lookup(ctx, scope, k)
}

func (s *spyStore) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	s.calls.Add(1)
	return s.Store.Ticket(ctx, id)
}

func (s *spyStore) Decide(ctx context.Context, r idempotency.DecideRequest) (idempotency.Ticket, error) {
	s.calls.Add(1)
	return s.Store.Decide(ctx, r)
}

// A Spec that did not come through effectspec's validation is refused before
// the store or the vendor sees anything, even one whose content would pass.
func TestUnvalidatedSpecRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		inner := b.open(t, 5*time.Second)
		spy := &spyStore{Store: inner}
		o := orch(spy, 5*time.Second)
		v := newVendor(t, status(201))
		valid := spec(effectspec.BindingHeader)
		literal := effectspec.Spec{Tool: valid.Tool, Effect: valid.Effect, Route: valid.Route,
			Idempotency: valid.Idempotency, Status: valid.Status, Approval: valid.Approval}
		if _, err := effectspec.New(literal); err != nil {
			t.Fatal(err)
		}
		changed := valid
		changed.Idempotency.Header = "X-Other-Key"
		var decoded effectspec.Spec
		enc, _ := json.Marshal(valid)
		if err := json.Unmarshal(enc, &decoded); err != nil {
			t.Fatal(err)
		}
		for name, sp := range map[string]effectspec.Spec{
			"zero": {}, "literal": literal, "changed after validation": changed, "encoding/json": decoded,
		} {
			c := call(v.URL, sp, idempotency.NewKey(), nil)
			c.Scope.Tool, c.Route.Tool = valid.Tool, valid.Tool
			if _, err := o.Do(context.Background(), c); !errors.Is(err, effectspec.ErrUnvalidated) {
				t.Errorf("%s: %v, want ErrUnvalidated", name, err)
			}
			if _, err := inner.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) {
				t.Errorf("%s: left a record: %v", name, err)
			}
		}
		if n := spy.calls.Load(); n != 0 || v.seen.Load() != 0 {
			t.Fatalf("unvalidated specs reached the store %d times and the vendor %d times", n, v.seen.Load())
		}
		// The validated spec goes through, and the spy does count it.
		out, err := o.Do(context.Background(), call(v.URL, valid, idempotency.NewKey(), nil))
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		if spy.calls.Load() == 0 {
			t.Fatal("the spy saw no call: the check above proves nothing")
		}
	})
}

func TestApprovalFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		v := newVendor(t, status(201))
		sp := spec(effectspec.BindingHeader)
		sp.Approval = effectspec.ApprovalRequired
		sp = effectspec.MustNew(sp)
		c := call(v.URL, sp, idempotency.NewKey(), nil)
		held, err := o.Do(context.Background(), c)
		if err != nil || held.Receipt.Outcome != effectspec.Held || !idempotency.ValidTicketID(held.Ticket) {
			t.Fatalf("held: %+v %v", held, err)
		}
		// A plain repeat stays held with the same ticket.
		again, err := o.Do(context.Background(), c)
		if err != nil || again.Ticket != held.Ticket {
			t.Fatalf("repeat: %+v %v", again, err)
		}
		if _, err := st.Decide(context.Background(), idempotency.DecideRequest{Ticket: held.Ticket, Approve: true, OpID: idempotency.NewOpID()}); err != nil {
			t.Fatal(err)
		}
		// A resume with another supplied key is refused and opens no slot.
		other := c
		other.Ticket, other.Key = held.Ticket, idempotency.NewKey()
		if _, err := o.Do(context.Background(), other); !errors.Is(err, idempotency.ErrApprovalKeyMismatch) {
			t.Fatalf("mismatched resume: %v", err)
		}
		if _, err := st.Lookup(context.Background(), other.Scope, other.Key); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("mismatched resume opened a slot: %v", err)
		}
		// A resume with a freshly minted key takes the ticket's key.
		resume := c
		resume.Ticket, resume.Key, resume.KeySource = held.Ticket, idempotency.NewKey(), idempotency.KeyMinted
		out, err := o.Do(context.Background(), resume)
		expect(t, out, err, effectspec.Accepted, 1, v.seen.Load())
		if out.Receipt.KeySource != string(idempotency.KeySupplied) {
			t.Fatalf("resume receipt key_source %q, want the held call's %q", out.Receipt.KeySource, idempotency.KeySupplied)
		}
		want := idempotency.VendorKey(st.(interface{ Deployment() string }).Deployment(), c.Scope, c.Key, out.Receipt.RequestHash).String()
		if out.Key != c.Key || v.seen.Load() != 1 || v.keys[0] != want || out.Receipt.VendorKey != want {
			t.Fatalf("resume used key %s (vendor got %v, receipt vendor key %s), want the ticket's %s and its vendor key %s",
				out.Key, v.keys, out.Receipt.VendorKey, c.Key, want)
		}
	})
}

// TestRecordGoneUnderAttempt: the record of a running attempt vanishes (a
// DEL, a FLUSHALL, a Redis that lost its data) and a new claim makes it
// again with token 1. The old worker's renewal finds no record of its
// incarnation: it loses the lease for good and finalizes nothing over the
// new record, whose own outcome stands.
func TestRecordGoneUnderAttempt(t *testing.T) {
	// Long enough that the new owner's renewals (every third of it) keep
	// its lease on a loaded machine: at 600ms one run in many saw it lapse
	// while the test waited for the old worker, and read unknown.
	const lease = 3 * time.Second
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, lease, true)
	arrived := []chan struct{}{make(chan struct{}), make(chan struct{})}
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	testEnd := t.Context()
	v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			close(arrived[n-1])
			select {
			case <-release[n-1]:
			case <-r.Context().Done():
			case <-testEnd.Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"request":%d}`, n)
	})
	sp := spec(effectspec.BindingHeader)
	sp.Timeout = 10 * time.Second
	c := call(v.URL, effectspec.MustNew(sp), idempotency.NewKey(), &retry.Executor{})
	old := orch(st, lease)
	gone := make(chan struct{})
	var once sync.Once
	old.OnRenew = func(_ *retry.Call, _ int, _ time.Time, err error) {
		if errors.Is(err, idempotency.ErrNotFound) {
			once.Do(func() { close(gone) })
		}
	}
	type res struct {
		out retry.Answer
		err error
	}
	oldDone, newDone := make(chan res, 1), make(chan res, 1)
	go func() { out, err := old.Do(context.Background(), c); oldDone <- res{out, err} }()
	<-arrived[0]
	rk, err := c.Scope.StorageKey(idempotency.DefaultPrefix, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	m.Del(rk)
	go func() { out, err := orch(st, lease).Do(context.Background(), c); newDone <- res{out, err} }()
	<-arrived[1]
	select {
	case <-gone:
	case <-time.After(10 * lease):
		t.Fatal("the old worker's renewals never found its record gone")
	}
	close(release[0])
	r := <-oldDone
	if !errors.Is(r.err, idempotency.ErrStale) || !errors.Is(r.err, idempotency.ErrNotFound) {
		t.Fatalf("old worker: %v (receipt %+v), want ErrStale (lease lost) and ErrNotFound (the record is gone)", r.err, r.out.Receipt)
	}
	if rec, err := st.Lookup(context.Background(), c.Scope, c.Key); err != nil || rec.State != effectspec.InProgress || rec.AttemptCount != 1 {
		t.Fatalf("after the old worker: record %s, %d attempts, %v; want the new owner's in flight", rec.State, rec.AttemptCount, err)
	}
	close(release[1])
	r = <-newDone
	expect(t, r.out, r.err, effectspec.Accepted, 1, 1)
	rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
	if err != nil || rec.State != effectspec.Accepted || rec.Result == nil || string(rec.Result.Body) != `{"request":2}` {
		t.Fatalf("record %+v, %v; want the new owner's accepted answer", rec, err)
	}
}
