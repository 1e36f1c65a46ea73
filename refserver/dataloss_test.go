package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/retry"
)

// dataLossConfig is e2eConfig with a short lease (the loss is seen within
// one) and, if dep is not empty, a deployment_id.
func dataLossConfig(t *testing.T, vendorURL, dep string) string {
	t.Helper()
	conf := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)
	conf = strings.Replace(conf, `"lease": "10s"`, `"lease": "2s"`, 1)
	if dep != "" {
		conf = strings.Replace(conf, `"environment"`, `"deployment_id": "`+dep+`", "environment"`, 1)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomDeployment(t *testing.T) string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// receiptVendorKey is the vendor_key of ws_one's receipt of pay.charge
// under key.
func receiptVendorKey(t *testing.T, p *proc, key string) string {
	t.Helper()
	code, m := p.post(t, "GET", "/v1/receipts/"+key+"?tool=pay.charge", e2eKeyOne, "")
	vk, _ := m["vendor_key"].(string)
	if code != 200 || vk == "" {
		t.Fatalf("receipt of %s: %d %v", key, code, m)
	}
	return vk
}

// waitStderr waits until p's stderr holds every want: it is copied from a
// pipe, a moment after the line was written.
func waitStderr(t *testing.T, p *proc, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		missing := ""
		for _, w := range wants {
			if !strings.Contains(p.Log(), w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q:\n%s", missing, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHealth polls /healthz until it answers code with reason (empty: any).
func waitHealth(t *testing.T, p *proc, code int, reason string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, m := getHealth(t, p)
		if got == code && (reason == "" || m["reason"] == reason) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz %d %v, want %d %s within %v", got, m, code, reason, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStoreDataLost: an empty Redis restarted under a running gateway. Once
// the gateway's next reading sees its sentinel gone, /healthz is 503
// store_data_lost, calls (a retry of a settled key, a new key) are refused
// store_data_lost with safe_new_key false and the vendor receives nothing,
// until an operator acknowledges; then calls go on, and the retried call
// reaches the vendor with its vendor key unchanged. With deployment_id set,
// a gateway started on a Redis rebuilt from nothing sends the same vendor
// key too; without it, another one (the control). A gateway whose
// deployment_id differs from the stored one refuses to start naming both.
func TestStoreDataLost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t) // persists nothing
	vendor := newTestVendor(t)
	dep := randomDeployment(t)
	cfgPath := dataLossConfig(t, vendor.URL, dep)
	bin := refservertest.Build(t)
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	key := idempotency.NewKey().String()
	args := map[string]any{"amount": 100}
	call(t, p.session(t, e2eKeyOne, key), "pay.charge", args, "").wantOutcome(t, "accepted", false)
	vk := receiptVendorKey(t, p, key)
	if n := vendor.count("/charge", vk); n != 1 {
		t.Fatalf("the vendor saw %d requests, want 1", n)
	}

	redis.Restart() // empty
	waitHealth(t, p, 503, "store_data_lost", 15*time.Second)
	waitStderr(t, p, "STORE DATA LOST", `level=ERROR msg="store data lost`)
	for _, k := range []string{key, idempotency.NewKey().String()} {
		a := call(t, p.session(t, e2eKeyOne, k), "pay.charge", args, "")
		a.wantRefusal(t, "store_data_lost", 503)
		if a.refusal.SafeNewKey == nil || *a.refusal.SafeNewKey {
			t.Errorf("store_data_lost: safe_new_key %v, want false", a.refusal.SafeNewKey)
		}
	}
	if n := vendor.count("/charge", ""); n != 1 {
		t.Fatalf("the vendor saw %d requests under the loss, want still 1", n)
	}

	if code, m := p.post(t, "POST", "/v1/store/acknowledge-data-loss", e2eKeyOne, ""); code != 401 {
		t.Fatalf("acknowledge with an API key: %d %v, want 401", code, m)
	}
	// The operator's command, against this gateway.
	code, stdout, stderr := runCLI(t, bin, e2eKeyAdmin, "store", "acknowledge-data-loss", "-url", p.base)
	if code != 0 || !strings.HasPrefix(stdout, "store data loss acknowledged (") ||
		!strings.Contains(stdout, "deployment id is unchanged") || !strings.Contains(stderr, "can be dispatched again") {
		t.Fatalf("refserver store acknowledge-data-loss: exit %d\n%s%s", code, stdout, stderr)
	}
	waitStderr(t, p, `level=WARN msg="store data loss acknowledged`, "can be dispatched again", "deployment id is unchanged")
	if code, m := p.post(t, "POST", "/v1/store/acknowledge-data-loss", e2eKeyAdmin, ""); code != 200 || m["acknowledged"] != false {
		t.Fatalf("a second acknowledgement: %d %v, want nothing to acknowledge", code, m)
	}
	if code, stdout, _ := runCLI(t, bin, e2eKeyAdmin, "store", "acknowledge-data-loss", "-url", p.base); code != 0 ||
		!strings.HasPrefix(stdout, "no store data loss to acknowledge") {
		t.Fatalf("a second acknowledgement by the command: exit %d, %q", code, stdout)
	}
	waitHealth(t, p, 200, "", 5*time.Second)
	// The record was lost: the retry dispatches again, with the same vendor
	// key, which a vendor that deduplicates answers from its first call.
	call(t, p.session(t, e2eKeyOne, key), "pay.charge", args, "").wantOutcome(t, "accepted", false)
	if got := receiptVendorKey(t, p, key); got != vk {
		t.Fatalf("vendor key after the acknowledgement %s, before %s", got, vk)
	}
	if n := vendor.count("/charge", vk); n != 2 {
		t.Fatalf("the vendor saw the vendor key %d times, want 2", n)
	}
	p.stop(t)

	// Redis rebuilt with no gateway running: a gateway of the same
	// deployment_id sends the same vendor key.
	redis.Restart()
	q := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	call(t, q.session(t, e2eKeyOne, key), "pay.charge", args, "").wantOutcome(t, "accepted", false)
	if got := receiptVendorKey(t, q, key); got != vk {
		t.Fatalf("vendor key after the rebuild %s, before %s", got, vk)
	}
	q.stop(t)

	// Another deployment_id on this Redis: refused, naming both.
	other := randomDeployment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-config", dataLossConfig(t, vendor.URL, other), "-redis", "redis://"+redis.Addr())
	cmd.Env = append(os.Environ(), "E2E_VENDOR_SECRET="+e2eSecret)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), dep) || !strings.Contains(string(out), other) {
		t.Fatalf("a gateway of another deployment_id: %v\n%s\nwant a refusal naming %s and %s", err, out, dep, other)
	}

	// The control: without deployment_id (not in production, which
	// requires one), a rebuilt Redis gets another id, and the same call
	// another vendor key.
	redis.Restart()
	devCfg := dataLossConfig(t, vendor.URL, "")
	raw, err := os.ReadFile(devCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devCfg, []byte(strings.Replace(string(raw), `"environment": "production"`, `"environment": "development"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := refservertest.Start(t, refservertest.Options{Args: []string{"-config", devCfg, "-redis", "redis://" + redis.Addr()},
		Env: []string{"E2E_VENDOR_SECRET=" + e2eSecret}})
	c := &proc{base: cs.Base, Server: cs}
	call(t, c.session(t, e2eKeyOne, key), "pay.charge", args, "").wantOutcome(t, "accepted", false)
	if got := receiptVendorKey(t, c, key); got == vk {
		t.Fatal("without deployment_id the rebuilt Redis kept the vendor key: the check above proves nothing")
	}
}

// TestConfigDeploymentID: deployment_id must be 32 to 64 lowercase hex
// digits and random; a refusal names the field and never the value.
func TestConfigDeploymentID(t *testing.T) {
	env := func(string) (string, bool) { return e2eSecret, true }
	load := func(dep string) (*config, error) {
		conf := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", "http://127.0.0.1:9")
		conf = strings.Replace(conf, `"environment"`, `"deployment_id": "`+dep+`", "environment"`, 1)
		return loadConfig([]byte(conf), env, &retry.Executor{})
	}
	good := randomDeployment(t)
	if c, err := load(good); err != nil || c.Store.DeploymentID != good {
		t.Fatalf("a random id: %v", err)
	}
	if c, err := load(good + good); err != nil || c.Store.DeploymentID != good+good {
		t.Fatalf("a 64-digit id: %v", err)
	}
	for _, bad := range []string{"abc", strings.ToUpper(good), strings.Repeat("a", 32), strings.Repeat("1234abcd", 4),
		strings.Repeat("0123456789abcdef", 4), good + good + "0", good[:31] + "z"} {
		_, err := load(bad)
		if err == nil || !strings.Contains(err.Error(), "deployment_id: ") || strings.Contains(err.Error(), bad) {
			t.Errorf("deployment_id %q: %v, want a refusal of the field that never quotes it", bad, err)
		}
	}
}

// unsupportedConfig is dataLossConfig (deployment_id dep) with the
// unsupported tool chat.post allowed in production and a lease long enough
// that no reading of the sentinels happens during the test.
func unsupportedConfig(t *testing.T, vendorURL, dep string) string {
	t.Helper()
	path := dataLossConfig(t, vendorURL, dep)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(raw), `"lease": "2s"`, `"lease": "30s"`, 1)
	conf = strings.Replace(conf, `"environment": "production",`, `"environment": "production", "allow_unsupported_writes": true,`, 1)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// completedChats makes n calls of the unsupported tool chat.post that the
// vendor accepts and returns their keys.
func completedChats(t *testing.T, p *proc, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = idempotency.NewKey().String()
		call(t, p.session(t, e2eKeyOne, keys[i]), "chat.post", map[string]any{"text": "hello"}, "").wantOutcome(t, "accepted", false)
	}
	return keys
}

// retriedChatsRefused retries every key at once: each is refused
// store_data_lost and the vendor still has seen sent requests.
func retriedChatsRefused(t *testing.T, p *proc, vendor *testVendor, keys []string, sent int) {
	t.Helper()
	for i, k := range keys {
		call(t, p.session(t, e2eKeyOne, k), "chat.post", map[string]any{"text": "hello"}, "").wantRefusal(t, "store_data_lost", 503)
		if n := vendor.count("/chat", ""); n != sent {
			t.Fatalf("retry %d: the vendor saw %d requests, want still %d: a completed call was dispatched again", i, n, sent)
		}
	}
}

// TestStoreRolledBack: Redis reloads a snapshot older than calls the
// gateway made (SAVE, N calls of an unsupported tool, DEBUG RELOAD of the
// saved RDB). Retried, none of the N is dispatched again: each is refused
// store_data_lost, and /healthz says store_data_lost. Before generation
// sentinels the reloaded Redis went unnoticed and all N were sent again.
func TestStoreRolledBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t, "--enable-debug-command", "yes")
	vendor := newTestVendor(t)
	p := startRefserver(t, "-config", unsupportedConfig(t, vendor.URL, randomDeployment(t)), "-redis", "redis://"+redis.Addr())
	completedChats(t, p, 1)
	if _, err := redis.Do("SAVE"); err != nil {
		t.Fatal(err)
	}
	const n = 10
	keys := completedChats(t, p, n)
	if _, err := redis.Do("DEBUG", "RELOAD", "NOSAVE"); err != nil {
		t.Fatal(err)
	}
	retriedChatsRefused(t, p, vendor, keys, n+1)
	waitHealth(t, p, 503, "store_data_lost", 5*time.Second)
}

// TestStoreEmptyRestartRefusedAtOnce: Redis restarts empty under a running
// production gateway; completed calls of an unsupported tool retried at
// once are refused store_data_lost, not sent (before generation sentinels
// they were sent again until the next reading of the sentinels, up to a
// lease later).
func TestStoreEmptyRestartRefusedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t) // persists nothing
	vendor := newTestVendor(t)
	p := startRefserver(t, "-config", unsupportedConfig(t, vendor.URL, randomDeployment(t)), "-redis", "redis://"+redis.Addr())
	const n = 10
	keys := completedChats(t, p, n)
	redis.Restart()
	retriedChatsRefused(t, p, vendor, keys, n)
	waitHealth(t, p, 503, "store_data_lost", 5*time.Second)
}

// TestStoreInit: a production gateway refuses an uninitialised Redis (it
// cannot tell it from one that lost the fleet's data) and names the
// command; refserver store init with the server's -config and -redis
// initialises it (exit 0), a second run writes nothing (exit 0), and the
// gateway starts.
func TestStoreInit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	cfg := unsupportedConfig(t, vendor.URL, randomDeployment(t))
	bin := refservertest.Build(t)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "E2E_VENDOR_SECRET="+e2eSecret)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("-addr", "127.0.0.1:0", "-config", cfg, "-redis", "redis://"+redis.Addr())
	if err == nil || !strings.Contains(out, "not initialised") || !strings.Contains(out, "refserver store init") {
		t.Fatalf("a production gateway on an empty Redis: %v\n%s", err, out)
	}
	if n, err := redis.Do("DBSIZE"); err != nil || n != int64(0) {
		t.Fatalf("the refused start wrote %v keys (%v)", n, err)
	}
	if out, err := run("store", "init", "-config", cfg, "-redis", "redis://"+redis.Addr()); err != nil || !strings.HasPrefix(out, "store initialised") {
		t.Fatalf("store init: %v\n%s", err, out)
	}
	if out, err := run("store", "init", "-config", cfg, "-redis", "redis://"+redis.Addr()); err != nil || !strings.Contains(out, "initialised already") {
		t.Fatalf("store init again: %v\n%s", err, out)
	}
	p := refservertest.Start(t, refservertest.Options{Args: []string{"-config", cfg, "-redis", "redis://" + redis.Addr()},
		Env: []string{"E2E_VENDOR_SECRET=" + e2eSecret}})
	completedChats(t, &proc{base: p.Base, Server: p}, 1)
}

// TestDeploymentSurvivesLoss: a gateway started during a loss nobody
// acknowledged writes no deployment id; whatever id Redis holds then, the
// acknowledgement writes back the acknowledging gateway's configured one,
// so vendors keep deduplicating the fleet's retries.
func TestDeploymentSurvivesLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t) // persists nothing
	vendor := newTestVendor(t)
	dep := randomDeployment(t)
	cfg := unsupportedConfig(t, vendor.URL, dep)
	bin := refservertest.Build(t)
	p := startRefserver(t, "-config", cfg, "-redis", "redis://"+redis.Addr())
	completedChats(t, p, 1)
	redis.Restart()
	waitHealth(t, p, 503, "store_data_lost", 15*time.Second)
	later := startRefserver(t, "-config", cfg, "-redis", "redis://"+redis.Addr())
	waitHealth(t, later, 503, "store_data_lost", 5*time.Second)
	if n, err := redis.Do("EXISTS", "e2e:meta:deployment"); err != nil || n != int64(0) {
		t.Fatalf("a gateway started during the loss wrote the deployment id (%v, %v)", n, err)
	}
	other := randomDeployment(t)
	if _, err := redis.Do("SET", "e2e:meta:deployment", other); err != nil { // as a gateway of before would
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(t, bin, e2eKeyAdmin, "store", "acknowledge-data-loss", "-url", p.base); code != 0 {
		t.Fatalf("acknowledge: exit %d\n%s%s", code, stdout, stderr)
	}
	if v, err := redis.Do("GET", "e2e:meta:deployment"); err != nil || v != dep {
		t.Fatalf("deployment id after the acknowledgement %v (%v), want the configured one", v, err)
	}
	waitHealth(t, p, 200, "", 5*time.Second)
}
