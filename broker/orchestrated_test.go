package broker_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/nango"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// The retry package's fault matrix holds through a broker hop: the broker is
// one vendor hop, its attempts counted like any other.

func miniStore(t *testing.T) idempotency.Store {
	t.Helper()
	m := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st, err := redisstore.New(context.Background(), c, redisstore.Options{SkipEvictionCheck: true, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func federatedSpec() effectspec.Spec {
	return effectspec.MustNew(effectspec.Spec{Tool: "github.create_issue", Effect: effectspec.EffectWrite, Route: effectspec.RouteFederated,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported},
		Status:      effectspec.Statuses{Accepted: []int{200, 201}, DefinitelyRejected: []int{422}, Retryable: []int{503}}})
}

func federatedCall(t *testing.T, baseURL string) retry.Call {
	t.Helper()
	b, err := nango.New(nango.Config{BaseURL: baseURL, Secret: "nango_secret_value"})
	if err != nil {
		t.Fatal(err)
	}
	routing := map[string]string{"connection_id": "gh-1", "provider_config_key": "github", "path": "/repos/o/r/issues"}
	route, err := b.Route("github.create_issue", routing)
	if err != nil {
		t.Fatal(err)
	}
	return retry.Call{
		Scope:     idempotency.Scope{Workspace: "ws_acme", Connection: "nango", Tool: "github.create_issue"},
		Key:       idempotency.NewKey(),
		KeySource: idempotency.KeyMinted,
		Arguments: []byte(`{"title":"bug"}`),
		Spec:      federatedSpec(),
		Route:     route,
		Target:    broker.Target(b, "github.create_issue", routing),
	}
}

func orchestrator(st idempotency.Store) *retry.Orchestrator {
	// Federated writes are unsupported bindings: allowed explicitly.
	return &retry.Orchestrator{Store: st, Policy: effectspec.Policy{AllowUnsupportedWrites: true}}
}

func TestBrokerResetAfterReadIsUnknownWithOneAttempt(t *testing.T) {
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
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				io.Copy(io.Discard, req.Body)
				seen.Add(1)
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, not FIN
			}
			c.Close()
		}
	}()
	st := miniStore(t)
	o := orchestrator(st)
	c := federatedCall(t, "http://"+ln.Addr().String())
	out, err := o.Do(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Receipt
	if r.Outcome != receipt.Unknown || r.AttemptCount != 1 || seen.Load() != 1 {
		t.Fatalf("outcome %s, %d attempts, broker saw %d", r.Outcome, r.AttemptCount, seen.Load())
	}
	if r.Binding != "unsupported" || r.Propagation != "none" {
		t.Fatalf("federated receipt binding %q propagation %q", r.Binding, r.Propagation)
	}
	// The broker cannot deduplicate: the key is never sent again.
	if _, err := o.Do(context.Background(), c); !errorsIs(err, idempotency.ErrOutcomeUnknown) || seen.Load() != 1 {
		t.Fatalf("retry through a broker: %v, broker saw %d", err, seen.Load())
	}
}

func TestBroker503IsNotRetried(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if r.Header.Get("Retries") != "0" {
			t.Errorf("Retries header %q", r.Header.Get("Retries"))
		}
		w.WriteHeader(503)
	}))
	defer srv.Close()
	out, err := orchestrator(miniStore(t)).Do(context.Background(), federatedCall(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	// 503 is listed retryable, but a broker has no vendor binding: one attempt.
	if out.Receipt.Outcome != receipt.Unknown || out.Receipt.AttemptCount != 1 || seen.Load() != 1 {
		t.Fatalf("outcome %s, %d attempts, broker saw %d", out.Receipt.Outcome, out.Receipt.AttemptCount, seen.Load())
	}
}

func TestBrokerAcceptedIsReplayed(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(201)
		io.WriteString(w, `{"number":7}`)
	}))
	defer srv.Close()
	o := orchestrator(miniStore(t))
	c := federatedCall(t, srv.URL)
	first, err := o.Do(context.Background(), c)
	if err != nil || first.Receipt.Outcome != receipt.Accepted {
		t.Fatalf("%+v %v", first.Receipt, err)
	}
	again, err := o.Do(context.Background(), c)
	if err != nil || !again.Receipt.Replayed || string(again.Result.Body) != `{"number":7}` || seen.Load() != 1 {
		t.Fatalf("replay %+v %v, broker saw %d", again.Receipt, err, seen.Load())
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }
