package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// dedupVendor deduplicates as Stripe does: the first request with a key is
// performed and its response stored; a later request with the same key gets
// that stored response, whatever its body says. It records every key it
// received, from the Idempotency-Key header or the body's "idem" member.
type dedupVendor struct {
	*httptest.Server
	mu      sync.Mutex
	first   map[string][]byte // key -> the response of its first request
	effects int               // requests performed (not answered from first)
	keys    []string          // every key received, in order
	bodies  []string
}

func newDedupVendor(t *testing.T) *dedupVendor {
	v := &dedupVendor{first: map[string][]byte{}}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var args struct {
			Amount   json.Number `json:"amount"`
			Currency string      `json:"currency"`
			Idem     string      `json:"idem"`
		}
		json.Unmarshal(body, &args)
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			key = args.Idem
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		v.keys = append(v.keys, key)
		v.bodies = append(v.bodies, string(body))
		w.Header().Set("Content-Type", "application/json")
		if key == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if resp, ok := v.first[key]; ok {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusOK)
			w.Write(resp)
			return
		}
		v.effects++
		resp := fmt.Appendf(nil, `{"id":"ch_%d","amount":%s,"currency":%q}`, v.effects, args.Amount, args.Currency)
		v.first[key] = resp
		w.WriteHeader(http.StatusOK)
		w.Write(resp)
	}))
	t.Cleanup(v.Close)
	return v
}

// tenantsConfig: two workspaces share one connection (one vendor account),
// with a header-bound and a body-pointer-bound charge tool.
const tenantsConfig = `{
  "key_prefix": "tn:", "environment": "production",
  "workspaces": [{"id": "ws_acme", "api_keys": ["` + e2eKeyOne + `"]}, {"id": "ws_globex", "api_keys": ["` + e2eKeyTwo + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_pay", "provider": "payments", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_pay", "path": "/v1/charges", "spec": {"tool": "payments.create_charge",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [200, 201]}}},
    {"connection": "conn_pay", "path": "/v1/charges", "spec": {"tool": "payments.create_charge_body",
      "idempotency": {"binding": "body_pointer", "pointer": "/idem"}, "status": {"accepted": [200, 201]}}}
  ]
}`

// TestTenantsNeverMeetAtTheVendor: two workspaces call the same tool on one
// shared connection with the same client key and different charges. The vendor
// deduplicates on the key it receives, so if the client's key went through, the
// second tenant would get the first tenant's charge. Each must get its own
// charge, the vendor must perform two, and it never sees the client's key
// (docs/DESIGN.md, "The key on the vendor hop"). Black-box: the built refserver
// on a real Redis, through the go-sdk client.
func TestTenantsNeverMeetAtTheVendor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newDedupVendor(t)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(tenantsConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())

	for i, tool := range []string{"payments.create_charge", "payments.create_charge_body"} {
		key := fmt.Sprintf("idt_%032x", i+1) // a client-chosen key both tenants happen to use
		acmeArgs := map[string]any{"amount": 100, "currency": "usd"}
		globexArgs := map[string]any{"amount": 555, "currency": "eur"}
		acme := call(t, p.session(t, e2eKeyOne, key), tool, acmeArgs, "")
		globex := call(t, p.session(t, e2eKeyTwo, key), tool, globexArgs, "")
		acme.wantOutcome(t, "accepted", false)
		globex.wantOutcome(t, "accepted", false)
		if !strings.Contains(acme.text, `"amount":100,"currency":"usd"`) {
			t.Errorf("%s: acme got %s, want its own charge of 100 usd", tool, acme.text)
		}
		if !strings.Contains(globex.text, `"amount":555,"currency":"eur"`) {
			t.Errorf("%s: globex got %s, want its own charge of 555 eur (not acme's)", tool, globex.text)
		}
		if acme.key != key || globex.key != key {
			t.Errorf("%s: effective keys %s, %s; want the client's %s echoed to both", tool, acme.key, globex.key, key)
		}
		avk, gvk := acme.rc.VendorKey, globex.rc.VendorKey
		if avk == "" || gvk == "" || avk == gvk || avk == key || gvk == key {
			t.Errorf("%s: vendor keys %q and %q; want two, neither the client's %s", tool, avk, gvk, key)
		}
		// A retry of acme's call replays; the vendor is not asked again.
		call(t, p.session(t, e2eKeyOne, key), tool, acmeArgs, "").wantOutcome(t, "accepted", true)

		vendor.mu.Lock()
		effects, keys, bodies := vendor.effects, append([]string(nil), vendor.keys...), strings.Join(vendor.bodies, "\n")
		vendor.mu.Unlock()
		if want := 2 * (i + 1); effects != want || len(keys) != want {
			t.Errorf("%s: vendor performed %d charges from %d requests, want %d and %d", tool, effects, len(keys), want, want)
		}
		for _, k := range keys {
			if _, err := idempotency.ParseKey(k); err != nil || k == key {
				t.Errorf("%s: the vendor received key %q; want a vendor key, never the client's %s", tool, k, key)
			}
		}
		if strings.Contains(bodies, key) {
			t.Errorf("%s: a request body carried the client's key", tool)
		}
		if keys[len(keys)-2] != avk || keys[len(keys)-1] != gvk {
			t.Errorf("%s: vendor got keys %v, receipts say %s and %s", tool, keys[len(keys)-2:], avk, gvk)
		}
	}
}
