package otelretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/internal/spanattr"
	"github.com/obol-gateway/obol/retry"
	"github.com/obol-gateway/obol/retry/otelretry"
)

const (
	secret   = "sk_live_TRACE_SECRET_77"
	argValue = "argument-value-zq81"
	argNum   = "987654321"
)

var args = []byte(`{"amount":` + argNum + `,"memo":"` + argValue + `"}`)

func store(t *testing.T) idempotency.Store {
	t.Helper()
	st, closeStore, err := embedded.New(context.Background(), redisstore.Options{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return st
}

func spec(t *testing.T) effectspec.Spec {
	t.Helper()
	return effectspec.MustNew(effectspec.Spec{
		Tool: "pay.charge", Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"},
		Status:      effectspec.Statuses{Accepted: []int{201}, DefinitelyRejected: []int{400}, Retryable: []int{503}},
		Approval:    effectspec.ApprovalNone,
	})
}

// vendor answers 503 to its first request and 201 after, echoing the
// request (credential included) in headers and body, and records the
// traceparent of each request.
type vendor struct {
	*httptest.Server
	mu     sync.Mutex
	parent []string
}

func newVendor(t *testing.T) *vendor {
	v := &vendor{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.parent = append(v.parent, r.Header.Get("Traceparent"))
		n := len(v.parent)
		v.mu.Unlock()
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		code := 201
		if n == 1 {
			code = 503
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"auth":%q,"got":%s}`, r.Header.Get("Authorization"), body)
	}))
	t.Cleanup(v.Close)
	return v
}

func (v *vendor) traceparents() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.parent...)
}

// setup returns an orchestrator tracing into an in-memory exporter, and a
// call to v, under a parent span the test started.
func setup(t *testing.T, url string) (*retry.Orchestrator, retry.Call, *tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tr := tp.Tracer("test")
	o := &retry.Orchestrator{Store: store(t), Policy: effectspec.Policy{Environment: effectspec.Development},
		Tracer: &otelretry.Tracer{Tracer: tr}}
	sp := spec(t)
	c := retry.Call{
		Scope:     idempotency.Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: sp.Tool},
		Key:       idempotency.NewKey(),
		KeySource: idempotency.KeySupplied,
		Arguments: args,
		Spec:      sp,
		Route:     route(t, sp),
		Target: &retry.HTTPTarget{Executor: &retry.Executor{}, URL: url + "/charge",
			Header: http.Header{"Authorization": {"Bearer " + secret}}, InjectHeaders: otelretry.Inject},
	}
	return o, c, exp, tr
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestSpansOfACall: a call that needs a second attempt gives the claim,
// both attempts, the second's reservation and the finalize, in order, each
// a child of the caller's span, with the binding, attempt number, phase,
// status and outcome; the vendor got each attempt's own traceparent.
func TestSpansOfACall(t *testing.T) {
	v := newVendor(t)
	o, c, exp, tr := setup(t, v.URL)
	ctx, parent := tr.Start(context.Background(), "tools/call")
	out, err := o.Do(ctx, c)
	parent.End()
	if err != nil || out.Receipt.Outcome != effectspec.Accepted || out.Receipt.AttemptCount != 2 {
		t.Fatalf("outcome %+v, %v", out.Receipt, err)
	}
	spans := exp.GetSpans()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	want := []string{"obol.claim", "obol.attempt", "obol.reserve", "obol.attempt", "obol.finalize", "tools/call"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	root := spans[len(spans)-1].SpanContext
	for _, s := range spans[:len(spans)-1] {
		if s.Parent.SpanID() != root.SpanID() || s.SpanContext.TraceID() != root.TraceID() {
			t.Errorf("%s: parent %v, want %v", s.Name, s.Parent.SpanID(), root.SpanID())
		}
	}
	claim, a1, rsv, a2, fin := spans[0], spans[1], spans[2], spans[3], spans[4]
	for k, want := range map[string]string{spanattr.Workspace: "ws_acme", spanattr.Tool: "pay.charge",
		spanattr.Connection: "conn_pay", spanattr.KeySource: "supplied", spanattr.Binding: "header",
		spanattr.ClaimStatus: string(idempotency.StatusClaimed)} {
		if got := attr(claim, k); got != want {
			t.Errorf("claim %s = %q, want %q", k, got, want)
		}
	}
	for i, s := range []tracetest.SpanStub{a1, a2} {
		for k, want := range map[string]string{spanattr.Attempt: fmt.Sprint(i + 1), spanattr.Binding: "header",
			spanattr.Phase: string(retry.Responded), spanattr.Status: []string{"503", "201"}[i]} {
			if got := attr(s, k); got != want {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, want)
			}
		}
	}
	if attr(rsv, spanattr.Attempt) != "2" || rsv.Status.Code == codes.Error {
		t.Errorf("reserve span %v %v", rsv.Attributes, rsv.Status)
	}
	if attr(fin, spanattr.Outcome) != "accepted" || attr(fin, spanattr.AttemptCount) != "2" || attr(fin, spanattr.Attempt) != "2" {
		t.Errorf("finalize span %v", fin.Attributes)
	}

	got := v.traceparents()
	if len(got) != 2 {
		t.Fatalf("vendor saw %d requests", len(got))
	}
	for i, a := range []tracetest.SpanStub{a1, a2} {
		want := fmt.Sprintf("00-%s-%s-01", a.SpanContext.TraceID(), a.SpanContext.SpanID())
		if got[i] != want {
			t.Errorf("attempt %d: vendor got traceparent %q, want %q", i+1, got[i], want)
		}
	}

	// The same key again replays: a claim span, no attempt.
	exp.Reset()
	if _, err := o.Do(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	spans = exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "obol.claim" || attr(spans[0], spanattr.ClaimStatus) != string(idempotency.StatusReplay) {
		t.Errorf("replay spans %v", spans)
	}
	if n := len(v.traceparents()); n != 2 {
		t.Errorf("replay reached the vendor: %d requests", n)
	}
}

// flatten renders every name, attribute, status, event and link of spans.
func flatten(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "%s %s %q|", s.Name, s.Status.Code, s.Status.Description)
		for _, kv := range s.Attributes {
			fmt.Fprintf(&b, "%s=%s|", kv.Key, kv.Value.String())
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, "%s|", e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, "%s=%s|", kv.Key, kv.Value.String())
			}
		}
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				fmt.Fprintf(&b, "%s=%s|", kv.Key, kv.Value.String())
			}
		}
		for _, kv := range s.Resource.Attributes() {
			fmt.Fprintf(&b, "%s=%s|", kv.Key, kv.Value.String())
		}
	}
	return b.String()
}

// TestNoSecretInSpans: neither the connection's credential nor an argument
// value nor the key reaches a span, on success, on a vendor that echoes
// them, on an unreachable URL carrying them, and on a Target whose error
// quotes them: a failed attempt's description is the fixed vocabulary of
// a *retry.Error, or empty.
func TestNoSecretInSpans(t *testing.T) {
	v := newVendor(t)
	o, c, exp, _ := setup(t, v.URL)
	var keys []string
	do := func(c retry.Call) {
		c.Key = idempotency.NewKey()
		keys = append(keys, c.Key.String())
		o.Do(context.Background(), c)
	}
	do(c) // 503 then 201, both echoing the credential and the arguments
	unreachable := c
	unreachable.Target = &retry.HTTPTarget{Executor: &retry.Executor{},
		URL:    "http://user:" + secret + "@127.0.0.1:1/x?token=" + secret + "&memo=" + argValue,
		Header: http.Header{"Authorization": {"Bearer " + secret}}, InjectHeaders: otelretry.Inject}
	do(unreachable)
	leaky := c
	leaky.Secrets = []string{secret}
	leaky.Target = retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
		return retry.Result{Phase: retry.PostSend, Err: fmt.Errorf("vendor said: bad token %s for %s", secret, argValue)}
	})
	do(leaky)

	var failed []string
	for _, s := range exp.GetSpans() {
		if s.Status.Code == codes.Error {
			failed = append(failed, s.Status.Description)
		}
	}
	// A refused connection is proven before_send: a second attempt.
	refused := "retry: before_send: round trip: connection refused"
	if want := []string{refused, refused, ""}; fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Errorf("failed spans' descriptions %q, want %q", failed, want)
	}
	all := flatten(exp.GetSpans())
	if l := secrettest.Leak([]byte(all), secret); l != "" {
		t.Errorf("secret (%s) in spans: %s", l, all)
	}
	for _, s := range append([]string{argNum, argValue}, keys...) {
		if strings.Contains(all, s) {
			t.Errorf("%q in spans: %s", s, all)
		}
	}
}

// TestDescribe: Describe, when set, gives every failed span's description.
func TestDescribe(t *testing.T) {
	o, c, exp, _ := setup(t, "http://127.0.0.1:1")
	o.Tracer.(*otelretry.Tracer).Describe = func(err error) string {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "refused"
		}
		return "other"
	}
	// Nothing was sent: the call is refused as vendor unreachable.
	if _, err := o.Do(context.Background(), c); !errors.Is(err, idempotency.ErrVendorUnreachable) {
		t.Fatalf("Do: %v, want idempotency.ErrVendorUnreachable", err)
	}
	var got []string
	for _, s := range exp.GetSpans() {
		if s.Status.Code == codes.Error {
			got = append(got, s.Name+" "+s.Status.Description)
		}
	}
	// A refused connection is proven before_send: one second attempt.
	if want := []string{"obol.attempt refused", "obol.attempt refused"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failed spans %q, want %q", got, want)
	}
}

// TestInject: Inject writes nothing without a span, and the W3C header of
// the span otherwise, whatever the global propagator.
func TestInject(t *testing.T) {
	h := http.Header{}
	otelretry.Inject(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("headers without a span: %v", h)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	otelretry.Inject(ctx, h)
	sc := span.SpanContext()
	if got, want := h.Get("Traceparent"), fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
}

func route(t *testing.T, sp effectspec.Spec) idempotency.Route {
	t.Helper()
	r, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
		URL: "https://vendor/charge", Credential: "PAY_SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
