package main

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/retry"
)

// The file format and its checks are gatewayconfig's, tested there; these
// are the names this package's tests use for them.

// fileConfig holds the members of the configuration file that this
// package's tests read (gatewayconfig's loader checks the rest).
type fileConfig struct {
	Workspaces []struct {
		ID      string   `json:"id"`
		APIKeys []string `json:"api_keys"`
	} `json:"workspaces"`
	ApproverKeys []json.RawMessage `json:"approver_keys"`
	Connections  []struct {
		ID        string `json:"id"`
		BaseURL   string `json:"base_url"`
		SecretEnv string `json:"secret_env"`
	} `json:"connections"`
	Brokers []struct {
		SecretEnv string `json:"secret_env"`
	} `json:"brokers"`
}

// approverConfig is an approver_keys entry.
type approverConfig struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// envOTLPEndpoint turns tracing on (otelhooks.FromEnv).
const envOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

const testSecret = "sk_test_do_not_print_me_9f8e7d"

func testEnv(name string) (string, bool) {
	switch name {
	case "VENDOR_KEY", "NANGO_SECRET_KEY", "COMPOSIO_API_KEY":
		return testSecret + "_" + name, true
	case "EMPTY_KEY":
		return "", true
	}
	return "", false
}

// goodConfig is gatewayconfig's complete configuration: native tools, both
// brokers, a capability (testEnv holds its secrets).
var goodConfig = func() string {
	b, err := os.ReadFile("../mcpgateway/gatewayconfig/testdata/good.json")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestLoadConfigDemo(t *testing.T) {
	v, err := startDemoVendor()
	if err != nil {
		t.Fatal(err)
	}
	defer v.close(t.Context())
	c, err := v.config(&retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Environment != effectspec.Development {
		t.Errorf("demo environment %q, want development", c.Environment)
	}
	kinds := map[effectspec.BindingKind]bool{}
	approval := false
	for _, tl := range c.Tools {
		kinds[tl.Route.Binding] = true
		approval = approval || tl.Spec.Approval == effectspec.ApprovalRequired
	}
	if len(kinds) != 3 || !approval {
		t.Errorf("demo bindings %v, approval-gated %v: want all three bindings and an approval-gated tool", kinds, approval)
	}
	if c.Capabilities["cap.send_email"] == nil {
		t.Error("demo lacks cap.send_email")
	}
	// Every demo tool describes itself, and the arguments of the documented
	// curl commands (README-demo.txt) pass its schema.
	for name, tl := range c.Tools {
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("%s: description %q, schema %v", name, tl.Description, tl.InputSchema != nil)
		}
	}
	if cp := c.Capabilities["cap.send_email"]; cp == nil || cp.Description == "" || cp.InputSchema == nil {
		t.Errorf("cap.send_email: %+v", cp)
	}
	for _, tc := range []struct {
		tool, args string
		ok         bool
	}{
		{"payments.create_charge", `{"amount":1200,"currency":"usd"}`, true},
		{"payments.create_charge", `{"amount":700,"currency":"usd","simulate":"503_once"}`, true},
		{"payments.create_charge", `{"amount":0}`, true}, // the vendor's decline stays reachable
		{"payments.create_charge", `{"amount":"1200"}`, false},
		{"payments.create_charge", `{"amount":1200,"simulate":"500"}`, false},
		{"payments.refund", `{"charge":"ch_1","amount":500}`, true},
		{"payments.refund", `{"charge":"ch_1"}`, false},
		{"crm.create_contact", `{"email":"ada@example.com"}`, true},
		{"chat.post_message", `{"text":"hi"}`, true},
		{"email.b", `{"to":"ada@example.com","subject":"hi"}`, true},
		{"email.a", `{"to":"bob@example.com","subject":"hi","simulate":"hang_up"}`, true},
		{"sms.send", `{"to":"+15550100","text":"hi"}`, true},
		{"sms.send", `{"to":"+15550100"}`, false},
	} {
		if r := c.Tools[tc.tool].InputSchema.Check([]byte(tc.args)); (r == nil) != tc.ok {
			t.Errorf("%s %s: refusal %+v, want ok %v", tc.tool, tc.args, r, tc.ok)
		}
	}
	if r := c.Capabilities["cap.send_email"].InputSchema.Check([]byte(`{"to":"bob@example.com","subject":"hi","simulate":"hang_up"}`)); r != nil {
		t.Errorf("cap.send_email: %+v", r)
	}
	// The unsupported tool passes only because the demo is not production.
	if err := (effectspec.Policy{Environment: effectspec.Production}).Check(c.Tools["chat.post_message"].Spec); !errors.Is(err, effectspec.ErrPolicyDenied) {
		t.Errorf("chat.post_message in production: %v, want policy_denied", err)
	}
}

// TestDemoKeys: the keys the demo prints are the ones its configuration
// authenticates.
func TestDemoKeys(t *testing.T) {
	c, err := loadConfig([]byte(strings.ReplaceAll(demoConfigJSON, "{{VENDOR}}", "http://127.0.0.1:9")), func(string) (string, bool) { return testSecret, true }, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{demoKeyAcme: "ws_acme", demoKeyGlobex: "ws_globex"} {
		if ws, ok := c.Workspace(key); !ok || ws != want {
			t.Errorf("workspace(%s) = %q, %v; want %s", key, ws, ok, want)
		}
	}
	if name, ok := c.Approver(demoKeyAdmin); !ok || name != "demo-approver" {
		t.Errorf("approver(%s) = %q, %v", demoKeyAdmin, name, ok)
	}
}

// TestDeploymentIDRequiredInProduction: production on a Redis needs the
// fleet's deployment id, from deployment_id or OBOL_DEPLOYMENT_ID (the
// same when both are set); the error says how to make one and tells no
// one to write Redis keys by hand. Other environments and the embedded
// store do without.
func TestDeploymentIDRequiredInProduction(t *testing.T) {
	const dep = "5d0c8e2a9b7f41c3a6e18f02d4b97c35"
	const other = "8b2e4f6a1c3d5e7f9a0b2c4d6e8f1a3b"
	load := func(env, fileID string) *config {
		t.Helper()
		conf := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", "http://127.0.0.1:9")
		conf = strings.Replace(conf, `"environment": "production"`, `"environment": "`+env+`"`, 1)
		if fileID != "" {
			conf = strings.Replace(conf, `"environment"`, `"deployment_id": "`+fileID+`", "environment"`, 1)
		}
		c, err := loadConfig([]byte(conf), func(string) (string, bool) { return e2eSecret, true }, &retry.Executor{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	envOf := func(v string) func(string) string {
		return func(name string) string {
			if name == envDeploymentID {
				return v
			}
			return ""
		}
	}
	err := load("production", "").resolveDeployment(envOf(""), false)
	if err == nil || !strings.Contains(err.Error(), "deployment_id") || !strings.Contains(err.Error(), envDeploymentID) ||
		!strings.Contains(err.Error(), "openssl rand -hex 16") || strings.Contains(err.Error(), "SET ") {
		t.Fatalf("production without an id: %v", err)
	}
	for _, c := range []struct {
		env, file, fromEnv string
		embedded           bool
		want               string
	}{
		{"production", "", dep, false, dep},
		{"production", dep, "", false, dep},
		{"production", dep, dep, false, dep},
		{"production", "", "", true, ""},
		{"staging", "", "", false, ""},
	} {
		cfg := load(c.env, c.file)
		if err := cfg.resolveDeployment(envOf(c.fromEnv), c.embedded); err != nil || cfg.Store.DeploymentID != c.want {
			t.Errorf("%+v: %v, id %q", c, err, cfg.Store.DeploymentID)
		}
	}
	if err := load("production", dep).resolveDeployment(envOf(other), false); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("two different ids: %v", err)
	}
	if err := load("production", "").resolveDeployment(envOf("not-hex"), false); err == nil || strings.Contains(err.Error(), "not-hex") {
		t.Errorf("a malformed OBOL_DEPLOYMENT_ID: %v, want a refusal that does not quote it", err)
	}
}
