package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/mcpgateway/otelhooks"
	"github.com/obol-gateway/obol/retry"
)

// The file format and its checks are gatewayconfig's, tested there; these
// are the names this package's tests use for them.
type (
	fileConfig     = gatewayconfig.File
	configError    = gatewayconfig.Error
	approverConfig = gatewayconfig.Approver
)

// envOTLPEndpoint turns tracing on (otelhooks.FromEnv).
const envOTLPEndpoint = otelhooks.EnvEndpoint

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

// loadConfigFile loads the file at path with the process environment.
func loadConfigFile(path string, exec *retry.Executor) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return loadConfig(data, os.LookupEnv, exec)
}

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
	if err := c.Tools["chat.post_message"].Spec.Check(effectspec.Production); !errors.Is(err, effectspec.ErrPolicyDenied) {
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
