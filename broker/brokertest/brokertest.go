package brokertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// Harness tells the suite how to build one adapter, configured by a C.
type Harness[C any] struct {
	// Kind is the adapter's kind: its Routes' Broker and the Subject of its field errors.
	Kind string
	// Config returns a configuration of the broker at baseURL that sends
	// secret as its credential, and nothing else of note.
	Config func(baseURL, secret string) C
	// New is the adapter's constructor.
	New func(C) (broker.Broker, error)
	// SecretField is the Config field that holds the credential ("Secret").
	SecretField string
	// Routings are valid routings, at least one; no two share a
	// destination.
	Routings []Routing
	// BadRoutings are routings Route refuses, at least one.
	BadRoutings []BadRouting
	// BadArguments are call arguments the first routing refuses to send
	// (broker.ErrInvalidArguments).
	BadArguments []string
	// Reply wraps data, a JSON object, as the broker's answer when the
	// tool ran (a broker that relays the vendor's body returns it as is).
	Reply func(data []byte) []byte
}

// Routing is a valid routing and where its request goes.
type Routing struct {
	Name   string
	Fields map[string]string
	// Path is the path its request is sent to, below the base URL's.
	Path string
}

// BadRouting is a routing that is refused, and the field the refusal names
// ("routing.connection_id").
type BadRouting struct {
	Name   string
	Fields map[string]string
	Field  string
}

const (
	tool   = "crm.create_contact"
	secret = "brokertest-sk-3f9a-THE-SECRET"
)

// Run runs the suite against the adapter h describes.
func Run[C any](t *testing.T, h Harness[C]) {
	if len(h.Routings) == 0 || len(h.BadRoutings) == 0 || h.Reply == nil {
		t.Fatal("brokertest: a Harness needs Routings, BadRoutings and Reply")
	}
	s := suite[C]{h}
	t.Run("Prepare", s.prepare)
	t.Run("DistinctRoutes", s.distinctRoutes)
	t.Run("RoutingRefused", s.routingRefused)
	t.Run("ArgumentsRefused", s.argumentsRefused)
	t.Run("SpecRefused", s.specRefused)
	t.Run("ConfigRefused", s.configRefused)
	t.Run("ShortSecretRefused", s.shortSecret)
	t.Run("Faults", s.faults)
	t.Run("EchoedSecretIsScrubbed", s.echoScrubbed)
	t.Run("SecretNeverInErrors", s.secretNeverInErrors)
	t.Run("Orchestrated", s.orchestrated)
}

type suite[C any] struct{ h Harness[C] }

func (s suite[C]) broker(t *testing.T, base string) broker.Broker {
	t.Helper()
	b, err := s.h.New(s.h.Config(base, secret))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s suite[C]) ok() http.HandlerFunc {
	return Answer(200, string(s.h.Reply([]byte(`{"id":7}`))))
}

func federated() effectspec.Spec {
	return effectspec.Spec{
		Tool:        tool,
		Effect:      effectspec.EffectWrite,
		Route:       effectspec.RouteFederated,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported},
		Status:      effectspec.Statuses{Accepted: []int{200, 201}, DefinitelyRejected: []int{400}, Retryable: []int{503}},
	}
}

// prepare: the Route Prepare returns is Route's; its Target and
// broker.Target send one request there, whatever happens to the routing
// map later, without the key, and report the credential.
func (s suite[C]) prepare(t *testing.T) {
	f := NewFake(t, s.ok())
	b := s.broker(t, f.URL+"/base/")
	host := strings.TrimPrefix(f.URL, "http://")
	for _, r := range s.h.Routings {
		t.Run(r.Name, func(t *testing.T) {
			want, err := b.Route(tool, r.Fields)
			if err != nil {
				t.Fatal(err)
			}
			if want.Broker != s.h.Kind || want.Host != host || want.Tool != tool || !strings.HasPrefix(want.Path, "/base/") {
				t.Errorf("Route = %+v", want)
			}
			routing := maps.Clone(r.Fields)
			target, rt, err := broker.Prepare(b, tool, routing)
			if err != nil || rt != want {
				t.Fatalf("Prepare = %+v, %v; Route %+v", rt, err, want)
			}
			fallback := broker.Target(b, tool, routing)
			for k := range routing {
				routing[k] = "x/../../elsewhere"
			}
			key := idempotency.NewKey()
			for name, tg := range map[string]retry.Target{"prepared": target, "broker.Target": fallback} {
				before := len(f.Requests())
				res := tg.Send(context.Background(), retry.Attempt{Key: key, Number: 1, Arguments: []byte(`{"a":1}`), Spec: federated()})
				if res.Phase != retry.Responded || res.Status != 200 {
					t.Fatalf("%s: result %+v", name, res)
				}
				reqs := f.Requests()[before:]
				if len(reqs) != 1 {
					t.Fatalf("%s: the broker saw %d requests, want 1", name, len(reqs))
				}
				got := reqs[0]
				if got.Method != rt.Method || got.Path != "/base"+r.Path {
					t.Errorf("%s: sent %s %s, want %s /base%s", name, got.Method, got.Path, rt.Method, r.Path)
				}
				if got.Header.Get("Idempotency-Key") != "" || bytes.Contains(got.Body, []byte(key.String())) ||
					strings.Contains(fmt.Sprint(got.Header), key.String()) {
					t.Errorf("%s: the idempotency key reached the broker", name)
				}
				h, ok := tg.(retry.SecretHolder)
				if !ok || !slices.Contains(h.Secrets(), secret) {
					t.Errorf("%s: the target does not report the credential", name)
				}
			}
		})
	}
}

// distinctRoutes: two routings are two destinations.
func (s suite[C]) distinctRoutes(t *testing.T) {
	b := s.broker(t, "https://broker.example")
	seen := map[string]string{}
	for _, r := range s.h.Routings {
		rt, err := b.Route(tool, r.Fields)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[rt.Fingerprint()]; dup {
			t.Errorf("routings %s and %s share a fingerprint", other, r.Name)
		}
		seen[rt.Fingerprint()] = r.Name
	}
}

func isField(err error, field string, sentinel error) bool {
	var fe *effectspec.FieldError
	return errors.Is(err, sentinel) && errors.As(err, &fe) && fe.Field == field
}

// routingRefused: Route, Prepare and Dispatch refuse a bad routing naming
// its field, and nothing is sent.
func (s suite[C]) routingRefused(t *testing.T) {
	f := NewFake(t, s.ok())
	b := s.broker(t, f.URL)
	for _, r := range s.h.BadRoutings {
		t.Run(r.Name, func(t *testing.T) {
			if _, err := b.Route(tool, r.Fields); !isField(err, r.Field, broker.ErrInvalidRouting) {
				t.Errorf("Route err = %v, want %s", err, r.Field)
			}
			target, rt, err := broker.Prepare(b, tool, r.Fields)
			if !isField(err, r.Field, broker.ErrInvalidRouting) || target != nil || !reflect.ValueOf(rt).IsZero() {
				t.Errorf("Prepare = %v, %+v, %v; want no target and %s", target, rt, err, r.Field)
			}
			res := b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: r.Fields})
			if res.Phase != retry.BeforeSend || !isField(res.Err, r.Field, broker.ErrInvalidRouting) || !errors.Is(res.Err, idempotency.ErrInvalidRequest) {
				t.Errorf("Dispatch = %+v, want before_send for %s, a refusal a repeat cannot help", res, r.Field)
			}
		})
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("the broker saw %d requests for refused routings", n)
	}
}

// argumentsRefused: arguments the broker cannot take are refused before
// sending, as a request that cannot succeed.
func (s suite[C]) argumentsRefused(t *testing.T) {
	f := NewFake(t, s.ok())
	b := s.broker(t, f.URL)
	for _, args := range append([]string{`{"a":`, `{"a":1} {}`}, s.h.BadArguments...) {
		res := b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: s.h.Routings[0].Fields, Arguments: json.RawMessage(args)})
		if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrInvalidArguments) || !errors.Is(res.Err, idempotency.ErrInvalidRequest) {
			t.Errorf("%s: result %+v, want before_send ErrInvalidArguments", args, res)
		}
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("the broker saw %d requests", n)
	}
}

// specRefused: a prepared target refuses a spec that is not federated.
func (s suite[C]) specRefused(t *testing.T) {
	f := NewFake(t, s.ok())
	target, _, err := broker.Prepare(s.broker(t, f.URL), tool, s.h.Routings[0].Fields)
	if err != nil {
		t.Fatal(err)
	}
	native := federated()
	native.Route = effectspec.RouteNative
	res := target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Spec: native})
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrNotFederated) {
		t.Errorf("result %+v, want before_send ErrNotFederated", res)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("the broker saw %d requests", n)
	}
}

// configRefused: a bad base URL or credential is a FieldError naming the
// field, never its value.
func (s suite[C]) configRefused(t *testing.T) {
	for _, tc := range []struct{ name, base, secret, field string }{
		{"ftp base", "ftp://h", secret, "BaseURL"},
		{"relative base", "/broker", secret, "BaseURL"},
		{"no host", "https://", secret, "BaseURL"},
		{"userinfo", "https://u:" + secret + "@h", secret, "BaseURL"},
		{"query", "https://h/?k=" + secret, secret, "BaseURL"},
		{"bad escape", "https://h/%zz" + secret, secret, "BaseURL"},
		{"no credential", "https://h", "", s.h.SecretField},
		{"credential with newline", "https://h", secret + "\r\nX-Evil: 1", s.h.SecretField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.h.New(s.h.Config(tc.base, tc.secret))
			if !errors.Is(err, broker.ErrInvalidConfig) {
				t.Fatalf("New err = %v, want ErrInvalidConfig", err)
			}
			var fe *effectspec.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Subject != s.h.Kind {
				t.Errorf("err = %v, want a FieldError for %s", err, tc.field)
			}
			if !strings.HasPrefix(err.Error(), "broker: "+s.h.Kind+": "+tc.field+": ") || strings.Contains(err.Error(), secret) {
				t.Errorf("message %q does not name the field, or holds the credential", err)
			}
		})
	}
}

// shortSecret: a credential too short to scrub is refused; one of the
// minimum length is reported by the Target.
func (s suite[C]) shortSecret(t *testing.T) {
	short := secret[:receipt.MinSecretLen-1]
	_, err := s.h.New(s.h.Config("https://h", short))
	if !errors.Is(err, receipt.ErrShortSecret) || !errors.Is(err, broker.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), s.h.SecretField) || strings.Contains(err.Error(), short) {
		t.Errorf("err %v", err)
	}
	min := secret[:receipt.MinSecretLen]
	b, err := s.h.New(s.h.Config("https://h", min))
	if err != nil {
		t.Fatal(err)
	}
	if got := broker.Target(b, tool, nil).(retry.SecretHolder).Secrets(); !slices.Equal(got, []string{min}) {
		t.Errorf("Target secrets %q", got)
	}
}

// faults: the retry package's phases hold through the broker, and the
// adapter never sends a second request of its own.
func (s suite[C]) faults(t *testing.T) {
	dispatch := func(b broker.Broker, r Routing) retry.Result {
		return b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: r.Fields, Arguments: json.RawMessage(`{"a":1}`)})
	}
	for _, r := range s.h.Routings {
		t.Run(r.Name, func(t *testing.T) {
			f := NewFake(t, Answer(503, `{"error":"busy"}`))
			res := dispatch(s.broker(t, f.URL), r)
			if res.Phase != retry.Responded || res.Status != 503 || string(res.Body) != `{"error":"busy"}` || res.Err != nil {
				t.Errorf("503: result = %+v, want it passed through", res)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("503: the broker saw %d requests, want 1", n)
			}
			f = NewFake(t, ResetAfterRead)
			if res := dispatch(s.broker(t, f.URL), r); res.Phase != retry.PostSend || res.Err == nil {
				t.Errorf("reset after read: result = %+v, want post_send", res)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("reset after read: the broker saw %d requests, want 1", n)
			}
		})
	}
	t.Run("connection refused is before_send", func(t *testing.T) {
		res := dispatch(s.broker(t, refusedURL(t)), s.h.Routings[0])
		var re *retry.Error
		if res.Phase != retry.BeforeSend || !errors.As(res.Err, &re) || re.Reason != "connection refused" ||
			!errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
			t.Errorf("result = %+v, want before_send for connection refused, marked unreachable", res)
		}
	})
	t.Run("dead keep-alive connection is not re-sent", func(t *testing.T) {
		// The first call leaves a keep-alive connection; the fake then
		// resets the second call's after reading it. Go's transport would
		// re-send such a request on a new connection; the adapter must not.
		var calls atomic.Int64
		ok := s.ok()
		f := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				ok(w, r)
				return
			}
			ResetAfterRead(w, r)
		})
		b := s.broker(t, f.URL)
		for i, want := range []retry.Phase{retry.Responded, retry.PostSend} {
			if res := dispatch(b, s.h.Routings[0]); res.Phase != want {
				t.Fatalf("call %d: phase %s, want %s (%v)", i+1, res.Phase, want, res.Err)
			}
		}
		if n := len(f.Requests()); n != 2 {
			t.Errorf("the broker saw %d requests, want 2 (one per Dispatch)", n)
		}
	})
}

func refusedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// echoScrubbed: a tool that echoes its request (headers and body, in the
// answer and in a kept header) cannot hand the credential to the caller,
// to a replay or to the store.
func (s suite[C]) echoScrubbed(t *testing.T) {
	for _, r := range s.h.Routings {
		t.Run(r.Name, func(t *testing.T) {
			var got atomic.Int64
			echo := NewFake(t, func(w http.ResponseWriter, req *http.Request) {
				vals := slices.Concat(slices.Collect(maps.Values(req.Header))...)
				if strings.Contains(strings.Join(vals, " "), secret) {
					got.Add(1)
				}
				body, _ := io.ReadAll(req.Body)
				enc, _ := json.Marshal(map[string]any{"headers": req.Header, "body": string(body)})
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Request-Id", "req "+strings.Join(vals, " "))
				w.Write(s.h.Reply(fmt.Appendf(nil, `{"echo":%s,"php":%s}`, enc, bytes.ReplaceAll(enc, []byte("/"), []byte(`\/`)))))
			})
			b := s.broker(t, echo.URL)
			st, m := miniStore(t)
			target, route, err := broker.Prepare(b, tool, r.Fields)
			if err != nil {
				t.Fatal(err)
			}
			c := s.call(route, target)
			o := orchestrator(st)
			out, err := o.Do(context.Background(), c)
			if err != nil || out.Receipt.Outcome != effectspec.Accepted || got.Load() != 1 {
				t.Fatalf("err %v receipt %+v; the broker got the credential %d times", err, out.Receipt, got.Load())
			}
			again, err := o.Do(context.Background(), c)
			if err != nil || !again.Receipt.Replayed {
				t.Fatalf("replay: err %v receipt %+v", err, again.Receipt)
			}
			rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out.Result.Body, []byte(receipt.Redacted)) || !strings.Contains(out.Result.Header.Get("Request-Id"), receipt.Redacted) {
				t.Errorf("not scrubbed where the echo was: %s %v", out.Result.Body, out.Result.Header)
			}
			for what, res := range map[string]*idempotency.StoredResult{"answer": out.Result, "replay": again.Result, "record": rec.Result} {
				if l := secrettest.Leak(append(res.Body, fmt.Sprint(res.Header)...), secret); l != "" {
					t.Errorf("%s holds the credential (%s): %s %v", what, l, res.Body, res.Header)
				}
			}
			if l := secrettest.Leak(secrettest.DumpRedis(t, m), secret); l != "" {
				t.Errorf("redis holds the credential (%s)", l)
			}
		})
	}
}

func miniStore(t *testing.T) (idempotency.Store, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	st, closeStore, err := embedded.On(context.Background(), m, redisstore.Options{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return st, m
}

// orchestrator allows federated writes: their binding is unsupported.
func orchestrator(st idempotency.Store) *retry.Orchestrator {
	return &retry.Orchestrator{Store: st, Policy: effectspec.Policy{AllowUnsupportedWrites: true}}
}

func (s suite[C]) call(route idempotency.Route, target retry.Target) retry.Call {
	return retry.Call{
		Scope: idempotency.Scope{Workspace: "ws_acme", Connection: s.h.Kind, Tool: tool},
		Key:   idempotency.NewKey(), KeySource: idempotency.KeyMinted,
		Arguments: []byte(`{"title":"bug"}`), Spec: effectspec.MustNew(federated()), Route: route, Target: target,
	}
}

// orchestrated: the retry package's fault matrix holds through a broker
// hop, one vendor hop whose attempts are counted like any other; without a
// vendor binding nothing is sent twice.
func (s suite[C]) orchestrated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   http.HandlerFunc
		outcome effectspec.Outcome
		again   error // what a second Do of the same key returns
	}{
		// The broker may have acted: unknown, and never sent again.
		{"reset after read is unknown", ResetAfterRead, effectspec.Unknown, idempotency.ErrOutcomeUnknown},
		// 503 is listed retryable, but a broker has no vendor binding.
		{"503 is not retried", Answer(503, `{}`), effectspec.Unknown, idempotency.ErrOutcomeUnknown},
		{"accepted is replayed", s.ok(), effectspec.Accepted, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(t, tc.reply)
			st, _ := miniStore(t)
			target, route, err := broker.Prepare(s.broker(t, f.URL), tool, s.h.Routings[0].Fields)
			if err != nil {
				t.Fatal(err)
			}
			o, c := orchestrator(st), s.call(route, target)
			out, err := o.Do(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Receipt
			if r.Outcome != tc.outcome || r.AttemptCount != 1 || len(f.Requests()) != 1 || r.Binding != "unsupported" || r.Propagation != "none" {
				t.Fatalf("receipt %+v; the broker saw %d requests", r, len(f.Requests()))
			}
			again, err := o.Do(context.Background(), c)
			if !errors.Is(err, tc.again) || (tc.again == nil) != (err == nil) || len(f.Requests()) != 1 {
				t.Fatalf("second call: %v, want %v; the broker saw %d requests", err, tc.again, len(f.Requests()))
			}
			if err == nil && (!again.Receipt.Replayed || !bytes.Equal(again.Result.Body, out.Result.Body)) {
				t.Errorf("replay %+v", again.Receipt)
			}
		})
	}
	t.Run("unreachable broker is refused, then dispatched once", func(t *testing.T) {
		// The broker's port is closed: nothing was sent, so the call is
		// refused vendor_unreachable and its slot stays open; once the
		// broker is up, the retry with the same key is sent once.
		addr := strings.TrimPrefix(refusedURL(t), "http://")
		st, _ := miniStore(t)
		target, route, err := broker.Prepare(s.broker(t, "http://"+addr), tool, s.h.Routings[0].Fields)
		if err != nil {
			t.Fatal(err)
		}
		o, c := orchestrator(st), s.call(route, target)
		if _, err := o.Do(context.Background(), c); !errors.Is(err, idempotency.ErrVendorUnreachable) {
			t.Fatalf("broker down: %v, want idempotency.ErrVendorUnreachable", err)
		}
		f := NewFake(t, s.ok())
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on the broker's port again: %v", err)
		}
		up := &http.Server{Handler: f.Config.Handler}
		go up.Serve(ln)
		t.Cleanup(func() { up.Close() })
		out, err := o.Do(context.Background(), c)
		if err != nil || out.Receipt.Outcome != effectspec.Accepted || out.Receipt.AttemptCount != 3 || len(f.Requests()) != 1 {
			t.Fatalf("broker up: %+v (%v); the broker saw %d requests; want accepted, attempt_count 3, 1 request",
				out.Receipt, err, len(f.Requests()))
		}
	})
}

// secretNeverInErrors forces the error paths with the credential in the
// configuration and checks every message of every error chain, and the
// configuration's renderings.
func (s suite[C]) secretNeverInErrors(t *testing.T) {
	var errs []error
	for _, base := range []string{"https://u:" + secret + "@h", "https://h/?" + secret, "https://h#" + secret, "::" + secret} {
		_, err := s.h.New(s.h.Config(base, secret))
		errs = append(errs, err)
	}
	_, err := s.h.New(s.h.Config("https://h", secret+"\n"))
	errs = append(errs, err)
	truncated := NewFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "short")
	})
	for _, base := range []string{refusedURL(t), NewFake(t, ResetAfterRead).URL, truncated.URL} {
		b := s.broker(t, base)
		for _, r := range s.h.Routings {
			errs = append(errs, b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: r.Fields}).Err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := s.broker(t, truncated.URL)
	errs = append(errs,
		b.Dispatch(ctx, broker.Call{Tool: tool, Routing: s.h.Routings[0].Fields}).Err,
		b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: s.h.BadRoutings[0].Fields}).Err,
		b.Dispatch(context.Background(), broker.Call{Tool: tool, Routing: s.h.Routings[0].Fields, Arguments: json.RawMessage(`{`)}).Err,
		broker.Target(b, tool, s.h.Routings[0].Fields).Send(context.Background(), retry.Attempt{Spec: effectspec.Spec{Tool: tool}}).Err,
	)
	_, err = b.Route(tool, map[string]string{"x": secret})
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("error path %d returned no error", i)
		}
		for _, msg := range chainMessages(err) {
			if strings.Contains(msg, secret) || strings.Contains(msg, url.QueryEscape(secret)) {
				t.Errorf("credential in error text: %q", msg)
			}
		}
	}
	cfg := s.h.Config("https://h", secret)
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "broker", cfg)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "broker", cfg)
	for _, out := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%v", &cfg), text.String(), js.String()} {
		if strings.Contains(out, secret) || !strings.Contains(out, "[redacted]") {
			t.Errorf("config rendered as %q", out)
		}
	}
}

// chainMessages returns the message of err and of everything it wraps.
func chainMessages(err error) []string {
	if err == nil {
		return nil
	}
	msgs := []string{err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		msgs = append(msgs, chainMessages(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			msgs = append(msgs, chainMessages(e)...)
		}
	}
	return msgs
}
