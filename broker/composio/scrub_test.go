package composio_test

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
	"github.com/obol-gateway/obol/broker/composio"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

func TestEchoedAPIKeyIsScrubbed(t *testing.T) {
	// A tool whose output echoes the request, as an HTTP-debugging tool does:
	// the headers (x-api-key among them) and the body, in data.
	var keys atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Api-Key") == apiKey {
			keys.Add(1)
		}
		enc, _ := json.Marshal(map[string]any{"headers": r.Header, "body": string(body)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "k="+r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, `{"successful":true,"data":%s,"error":null}`, enc)
	}))
	t.Cleanup(srv.Close)

	b := newBroker(t, srv.URL)
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
	route, err := b.Route("github.create_issue", routing())
	if err != nil {
		t.Fatal(err)
	}
	c := retry.Call{
		Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "composio", Tool: "github.create_issue"},
		Key:   idempotency.NewKey(), KeySource: idempotency.KeyMinted,
		Arguments: []byte(`{"title":"bug"}`),
		Spec:      federated(),
		Route:     route,
		Target:    broker.Target(b, "github.create_issue", routing()),
	}
	c.Spec.Effect = effectspec.EffectWrite
	c.Spec = effectspec.MustNew(c.Spec)
	o := &retry.Orchestrator{Store: st, Policy: effectspec.Policy{AllowUnsupportedWrites: true}}
	out, err := o.Do(context.Background(), c)
	if err != nil || out.Receipt.Outcome != receipt.Accepted || keys.Load() != 1 {
		t.Fatalf("err %v receipt %+v; Composio got the key %d times", err, out.Receipt, keys.Load())
	}
	again, err := o.Do(context.Background(), c)
	if err != nil || !again.Receipt.Replayed {
		t.Fatalf("replay: err %v receipt %+v", err, again.Receipt)
	}
	rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Result.Body), `"X-Api-Key":["[redacted]"]`) || out.Result.Header.Get("X-Request-Id") != "k=[redacted]" {
		t.Errorf("not scrubbed where the echo was: %s %v", out.Result.Body, out.Result.Header)
	}
	for what, r := range map[string]*idempotency.StoredResult{"answer": out.Result, "replay": again.Result, "record": rec.Result} {
		if l := secrettest.Leak(append(r.Body, fmt.Sprint(r.Header)...), apiKey); l != "" {
			t.Errorf("%s holds the API key (%s): %s %v", what, l, r.Body, r.Header)
		}
	}
	if l := secrettest.Leak(secrettest.DumpRedis(t, m), apiKey); l != "" {
		t.Errorf("redis holds the API key (%s)", l)
	}
}

func TestShortAPIKeyRefused(t *testing.T) {
	_, err := composio.New(composio.Config{APIKey: "ak_1234"})
	if !errors.Is(err, receipt.ErrShortSecret) || !errors.Is(err, broker.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "APIKey") || strings.Contains(err.Error(), "ak_1234") {
		t.Errorf("err %v", err)
	}
	if got := broker.Target(newBroker(t, ""), "t", nil).(retry.SecretHolder).Secrets(); len(got) != 1 || got[0] != apiKey {
		t.Errorf("Target secrets %q", got)
	}
}
