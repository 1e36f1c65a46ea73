package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
)

// statusRecords writes, through the store, records of known states under
// prefix on mr and returns the table rows scope-status must print.
func statusRecords(t *testing.T, mr *miniredis.Miniredis, prefix string) map[string]string {
	t.Helper()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mr.SetTime(t0)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ctx := context.Background()
	st, err := redisstore.New(ctx, client, redisstore.Options{Prefix: prefix, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("x"))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: "pay.charge"}
	claim := func(approval bool) (idempotency.Key, int) {
		k := idempotency.NewKey()
		res, err := st.Claim(ctx, idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied,
			RequestHash: digest, Route: receipt.RouteRecord{Fingerprint: digest}, Binding: effectspec.BindingHeader, ApprovalRequired: approval})
		if err != nil {
			t.Fatal(err)
		}
		return k, res.Token
	}
	finalize := func(k idempotency.Key, token int, outcome effectspec.Outcome) {
		if _, err := st.Finalize(ctx, idempotency.FinalizeRequest{Scope: scope, Key: k, Token: token, Outcome: outcome,
			Result: &idempotency.StoredResult{Status: 200}}); err != nil {
			t.Fatal(err)
		}
	}
	claim(false) // its lease lapses below: unknown
	mr.SetTime(t0.Add(st.Lease() + time.Second))
	claim(false) // in flight
	for range 3 {
		k, n := claim(false)
		finalize(k, n, effectspec.Accepted)
	}
	k, n := claim(false)
	finalize(k, n, effectspec.DefinitelyRejected)
	claim(true) // held
	return map[string]string{
		"1 accepted":            "3",
		"1 definitely_rejected": "1",
		"1 held":                "1",
		"1 in_progress":         "1",
		"1 unknown":             "1",
		"total":                 "7",
	}
}

// table reads scope-status's rows: "version state" (or "total") to count.
func table(t *testing.T, out string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] != "version" && f[0] != "prefix":
			rows[f[0]+" "+f[1]] = f[2]
		case len(f) == 2 && f[0] == "total":
			rows["total"] = f[1]
		}
	}
	return rows
}

func TestScopeStatusCounts(t *testing.T) {
	mr := miniredis.RunT(t)
	want := statusRecords(t, mr, "e2e:")
	before := mr.Dump()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"scope-status", "-redis", "redis://" + mr.Addr(), "-prefix", "e2e:", "-progress", "3"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	got := table(t, stdout.String())
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v\n%s", got, want, stdout.String())
	}
	for row, n := range want {
		if got[row] != n {
			t.Errorf("%s: %q, want %s\n%s", row, got[row], n, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "fleet scope version 1") {
		t.Errorf("no fleet scope version in:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "keys read") {
		t.Errorf("no progress line on stderr: %q", stderr.String())
	}
	if after := mr.Dump(); after != before {
		t.Errorf("scope-status changed Redis:\n%s\nwant\n%s", after, before)
	}

	// The URL may come from the environment; another prefix has no records.
	t.Setenv(envRedisURL, "redis://"+mr.Addr())
	stdout.Reset()
	if code := run(context.Background(), []string{"scope-status", "-prefix", "other:"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := table(t, stdout.String()); len(got) != 1 || got["total"] != "0" || !strings.Contains(stdout.String(), "fleet scope version not set") {
		t.Errorf("other prefix:\n%s", stdout.String())
	}
}

// TestScopeStatusRefuses: bad input gets a clear error, exit 2, and never
// an echo of what may hold a secret.
func TestScopeStatusRefuses(t *testing.T) {
	t.Setenv(envRedisURL, "")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "give -redis URL or set " + envRedisURL},
		{[]string{"-redis", "redis://:s3cr3tpw@127.0.0.1:notaport"}, 2, "-redis"},
		{[]string{"-redis", "redis://127.0.0.1:1", "-prefix", "a{s3cr3tpw}"}, 2, "-prefix"},
		{[]string{"-redis", "redis://127.0.0.1:1", "-progress", "0"}, 2, "-progress"},
		{[]string{"-redis", "redis://127.0.0.1:1", "s3cr3tpw"}, 2, "unexpected argument"},
		// Unreachable: exit 1.
		{[]string{"-redis", "redis://:s3cr3tpw@127.0.0.1:1"}, 1, "refserver scope-status: "},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"scope-status"}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", tc.args, code, stderr.String(), tc.code, tc.says)
		}
		if l := secrettest.Leak(append(stdout.Bytes(), stderr.Bytes()...), "s3cr3tpw"); l != "" {
			t.Errorf("%v: output leaks the secret: %s", tc.args, l)
		}
	}
}

// TestScopeVersionChangeOnTheWire: once the fleet's scope version changes
// under a running gateway, a call is refused with 503
// scope_version_conflict and never dispatched, and /healthz says so; set
// back, the gateway serves again. The gateway re-reads the key once a lease
// (1s here) has passed since its last reading, which the sleeps guarantee.
func TestScopeVersionChangeOnTheWire(t *testing.T) {
	rs := redistest.Start(t)
	vendor := newTestVendor(t)
	t.Setenv("E2E_VENDOR_SECRET", e2eSecret)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	cfg := strings.ReplaceAll(strings.Replace(e2eConfig, `"lease": "10s"`, `"lease": "1s"`, 1), "{{VENDOR}}", vendor.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// A production fleet: its deployment id and its store initialised.
	t.Setenv(envDeploymentID, e2eDeployment)
	var initOut, initErr bytes.Buffer
	if code := run(context.Background(), []string{"store", "init", "-config", cfgPath, "-redis", "redis://" + rs.Addr()}, &initOut, &initErr); code != 0 {
		t.Fatalf("store init: exit %d\n%s%s", code, initOut.String(), initErr.String())
	}
	base, _, stderr, _ := runServer(t, "-config", cfgPath, "-redis", "redis://"+rs.Addr())
	if base == "" {
		t.Fatalf("did not start:\n%s", stderr.String())
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":1}}}`
	health := func() (int, string) {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}

	if _, err := rs.Do("SET", "e2e:meta:scope_version", "2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	k := idempotency.NewKey().String()
	// A refusal of the tool layer is a JSON-RPC error; its status is the
	// equivalent HTTP status (docs/DESIGN.md, "refserver wire contract").
	_, b := rawPost(t, base, http.MethodPost, e2eKeyOne, k, body)
	if _, data := decodeWireError(t, b); data.Reason != "scope_version_conflict" || data.Status != 503 || data.IdempotencyKey != k {
		t.Errorf("call after the change: %+v; want 503 scope_version_conflict", data)
	}
	if code, hb := health(); code != http.StatusServiceUnavailable || !strings.Contains(hb, "scope_version_conflict") {
		t.Errorf("healthz after the change: %d %s", code, hb)
	}
	if n := vendor.count("/charge", ""); n != 0 {
		t.Errorf("vendor saw %d requests", n)
	}

	if _, err := rs.Do("SET", "e2e:meta:scope_version", "1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if code, hb := health(); code != http.StatusOK {
		t.Errorf("healthz once set back: %d %s", code, hb)
	}
	call(t, newSession(t, base, e2eKeyOne, k), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
}

// TestGatewayRefusesAnotherScopeVersion: a gateway started against a Redis
// whose fleet scope version differs exits non-zero, naming both versions,
// and writes nothing.
func TestGatewayRefusesAnotherScopeVersion(t *testing.T) {
	rs := redistest.Start(t)
	if _, err := rs.Do("SET", "obol:meta:scope_version", "7"); err != nil {
		t.Fatal(err)
	}
	base, _, stderr, exit := runServer(t, "-redis", "redis://"+rs.Addr())
	if base != "" {
		t.Fatalf("the gateway started (at %s) against scope version 7", base)
	}
	if code := <-exit; code == 0 {
		t.Fatal("the gateway exited 0")
	}
	msg := stderr.String()
	if !strings.Contains(msg, "7") || !strings.Contains(msg, strconv.Itoa(idempotency.ScopeVersion)) {
		t.Errorf("the refusal does not name both versions: %q", msg)
	}
	if keys, err := rs.Do("KEYS", "*"); err != nil || len(keys.([]any)) != 1 {
		t.Errorf("keys after the refusal: %v %v, want only the scope version", keys, err)
	}
}
