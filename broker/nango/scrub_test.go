package nango_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// echoNango answers every request 200 with its headers and body in a JSON
// body, and its Authorization in Request-Id, a header the store keeps.
func echoNango(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var auths atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") == "Bearer "+secret {
			auths.Add(1)
		}
		enc, _ := json.Marshal(map[string]any{"headers": r.Header, "body": string(body)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req "+r.Header.Get("Authorization"))
		fmt.Fprintf(w, `{"echo":%s,"php":%s}`, enc, strings.ReplaceAll(string(enc), "/", `\/`))
	}))
	t.Cleanup(srv.Close)
	return srv, &auths
}

func TestEchoedSecretIsScrubbed(t *testing.T) {
	for name, routing := range map[string]map[string]string{
		"proxy":  {nango.FieldConnectionID: "gh-1", nango.FieldProviderConfigKey: "github", nango.FieldPath: "/repos/o/r/issues"},
		"action": {nango.FieldConnectionID: "gh-1", nango.FieldProviderConfigKey: "github", nango.FieldAction: "create-issue"},
	} {
		t.Run(name, func(t *testing.T) {
			srv, auths := echoNango(t)
			b, err := nango.New(nango.Config{BaseURL: srv.URL, Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			m := miniredis.RunT(t)
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			st, err := redisstore.New(context.Background(), client, redisstore.Options{SkipEvictionCheck: true, Lease: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			route, err := b.Route("gh.create_issue", routing)
			if err != nil {
				t.Fatal(err)
			}
			c := retry.Call{
				Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "nango", Tool: "gh.create_issue"},
				Key:   idempotency.NewKey(), KeySource: idempotency.KeyMinted,
				Arguments: []byte(`{"title":"bug"}`),
				Spec: effectspec.MustNew(effectspec.Spec{Tool: "gh.create_issue", Effect: effectspec.EffectWrite, Route: effectspec.RouteFederated,
					Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported}, Status: effectspec.Statuses{Accepted: []int{200}}}),
				Route:  route,
				Target: broker.Target(b, "gh.create_issue", routing),
			}
			o := &retry.Orchestrator{Store: st, Policy: effectspec.Policy{AllowUnsupportedWrites: true}}
			out, err := o.Do(context.Background(), c)
			if err != nil || out.Receipt.Outcome != receipt.Accepted || auths.Load() != 1 {
				t.Fatalf("err %v receipt %+v; Nango got the secret %d times", err, out.Receipt, auths.Load())
			}
			again, err := o.Do(context.Background(), c)
			if err != nil || !again.Receipt.Replayed {
				t.Fatalf("replay: err %v receipt %+v", err, again.Receipt)
			}
			rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out.Result.Body), `"Bearer [redacted]"`) || out.Result.Header.Get("Request-Id") != "req Bearer [redacted]" {
				t.Errorf("not scrubbed where the echo was: %s %v", out.Result.Body, out.Result.Header)
			}
			for what, r := range map[string]*idempotency.StoredResult{"answer": out.Result, "replay": again.Result, "record": rec.Result} {
				if l := secrettest.Leak(append(r.Body, fmt.Sprint(r.Header)...), secret); l != "" {
					t.Errorf("%s holds the secret (%s): %s %v", what, l, r.Body, r.Header)
				}
			}
			if l := secrettest.Leak(secrettest.DumpRedis(t, m), secret); l != "" {
				t.Errorf("redis holds the secret (%s)", l)
			}
		})
	}
}

func TestShortSecretRefused(t *testing.T) {
	_, err := nango.New(nango.Config{BaseURL: "https://api.nango.dev", Secret: "nk_1234"})
	if !errors.Is(err, receipt.ErrShortSecret) || !errors.Is(err, broker.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "Secret") || strings.Contains(err.Error(), "nk_1234") {
		t.Errorf("err %v", err)
	}
	b, err := nango.New(nango.Config{BaseURL: "https://api.nango.dev", Secret: "nk_12345"})
	if err != nil {
		t.Fatal(err)
	}
	if got := broker.Target(b, "t", nil).(retry.SecretHolder).Secrets(); len(got) != 1 || got[0] != "nk_12345" {
		t.Errorf("Target secrets %q", got)
	}
}
