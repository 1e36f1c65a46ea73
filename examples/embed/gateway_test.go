package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
)

const testVendorKey = "sk_test_never_echoed"

// vendor counts requests and checks what the gateway sends. gate, if set,
// holds every request until it is closed.
type vendor struct {
	calls atomic.Int64
	hits  chan struct{}
	gate  chan struct{}
	mu    sync.Mutex
	keys  []string
	auths []string
}

func (v *vendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	n := v.calls.Add(1)
	v.mu.Lock()
	v.keys = append(v.keys, r.Header.Get("Idempotency-Key"))
	v.auths = append(v.auths, r.Header.Get("Authorization"))
	v.mu.Unlock()
	if v.hits != nil {
		v.hits <- struct{}{}
	}
	if v.gate != nil {
		<-v.gate
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Set-Cookie", "session=secret") // must not be stored or replayed
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"ch_`+strconv.FormatInt(n, 10)+`"}`)
}

type env struct {
	store  *redisstore.Store
	mr     *miniredis.Miniredis
	vendor *vendor
	h      http.Handler
}

func newEnv(t *testing.T, v *vendor) *env {
	t.Helper()
	mr := miniredis.RunT(t)
	store, closeStore, err := embedded.On(context.Background(), mr, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	vs := httptest.NewServer(v)
	t.Cleanup(vs.Close)
	h, err := newGateway(store, vs.URL, testVendorKey)
	if err != nil {
		t.Fatal(err)
	}
	return &env{store: store, mr: mr, vendor: v, h: h}
}

// records lists the keys of claim records and tickets: the fleet's meta keys
// (the deployment id) are written when the store starts.
func records(mr *miniredis.Miniredis) []string {
	var out []string
	for _, k := range mr.Keys() {
		if !strings.HasPrefix(k, idempotency.DefaultPrefix+"meta:") {
			out = append(out, k)
		}
	}
	return out
}

func (e *env) charge(key []string, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for _, k := range key {
		r.Header.Add("Idempotency-Key", k)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func reason(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var v struct{ Reason string }
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("refusal body %q: %v", w.Body, err)
	}
	return v.Reason
}

func TestReplayAndMismatch(t *testing.T) {
	e := newEnv(t, &vendor{})
	key := idempotency.NewKey().String()

	first := e.charge([]string{key}, `{"amount": 100, "currency": "eur"}`)
	if first.Code != http.StatusCreated || first.Body.String() != `{"id":"ch_1"}` {
		t.Fatalf("first call: %d %q, want 201 {\"id\":\"ch_1\"}", first.Code, first.Body)
	}
	if got := first.Header().Get("Idempotency-Key"); got != key {
		t.Errorf("Idempotency-Key response header %q, want %q", got, key)
	}
	if first.Header().Get("Idempotent-Replayed") != "" {
		t.Error("first call says Idempotent-Replayed")
	}
	// The vendor gets the slot's vendor key (docs/DESIGN.md, "The key on the
	// vendor hop"), never the client's.
	k, _ := idempotency.ParseKey(key)
	hash, _ := idempotency.RequestHash([]byte(`{"amount": 100, "currency": "eur"}`))
	vk := idempotency.VendorKey(e.store.Deployment(), chargeScope, k, hash).String()
	e.vendor.mu.Lock()
	if e.vendor.keys[0] != vk || vk == key || e.vendor.auths[0] != "Bearer "+testVendorKey {
		t.Errorf("vendor saw key %q auth %q; want the vendor key %q", e.vendor.keys[0], e.vendor.auths[0], vk)
	}
	e.vendor.mu.Unlock()

	// Same key, same request (other spelling): the stored result, no second send.
	again := e.charge([]string{`"` + key + `"`}, `{"currency":"eur","amount":1e2}`)
	if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() {
		t.Fatalf("replay: %d %q, want the first answer", again.Code, again.Body)
	}
	if again.Header().Get("Idempotent-Replayed") != "true" {
		t.Error("replay lacks Idempotent-Replayed: true")
	}
	if again.Header().Get("Content-Type") != "application/json" || again.Header().Get("Set-Cookie") != "" {
		t.Errorf("replayed headers %v: want the safe ones only", again.Header())
	}

	mismatch := e.charge([]string{key}, `{"amount": 999, "currency": "eur"}`)
	if mismatch.Code != http.StatusUnprocessableEntity || reason(t, mismatch) != "request_mismatch" {
		t.Fatalf("other body, same key: %d %q, want 422 request_mismatch", mismatch.Code, mismatch.Body)
	}
	if n := e.vendor.calls.Load(); n != 1 {
		t.Fatalf("vendor saw %d requests, want 1", n)
	}

	// No key: one is minted, echoed, and the call is a new charge.
	minted := e.charge(nil, `{"amount": 100, "currency": "eur"}`)
	mk := minted.Header().Get("Idempotency-Key")
	if _, err := idempotency.ParseKey(mk); err != nil || mk == key || minted.Code != http.StatusCreated {
		t.Fatalf("no key: %d with key %q, want 201 and a fresh minted key", minted.Code, mk)
	}
	if n := e.vendor.calls.Load(); n != 2 {
		t.Fatalf("vendor saw %d requests, want 2", n)
	}
}

func TestMalformedKey(t *testing.T) {
	e := newEnv(t, &vendor{})
	for name, key := range map[string][]string{
		"upper case":     {"idt_5C1F0000000000000000000000000000"},
		"not a key":      {"sk_live_pasted_by_mistake"},
		"two fields":     {idempotency.NewKey().String(), idempotency.NewKey().String()},
		"empty":          {""},
		"trailing space": {idempotency.NewKey().String() + " "},
	} {
		w := e.charge(key, `{"amount": 1}`)
		if w.Code != http.StatusBadRequest || reason(t, w) != "malformed_key" {
			t.Errorf("%s: %d %q, want 400 malformed_key", name, w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), "sk_live") || w.Header().Get("Idempotency-Key") != "" {
			t.Errorf("%s: the refusal echoes a key: %q %v", name, w.Body, w.Header())
		}
	}
	if n := e.vendor.calls.Load(); n != 0 {
		t.Errorf("vendor saw %d requests, want 0", n)
	}
	if keys := records(e.mr); len(keys) != 0 {
		t.Errorf("store holds %v after refusals, want nothing", keys)
	}
}

func TestInvalidArguments(t *testing.T) {
	e := newEnv(t, &vendor{})
	w := e.charge([]string{idempotency.NewKey().String()}, `{"amount": 1,}`)
	if w.Code != http.StatusBadRequest || reason(t, w) != "invalid_arguments" {
		t.Errorf("invalid JSON: %d %q, want 400 invalid_arguments", w.Code, w.Body)
	}
	if e.vendor.calls.Load() != 0 || len(records(e.mr)) != 0 {
		t.Error("invalid JSON reached the vendor or the store")
	}
}

// TestConcurrentSameKey holds the one dispatched request at the vendor until
// the 15 others have been answered, so they all contend with a live lease.
func TestConcurrentSameKey(t *testing.T) {
	const n = 16
	v := &vendor{hits: make(chan struct{}, n), gate: make(chan struct{})}
	e := newEnv(t, v)
	key := idempotency.NewKey().String()

	results := make(chan *httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { results <- e.charge([]string{key}, `{"amount": 100}`) })
	}
	var got []*httptest.ResponseRecorder
	hits := 0
	for len(got) < n-1 && hits < 2 {
		select {
		case <-v.hits:
			hits++
		case w := <-results:
			got = append(got, w)
		}
	}
	close(v.gate)
	wg.Wait()
	close(results)
	for w := range results {
		got = append(got, w)
	}

	created, busy := 0, 0
	for _, w := range got {
		switch {
		case w.Code == http.StatusCreated && w.Header().Get("Idempotent-Replayed") == "":
			created++
		case w.Code == http.StatusConflict && reason(t, w) == "in_progress":
			busy++
			if w.Header().Get("Retry-After") == "" || w.Header().Get("Idempotency-Key") != key {
				t.Errorf("in_progress reply headers %v", w.Header())
			}
		default:
			t.Errorf("unexpected reply %d %q", w.Code, w.Body)
		}
	}
	if calls := v.calls.Load(); calls != 1 || created != 1 || busy != n-1 {
		t.Fatalf("vendor saw %d requests, %d created, %d in_progress; want 1, 1, %d", calls, created, busy, n-1)
	}
}

func TestNewGatewayRejectsBadVendorURL(t *testing.T) {
	for _, u := range []string{"", "ftp://vendor", "http://user:pw@vendor", "vendor.example"} {
		if _, err := newGateway(nil, u, ""); err == nil {
			t.Errorf("newGateway(%q): no error", u)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("newGateway(%q): error echoes the URL: %v", u, err)
		}
	}
}

var chargeScope = idempotency.Scope{Workspace: workspace, Connection: connection, Tool: "payments.create_charge"}
