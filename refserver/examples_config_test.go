package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/retry"
)

// exampleConfigPath is the production-shaped configuration the README
// points to for -config.
const exampleConfigPath = "../examples/obol.json"

// exampleStandIn is the stand-in vendor address every connection of the
// example points at.
const exampleStandIn = "http://127.0.0.1:9000"

// fleetUniqueStems are member names that would hold a value unique to one
// gateway of a fleet (a copy of the file would share it).
var fleetUniqueStems = []string{"deployment", "instance", "node_id", "hostname", "host_id", "gateway_id", "replica_id", "machine"}

// readExampleConfig reads the example and decodes the members the tests
// read (the loader, run on it by TestExampleConfigShape, refuses anything else).
func readExampleConfig(t *testing.T) ([]byte, fileConfig) {
	t.Helper()
	data, err := os.ReadFile(exampleConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := json.Unmarshal(data, &fc); err != nil {
		t.Fatalf("%s: %v", exampleConfigPath, err)
	}
	return data, fc
}

// setExampleSecrets sets every variable the example's secret_env names to
// value, for this test.
func setExampleSecrets(t *testing.T, fc fileConfig, value string) {
	t.Helper()
	for _, c := range fc.Connections {
		if c.SecretEnv != "" {
			t.Setenv(c.SecretEnv, value)
		}
	}
	for _, b := range fc.Brokers {
		if b.SecretEnv != "" {
			t.Setenv(b.SecretEnv, value)
		}
	}
}

// memberNames returns every member name of a JSON document, at any depth.
func memberNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				names = append(names, k)
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	walk(v)
	return names
}

// placeholder marks the example's keys; production refuses them.
const placeholder = "REPLACE_ME"

// replacePlaceholders is the example with its keys replaced, as the README
// asks before a start.
func replacePlaceholders(data []byte) []byte {
	return bytes.ReplaceAll(data, []byte(placeholder), []byte("k3y_of_our_own"))
}

func TestExampleConfigShape(t *testing.T) {
	data, fc := readExampleConfig(t)
	setExampleSecrets(t, fc, e2eSecret)
	// As shipped, production refuses every placeholder key, each by its
	// field, and nothing else.
	_, err := loadConfig(data, os.LookupEnv, &retry.Executor{})
	if err == nil {
		t.Fatalf("production loads %s with its placeholder keys", exampleConfigPath)
	}
	if got, want := strings.Count(err.Error(), "the template's REPLACE_ME placeholder"), bytes.Count(data, []byte(placeholder)); got != want || strings.Count(err.Error(), "\n") != want-1 {
		t.Errorf("%d placeholder problems, want %d and nothing else: %v", got, want, err)
	}
	for _, field := range []string{"workspaces[0].api_keys[0]", "workspaces[1].api_keys[0]", "approver_keys[0].key"} {
		if !strings.Contains(err.Error(), field+": the template's REPLACE_ME placeholder") {
			t.Errorf("%s not named: %v", field, err)
		}
	}
	cfg, err := loadConfig(replacePlaceholders(data), os.LookupEnv, &retry.Executor{})
	if err != nil {
		t.Fatalf("the loader refuses %s with its keys replaced: %v", exampleConfigPath, err)
	}

	if cfg.Environment != effectspec.Production {
		t.Errorf("environment %q, want production", cfg.Environment)
	}
	if len(cfg.Workspaces) != 2 {
		t.Errorf("workspaces %v, want two", cfg.Workspaces)
	}
	var approval []string
	for _, name := range cfg.ToolOrder {
		tl := cfg.Tools[name]
		if tl == nil {
			continue
		}
		if tl.Spec.Approval == effectspec.ApprovalRequired {
			approval = append(approval, name)
		}
		// Production refuses writes the vendor cannot deduplicate: an
		// example that ships one would start with a tool that always fails.
		if err := cfg.Policy.Check(tl.Spec); err != nil {
			t.Errorf("tool %s is policy_denied in production: %v", name, err)
		}
	}
	if len(approval) == 0 {
		t.Error("no tool with approval required")
	}
	if len(cfg.Capabilities) == 0 {
		t.Error("no capability")
	}
	if len(cfg.Approvers) == 0 {
		t.Error("no approver")
	}

	// Every credential comes from the environment, never from the file.
	if len(fc.Connections) == 0 {
		t.Fatal("no connection")
	}
	for i, c := range fc.Connections {
		if c.SecretEnv == "" {
			t.Errorf("connections[%d] (%s): no secret_env", i, c.ID)
		}
		if !strings.HasPrefix(c.BaseURL, exampleStandIn+"/") {
			t.Errorf("connections[%d] (%s): base_url is not on the stand-in vendor %s", i, c.ID, exampleStandIn)
		}
	}
	if bytes.Contains(data, []byte(e2eSecret)) {
		t.Error("the file holds the secret value")
	}

	// The keys the format requires in the file are visibly placeholders.
	for i, ws := range fc.Workspaces {
		for j, k := range ws.APIKeys {
			if !strings.Contains(k, "REPLACE_ME") {
				t.Errorf("workspaces[%d].api_keys[%d] is not a placeholder", i, j)
			}
		}
	}
	for i, raw := range fc.ApproverKeys {
		var ac approverConfig
		if err := json.Unmarshal(raw, &ac); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ac.Key, "REPLACE_ME") {
			t.Errorf("approver_keys[%d].key is not a placeholder", i)
		}
	}

	// Nothing a copy of the file would share across a fleet.
	for _, name := range memberNames(t, data) {
		low := strings.ToLower(name)
		for _, stem := range fleetUniqueStems {
			if strings.Contains(low, stem) {
				t.Errorf("member %q looks fleet-unique (%s): every gateway of a fleet loads the same file", name, stem)
			}
		}
	}
}

// TestExampleConfigServes runs the built server on the example, against a
// real Redis and a stand-in vendor, and makes one call.
func TestExampleConfigServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	data, fc := readExampleConfig(t)
	setExampleSecrets(t, fc, e2eSecret) // startRefserver passes the environment on
	redis := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	vendor := newTestVendor(t)

	// The same file with the stand-in vendor's address replaced by the
	// test vendor's, and nothing else changed.
	n := bytes.Count(data, []byte(`"`+exampleStandIn+"/"))
	if n != len(fc.Connections) {
		t.Fatalf("%d base_url values on %s, want one per connection (%d)", n, exampleStandIn, len(fc.Connections))
	}
	cfgPath := filepath.Join(t.TempDir(), "obol.json")
	local := bytes.ReplaceAll(data, []byte(`"`+exampleStandIn+"/"), []byte(`"`+vendor.URL+"/"))
	if err := os.WriteFile(cfgPath, local, 0o600); err != nil {
		t.Fatal(err)
	}
	// As shipped, its placeholder keys refuse the start, each by its field.
	cmd := exec.Command(refservertest.Build(t), "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	cmd.Env = append(os.Environ(), "OBOL_DEPLOYMENT_ID="+e2eDeployment)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with the template's keys:\n%s", out)
	}
	for _, field := range []string{"workspaces[0].api_keys[0]", "workspaces[1].api_keys[0]", "approver_keys[0].key"} {
		if !strings.Contains(string(out), field+": the template's REPLACE_ME placeholder") {
			t.Errorf("%s not named:\n%s", field, out)
		}
	}
	// With its keys replaced, it starts.
	if err := os.WriteFile(cfgPath, replacePlaceholders(local), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())

	apiKey := string(replacePlaceholders([]byte(fc.Workspaces[0].APIKeys[0])))
	key := idempotency.NewKey().String()
	s := p.session(t, apiKey, key)
	a := call(t, s, "payments.create_charge", map[string]any{"amount": 1200, "currency": "usd"}, "")
	a.wantOutcome(t, "accepted", false)
	if a.key != key || a.rc.Workspace != fc.Workspaces[0].ID || a.rc.AttemptCount != 1 {
		t.Errorf("receipt %+v key %s", a.rc, a.key)
	}
	if got := vendor.count("/pay/v1/charges", ""); got != 1 {
		t.Errorf("the vendor saw %d requests, want 1", got)
	}
	vendor.mu.Lock()
	badAuth := vendor.badAuth
	vendor.mu.Unlock()
	if badAuth != 0 {
		t.Errorf("%d vendor requests without the secret_env credential", badAuth)
	}
	if strings.Contains(p.WaitLog("msg=tools/call", 1), e2eSecret) {
		t.Error("the server logged the connection secret")
	}
}

// TestExampleConfigInReadme checks that the README points -config at the
// example and names the variables its secret_env entries name, so the two
// cannot drift apart.
func TestExampleConfigInReadme(t *testing.T) {
	_, fc := readExampleConfig(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-config examples/obol.json", "## MCP clients", "REPLACE_ME", exampleStandIn} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README does not mention %q", want)
		}
	}
	for _, c := range fc.Connections {
		if !bytes.Contains(readme, []byte("`"+c.SecretEnv+"`")) {
			t.Errorf("README does not name %s, the secret_env of %s", c.SecretEnv, c.ID)
		}
	}
}

// TestExampleRedisWithoutConfigKeepsDemo checks what the README says of
// -redis without -config: the demo configuration and vendor, on that Redis.
func TestExampleRedisWithoutConfigKeepsDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	p := startRefserver(t, "-redis", "redis://"+redis.Addr())

	s := p.session(t, demoKeyAcme, idempotency.NewKey().String())
	a := call(t, s, "payments.create_charge", map[string]any{"amount": 1200, "currency": "usd"}, "")
	a.wantOutcome(t, "accepted", false)
	if a.rc.Workspace != "ws_acme" {
		t.Errorf("receipt %+v", a.rc)
	}
	// The record is in this Redis, not in an embedded store.
	n, err := redis.Do("DBSIZE")
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := n.(int64); size == 0 {
		t.Errorf("DBSIZE %v after a call: the record is not in the Redis of -redis", n)
	}
}
