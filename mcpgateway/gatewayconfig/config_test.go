package gatewayconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/retry"
)

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

// goodConfig is a complete configuration (testdata/good.json): native
// tools, both brokers, a capability.
var goodConfig = func() string {
	b, err := os.ReadFile("testdata/good.json")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// loadConfig is Load with getenv and exec.
func loadConfig(data []byte, getenv func(string) (string, bool), exec *retry.Executor) (*Config, error) {
	return Load(data, Options{Getenv: getenv, Executor: exec})
}

func TestLoadConfigGood(t *testing.T) {
	c, err := loadConfig([]byte(goodConfig), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Prefix != "gw1:" || c.Store.Retention != time.Hour || c.Store.Lease != 10*time.Second || c.Environment != effectspec.Production {
		t.Errorf("prefix %q retention %v lease %v env %q", c.Store.Prefix, c.Store.Retention, c.Store.Lease, c.Environment)
	}
	for k, want := range map[string]string{"ob_live_acme_1": "ws_acme", "ob_live_acme_2": "ws_acme", "ob_live_globex": "ws_globex"} {
		if ws, ok := c.Workspace(k); !ok || ws != want {
			t.Errorf("workspace(%s) = %q, %v; want %s", k, ws, ok, want)
		}
	}
	if _, ok := c.Workspace("ob_admin_key_1"); ok {
		t.Error("an approver key authenticates a workspace")
	}
	if name, ok := c.Approver("ob_admin_key_1"); !ok || name != "ops-admin" {
		t.Errorf("approver(ob_admin_key_1) = %q, %v; want ops-admin", name, ok)
	}
	if _, ok := c.Approver("ob_live_acme_1"); ok {
		t.Error("approver keys mixed up with workspace keys")
	}
	wantOrder := []string{"stripe.create_charge", "open.send", "open.send2", "github.create_issue", "gmail.send", "cap.send"}
	if strings.Join(c.ToolOrder, ",") != strings.Join(wantOrder, ",") {
		t.Errorf("tool order %v, want %v", c.ToolOrder, wantOrder)
	}

	st := c.Tools["stripe.create_charge"]
	wantRoute := idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
		Method: "POST", Host: "127.0.0.1:9000", Path: "/api/v1/charges", Binding: effectspec.BindingHeader,
		Scheme: "http", BindingName: "idempotency-key", Credential: "VENDOR_KEY"}
	if st.Route != wantRoute || st.Connection != "conn_stripe" {
		t.Errorf("route %+v connection %q, want %+v", st.Route, st.Connection, wantRoute)
	}
	ht, ok := st.Target.(*retry.HTTPTarget)
	if !ok {
		t.Fatalf("target %T, want *retry.HTTPTarget", st.Target)
	}
	if ht.URL != "http://127.0.0.1:9000/api/v1/charges" || ht.Method != http.MethodPost ||
		ht.Header.Get("Authorization") != "Bearer "+testSecret+"_VENDOR_KEY" {
		t.Errorf("target %s %s auth-set=%v", ht.Method, ht.URL, ht.Header.Get("Authorization") != "")
	}
	if ot := c.Tools["open.send"].Target.(*retry.HTTPTarget); ot.Header != nil || ot.Method != http.MethodPost {
		t.Errorf("connection without secret_env: header %v method %q", ot.Header, ot.Method)
	}

	gh := c.Tools["github.create_issue"]
	if gh.Connection != "nango" || gh.Route.Broker != "nango" || gh.Route.Connection != "user-42" ||
		gh.Route.Binding != effectspec.BindingUnsupported {
		t.Errorf("nango tool: connection %q route %+v", gh.Connection, gh.Route)
	}
	if gm := c.Tools["gmail.send"]; gm.Connection != "composio" || gm.Description != "send mail" {
		t.Errorf("composio tool: connection %q description %q", gm.Connection, gm.Description)
	}
	cp := c.Capabilities["cap.send"]
	if cp == nil || cp.Pin != "open.send2" || len(cp.Providers) != 2 {
		t.Errorf("capability %+v", cp)
	}
	// Three secrets, then the four keys: all redacted.
	want := []string{testSecret + "_VENDOR_KEY", testSecret + "_NANGO_SECRET_KEY", testSecret + "_COMPOSIO_API_KEY",
		"ob_live_acme_1", "ob_live_acme_2", "ob_live_globex", "ob_admin_key_1"}
	if !slices.Equal(c.Secrets, want) {
		t.Errorf("secrets kept for redaction %d, want %d", len(c.Secrets), len(want))
	}
	if !slices.Equal(c.Approvers, []string{"ops-admin"}) || !slices.Equal(c.Workspaces, []string{"ws_acme", "ws_globex"}) {
		t.Errorf("approvers %v workspaces %v", c.Approvers, c.Workspaces)
	}
}

// edit replaces old with new in goodConfig exactly once.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(goodConfig, old) != 1 {
		t.Fatalf("edit: %q occurs %d times", old, strings.Count(goodConfig, old))
	}
	return strings.Replace(goodConfig, old, new, 1)
}

// schemaEdit gives the first tool of goodConfig the input schema js.
func schemaEdit(t *testing.T, js string) string {
	return edit(t, `"path": "/v1/charges",`, `"path": "/v1/charges", "input_schema": `+js+`,`)
}

// fanOutSchema is a schema whose $refs double the paths at each of n
// levels: 2^n paths through a schema of 2n+1 nodes.
func fanOutSchema(n int) string {
	defs := make([]string, 0, n+1)
	for i := range n {
		next := `"#/$defs/a` + strconv.Itoa(i+1) + `"`
		defs = append(defs, `"a`+strconv.Itoa(i)+`": {"allOf": [{"$ref": `+next+`}, {"$ref": `+next+`}]}`)
	}
	defs = append(defs, `"a`+strconv.Itoa(n)+`": {"type": "integer"}`)
	return `{"type": "object", "$defs": {` + strings.Join(defs, ", ") + `}, "properties": {"a": {"$ref": "#/$defs/a0"}}}`
}

// TestLoadConfigSchemas: descriptions and input schemas of native and
// federated tools and of capabilities load, compacted, with the drafts the
// validator implements.
func TestLoadConfigSchemas(t *testing.T) {
	cfg := schemaEdit(t, `{"type": "object", "properties": {"amount": {"type": "integer", "minimum": 1}}, "required": ["amount"]}`)
	cfg = strings.Replace(cfg, `"description": "send mail"`, `"description": "send mail", "input_schema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`, 1)
	cfg = strings.Replace(cfg, `"pin": "open.send2"`, `"pin": "open.send2", "description": "send it", "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "$defs": {"to": {"type": "string"}}, "properties": {"to": {"$ref": "#/$defs/to"}}}`, 1)
	c, err := loadConfig([]byte(cfg), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Tools["stripe.create_charge"].InputSchema.Raw()); got != `{"type":"object","properties":{"amount":{"type":"integer","minimum":1}},"required":["amount"]}` {
		t.Errorf("schema %s", got)
	}
	if c.Tools["gmail.send"].InputSchema == nil || c.Tools["gmail.send"].Description != "send mail" {
		t.Errorf("federated tool %+v", c.Tools["gmail.send"])
	}
	if c.Tools["open.send"].InputSchema != nil {
		t.Error("a tool without input_schema has a schema")
	}
	if cp := c.Capabilities["cap.send"]; cp.InputSchema == nil || cp.Description != "send it" {
		t.Errorf("capability %+v", cp)
	}
	for _, tc := range []struct {
		tool, args string
		ok         bool
	}{
		{"stripe.create_charge", `{"amount": 5}`, true},
		{"stripe.create_charge", `{"amount": 5.0}`, true},
		{"stripe.create_charge", `{"amount": 0}`, false},
		{"stripe.create_charge", `{"amount": 1.5}`, false},
		{"stripe.create_charge", `{"amount": "5"}`, false},
		{"stripe.create_charge", `{}`, false},
		{"stripe.create_charge", ``, false},
		{"stripe.create_charge", `null`, false},
		{"open.send", ``, true},
	} {
		r := c.Tools[tc.tool].InputSchema.Check([]byte(tc.args))
		if (r == nil) != tc.ok {
			t.Errorf("%s %s: refusal %+v, want ok %v", tc.tool, tc.args, r, tc.ok)
		}
		if r != nil && (r.Reason != "invalid_arguments" || r.Status != http.StatusBadRequest) {
			t.Errorf("%s %s: refusal %+v", tc.tool, tc.args, r)
		}
	}
	if r := c.Capabilities["cap.send"].InputSchema.Check([]byte(`{"to": 4242}`)); r == nil || strings.Contains(r.Message, "4242") {
		t.Errorf("capability refusal %+v", r)
	}

	// $refs that form no cycle load, escaped pointers and a fan-out
	// within the bound included.
	for _, js := range []string{
		fanOutSchema(10),
		`{"type": "object", "$defs": {"a/b": {"type": "string"}, "c~d": {"$ref": "#/$defs/a~1b"}}, "properties": {"x": {"$ref": "#/$defs/c~0d"}, "y": {"$ref": "#/properties/x"}}}`,
		`{"type": "object", "properties": {"l": {"type": "array", "items": {"$ref": "#/$defs/i"}}}, "$defs": {"i": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}`,
	} {
		if _, why := parseInputSchema(json.RawMessage(js)); why != "" {
			t.Errorf("%s: %s", js, why)
		}
	}
}

func TestLoadConfigBad(t *testing.T) {
	cases := []struct {
		name, config string
		want         []string // substrings of the error
	}{
		{"unknown top-level field", edit(t, `"lease": "10s"`, `"lease": "10s", "leese": "1s"`), []string{`leese: unknown field`}},
		{"duplicate member", edit(t, `"lease": "10s"`, `"lease": "10s", "lease": "20s"`), []string{"lease: repeated member"}},
		{"escaped duplicate", edit(t, `"lease": "10s"`, `"lease": "10s", "l\u0065ase": "20s"`), []string{"lease: repeated member"}},
		{"case-variant member", edit(t, `"approver_keys": [`, `"WORKSPACES": [], "approver_keys": [`), []string{"WORKSPACES: repeated member"}},
		{"case-variant member first", edit(t, `"workspaces": [`, `"WORKSPACES": [], "workspaces": [`), []string{"WORKSPACES: unknown field"}},
		{"case-only field name", edit(t, `"lease": "10s"`, `"Lease": "10s"`), []string{"Lease: unknown field"}},
		{"nested case variant", edit(t, `"id": "ws_acme"`, `"id": "ws_acme", "ID": "ws_other"`), []string{"workspaces[0].ID: repeated member"}},
		{"nested unknown field", edit(t, `"id": "ws_acme"`, `"id": "ws_acme", "owner": "x"`), []string{"workspaces[0].owner: unknown field"}},
		{"duplicate inside a tool", edit(t, `"method": "POST"`, `"method": "POST", "method": "GET"`), []string{"tools[0].method: repeated member"}},
		{"case variant inside a spec", edit(t, `"effect": "write", "route": "native"`, `"effect": "write", "Effect": "read", "route": "native"`),
			[]string{"tools[0].spec.Effect: repeated member"}},
		{"wrong type", edit(t, `"lease": "10s"`, `"lease": 4242424242424242`), []string{"lease: wrong type"}},
		{"secret-looking member name", edit(t, `"lease": "10s"`, `"lease": "10s", "sk live 4242424242424242": 1`), []string{"{member "}},
		{"trailing data", goodConfig + ` {}`, []string{"not valid JSON"}},
		{"not JSON", `{"workspaces": [`, []string{"not valid JSON"}},
		{"bad duration", edit(t, `"lease": "10s"`, `"lease": "ten"`), []string{"lease:"}},
		{"lease not shorter than retention", edit(t, `"retention": "1h"`, `"retention": "10s"`), []string{"retention: must be at least 2 leases"}},
		{"negative wait_replicas", edit(t, `"lease": "10s"`, `"lease": "10s", "wait_replicas": -1`), []string{"wait_replicas: must not be negative"}},
		{"negative max_attempts", edit(t, `"lease": "10s"`, `"lease": "10s", "max_attempts": -1`), []string{"max_attempts: must be 0 (the default, 10) to 1000"}},
		{"max_attempts too many", edit(t, `"lease": "10s"`, `"lease": "10s", "max_attempts": 1001`), []string{"max_attempts: must be 0 (the default, 10) to 1000"}},
		{"retention under two leases", edit(t, `"retention": "1h"`, `"retention": "19s"`), []string{"retention: must be at least 2 leases"}},
		{"bad environment", edit(t, `"environment": "production"`, `"environment": "prod"`), []string{"environment:", "unknown environment"}},
		{"bad prefix", edit(t, `"key_prefix": "gw1:"`, `"key_prefix": "{gw}"`), []string{"key_prefix:"}},
		{"bad workspace id", edit(t, `"id": "ws_acme"`, `"id": "ws:acme"`), []string{"workspaces[0].id"}},
		{"duplicate workspace", edit(t, `"id": "ws_globex"`, `"id": "ws_acme"`), []string{"workspaces[1].id: duplicate"}},
		{"short api key", edit(t, `"ob_live_globex"`, `"short"`), []string{"workspaces[1].api_keys[0]: must be 8 to 256 bytes"}},
		{"placeholder api key", edit(t, `"ob_live_globex"`, `"ob_live_REPLACE_ME_globex"`),
			[]string{"workspaces[1].api_keys[0]: the template's REPLACE_ME placeholder"}},
		{"placeholder approver key", edit(t, `"key": "ob_admin_key_1"`, `"key": "ob_admin_REPLACE_ME_1"`),
			[]string{"approver_keys[0].key: the template's REPLACE_ME placeholder"}},
		{"key shared with approver", edit(t, `"key": "ob_admin_key_1"`, `"key": "ob_live_globex"`),
			[]string{"approver_keys[0].key: the same key as workspaces[1].api_keys[0]"}},
		{"bare approver key", edit(t, `"approver_keys": [{"name": "ops-admin", "key": "ob_admin_key_1"}]`, `"approver_keys": ["ob_admin_4242"]`),
			[]string{`approver_keys[0]: must be an object {"name": "ops-alice", "key": "..."} (a bare key is no longer accepted`}},
		{"approver without a name", edit(t, `{"name": "ops-admin", "key": "ob_admin_key_1"}`, `{"key": "ob_admin_key_1"}`),
			[]string{"approver_keys[0].name: must be 1 to 128 of [A-Za-z0-9_.-]"}},
		{"approver name not an id", edit(t, `"name": "ops-admin"`, `"name": "ops admin"`), []string{"approver_keys[0].name: must be 1 to 128 of"}},
		{"approver unknown field", edit(t, `"name": "ops-admin"`, `"name": "ops-admin", "role": "x"`), []string{"approver_keys[0]:", "role: unknown field", `want {"name"`}},
		{"approver short key", edit(t, `"key": "ob_admin_key_1"`, `"key": "short"`), []string{"approver_keys[0].key: must be 8 to 256 bytes"}},
		{"short metrics_token", edit(t, `"lease": "10s"`, `"lease": "10s", "metrics_token": "short"`), []string{"metrics_token: must be 8 to 256 bytes"}},
		{"metrics_token shared with an API key", edit(t, `"lease": "10s"`, `"lease": "10s", "metrics_token": "ob_live_globex"`),
			[]string{"metrics_token: the same key as workspaces[1].api_keys[0]"}},
		{"metrics_token shared with an approver", edit(t, `"lease": "10s"`, `"lease": "10s", "metrics_token": "ob_admin_key_1"`),
			[]string{"metrics_token: the same key as approver_keys[0].key"}},
		{"duplicate approver name", edit(t, `{"name": "ops-admin", "key": "ob_admin_key_1"}`,
			`{"name": "ops-admin", "key": "ob_admin_key_1"}, {"name": "ops-admin", "key": "ob_admin_key_2"}`),
			[]string{"approver_keys[1].name: duplicate approver ops-admin"}},
		{"unknown_retention within a tool's timeout and the lease", strings.Replace(edit(t, `"retention": "1h"`, `"retention": "1m", "unknown_retention": "5m"`),
			`"spec": {"tool": "open.send", `, `"spec": {"tool": "open.send", "timeout": "5m", `, 1),
			[]string{"tools[1] (open.send).spec.timeout: the timeout 5m0s plus the lease 10s must be less than unknown_retention (5m0s)"}},
		{"unset secret_env", edit(t, `"secret_env": "VENDOR_KEY"`, `"secret_env": "MISSING_KEY"`),
			[]string{"connections[0].secret_env: environment variable MISSING_KEY is not set"}},
		{"empty secret_env value", edit(t, `"secret_env": "VENDOR_KEY"`, `"secret_env": "EMPTY_KEY"`),
			[]string{"environment variable EMPTY_KEY is not set"}},
		{"bad env name", edit(t, `"secret_env": "VENDOR_KEY"`, `"secret_env": "VENDOR-KEY"`), []string{"is not an environment variable name"}},
		{"reserved connection id", edit(t, `"id": "conn_open"`, `"id": "unresolved"`), []string{"connections[1].id", "reserved"}},
		{"base_url with credentials", edit(t, `"https://open.example"`, `"https://u:p@open.example"`), []string{"connections[1].base_url: must not hold credentials"}},
		{"base_url scheme", edit(t, `"https://open.example"`, `"ftp://open.example"`), []string{"connections[1].base_url: must be http or https"}},
		{"broker kind", edit(t, `"kind": "composio"`, `"kind": "zapier"`), []string{"brokers[1].kind"}},
		{"broker without secret", edit(t, `"secret_env": "NANGO_SECRET_KEY"`, `"secret_env": ""`), []string{"brokers[0].secret_env: required"}},
		{"bad spec", edit(t, `"binding": "header", "header": "Idempotency-Key"`, `"binding": "header", "header": "Content-Length"`),
			[]string{"tools[0].spec:", "idempotency.header"}},
		{"spec unknown field", edit(t, `"effect": "write", "route": "native"`, `"effect": "write", "route": "native", "retries": 3`),
			[]string{"tools[0].spec:", "retries"}},
		{"unknown connection", edit(t, `"connection": "conn_stripe"`, `"connection": "conn_nope"`), []string{"tools[0] (stripe.create_charge).connection: no connection named conn_nope"}},
		{"native unknown field", edit(t, `"path": "/v1/charges"`, `"path": "/v1/charges", "timeout": "1s"`), []string{"unknown field timeout"}},
		{"bad method", edit(t, `"method": "POST"`, `"method": "post"`), []string{".method"}},
		{"path with query", edit(t, `"/v1/charges"`, `"/v1/charges?x=1"`), []string{".path"}},
		{"federated without broker", edit(t, `"broker": "nango", "connection_id": "user-42", "provider_config_key": "github", "path": "/repos/o/r/issues",`,
			`"connection": "conn_open", "path": "/x",`), []string{`tools[3] (github.create_issue).broker: required for a "federated" tool`}},
		{"federated vendor binding", edit(t, `"route": "native",
              "idempotency": {"binding": "header"`, `"route": "federated",
              "idempotency": {"binding": "header"`), []string{"tools[0].spec:", "binding must be unsupported"}},
		{"broker tool not federated", edit(t, `"effect": "write", "route": "federated", "status": {"accepted": [201]}`,
			`"effect": "write", "route": "native", "status": {"accepted": [201]}`), []string{`a tool with "broker" must be "federated"`}},
		{"unknown broker", edit(t, `"broker": "nango"`, `"broker": "nangoo"`), []string{"no broker named nangoo"}},
		{"bad routing", edit(t, `"provider_config_key": "github", `, ``), []string{"provider_config_key"}},
		{"routing not a string", edit(t, `"user_id": "u1"`, `"user_id": 7`), []string{"routing field must be a string"}},
		{"duplicate tool", edit(t, `"tool": "open.send2"`, `"tool": "open.send"`), []string{"duplicate tool open.send"}},
		{"cap prefix on a tool", edit(t, `"tool": "gmail.send"`, `"tool": "cap.gmail"`), []string{"cap. prefix is reserved"}},
		{"capability name", edit(t, `"name": "cap.send"`, `"name": "send"`), []string{"capabilities[0].name"}},
		{"capability provider", edit(t, `"providers": ["open.send", "open.send2"]`, `"providers": ["open.send", "nope"]`),
			[]string{"capabilities[0].providers[1]: no tool named nope", "capabilities[0].pin"}},
		{"capability pin", edit(t, `"pin": "open.send2"`, `"pin": "stripe.create_charge"`), []string{"capabilities[0].pin: must be one of the providers"}},
		{"schema not an object", schemaEdit(t, `[4242]`), []string{"tools[0] (stripe.create_charge).input_schema: must be a JSON Schema object"}},
		{"schema null", schemaEdit(t, `null`), []string{"tools[0] (stripe.create_charge).input_schema: must be a JSON Schema object"}},
		{"schema not of type object", schemaEdit(t, `{"type": "string", "maxLength": 4242}`), []string{`tools[0] (stripe.create_charge).input_schema: must have "type": "object"`}},
		{"schema with type list", schemaEdit(t, `{"type": ["object", "null"]}`), []string{`input_schema: must have "type": "object"`}},
		{"schema keyword of the wrong type", schemaEdit(t, `{"type": "object", "required": "4242"}`), []string{"tools[0] (stripe.create_charge).input_schema: is not a valid JSON Schema"}},
		{"schema bad pattern", schemaEdit(t, `{"type": "object", "properties": {"card": {"type": "string", "pattern": "(4242"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: is not a valid JSON Schema"}},
		{"schema remote ref", schemaEdit(t, `{"type": "object", "properties": {"card": {"$ref": "https://4242.example/card.json"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: is not a valid JSON Schema"}},
		{"schema local ref to nowhere", schemaEdit(t, `{"type": "object", "properties": {"card": {"$ref": "#/$defs/c4242"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: is not a valid JSON Schema"}},
		{"schema default that does not match", schemaEdit(t, `{"type": "object", "properties": {"card": {"type": "integer", "default": "4242"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: is not a valid JSON Schema"}},
		{"schema draft", schemaEdit(t, `{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}`),
			[]string{"input_schema: $schema: only draft 2020-12 and draft-07"}},
		{"schema x-mcp-header", schemaEdit(t, `{"type": "object", "properties": {"card": {"type": "string", "x-mcp-header": "X-4242"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: x-mcp-header is not supported"}},
		{"schema $ref cycle", schemaEdit(t, `{"type": "object", "$defs": {"n": {"$ref": "#/$defs/n"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}`),
			[]string{"tools[0] (stripe.create_charge).input_schema: recursive schemas"}},
		{"schema $ref to the root in place", schemaEdit(t, `{"type": "object", "allOf": [{"$ref": "#"}]}`), []string{"input_schema: recursive schemas"}},
		{"schema recursive through properties", schemaEdit(t, `{"type": "object", "properties": {"child": {"$ref": "#"}}}`), []string{"input_schema: recursive schemas"}},
		{"schema $dynamicAnchor", schemaEdit(t, `{"type": "object", "$dynamicAnchor": "node"}`),
			[]string{"input_schema: $dynamicRef"}},
		{"schema anchor ref", schemaEdit(t, `{"type": "object", "$defs": {"c": {"$anchor": "c4242", "type": "string"}}, "properties": {"a": {"$ref": "#c4242"}}}`),
			[]string{"input_schema: $ref: only local JSON pointers"}},
		{"schema nested $id", schemaEdit(t, `{"type": "object", "properties": {"a": {"$id": "https://4242.example/a", "type": "string"}}}`),
			[]string{"input_schema: $id is supported only at the root"}},
		{"schema keyword in another case", schemaEdit(t, `{"tYpe": "object"}`), []string{"input_schema: a keyword written in another case"}},
		{"schema keyword in another case beside it", schemaEdit(t, `{"type": "object", "Required": ["card"]}`), []string{"input_schema: a keyword written in another case"}},
		{"schema nested keyword in another case", schemaEdit(t, `{"type": "object", "properties": {"a": {"type": "integer", "MAXIMUM": 4242}}}`),
			[]string{"input_schema: a keyword written in another case"}},
		{"schema keyword folded", schemaEdit(t, `{"type": "object", "properties": {"a": {"type": "array", "maxItemſ": 4242}}}`),
			[]string{"input_schema: a keyword written in another case"}},
		{"schema fan-out", schemaEdit(t, fanOutSchema(13)), []string{"input_schema: too many subschemas"}},
		{"federated schema", edit(t, `"description": "send mail"`, `"description": "send mail", "input_schema": {"type": "string"}`),
			[]string{`tools[4] (gmail.send).input_schema: must have "type": "object"`}},
		{"description not a string", edit(t, `"description": "send mail"`, `"description": 4242`), []string{"tools[4] (gmail.send).description: must be a string"}},
		{"capability schema", edit(t, `"pin": "open.send2"`, `"pin": "open.send2", "input_schema": {"type": "object", "minProperties": "4242"}`),
			[]string{"capabilities[0] (cap.send).input_schema: is not a valid JSON Schema"}},
		{"capability description", edit(t, `"pin": "open.send2"`, `"pin": "open.send2", "description": ["4242"]`), []string{"capabilities.description: wrong type"}},
		{"no tools", `{"workspaces": [{"id": "w", "api_keys": ["abcdefgh"]}]}`, []string{"tools: at least one is required"}},
		{"no workspaces", `{"tools": []}`, []string{"workspaces: at least one is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig([]byte(tc.config), testEnv, &retry.Executor{})
			if err == nil {
				t.Fatalf("loaded: %+v", c)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\nlacks %q", msg, w)
				}
			}
			if strings.Contains(msg, testSecret) || strings.Contains(msg, "ob_live_") || strings.Contains(msg, "ob_admin") || strings.Contains(msg, "4242") {
				t.Errorf("error leaks a secret or key: %q", msg)
			}
		})
	}
}

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	if err := os.WriteFile(p, []byte(goodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VENDOR_KEY", "x_vendor_secret")
	t.Setenv("NANGO_SECRET_KEY", "x_nango_secret")
	t.Setenv("COMPOSIO_API_KEY", "x_composio_secret")
	if _, err := LoadFile(t.Context(), p, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VENDOR_KEY", "")
	if _, err := LoadFile(t.Context(), p, Options{}); err == nil || !strings.Contains(err.Error(), "VENDOR_KEY is not set") {
		t.Errorf("unset secret: %v", err)
	}
	var ce *configError
	if _, err := LoadFile(t.Context(), filepath.Join(dir, "missing.json"), Options{}); !errors.As(err, &ce) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want a configError wrapping the read error", err)
	}
}

// TestSchemaRefusalNamesTheSchema: an invalid_arguments message names the
// place in the schema and the keyword the arguments broke, and nothing of
// the arguments, even when they are made to look like the validator's own
// text.
func TestSchemaRefusalNamesTheSchema(t *testing.T) {
	s, why := parseInputSchema(json.RawMessage(`{"type": "object", "required": ["amount"], "additionalProperties": false,
	  "properties": {"amount": {"type": "integer", "minimum": 1}, "card": {"type": "string", "pattern": "^tok_"},
	    "l": {"type": "array", "items": {"$ref": "#/$defs/i"}}}, "$defs": {"i": {"type": "string"}}}`))
	if why != "" {
		t.Fatal(why)
	}
	const trap = "validating /properties/amount: minimum: 4242"
	for _, tc := range []struct{ args, at string }{
		{`{"amount": 0}`, " at /properties/amount (minimum) "},
		{`{"amount": "4242"}`, " at /properties/amount (type) "},
		{`{}`, " at the top level (required) "},
		{`{"amount": 1, "card": "` + trap + `"}`, " at /properties/card (pattern) "},
		{`{"amount": 1, "l": ["a", 4242]}`, " at /$defs/i (type) "},
		{`{"amount": 1, "` + trap + `": 1}`, " (see"},
	} {
		r := s.Check([]byte(tc.args))
		if r == nil {
			t.Errorf("%s: passed", tc.args)
			continue
		}
		if !strings.Contains(r.Message, tc.at) || strings.Contains(r.Message, "4242") || strings.Contains(r.Message, "tok_") {
			t.Errorf("%s: %q, want %q and nothing of the arguments", tc.args, r.Message, tc.at)
		}
	}
}

// TestUnknownRetentionBound: unknown_retention must exceed every tool's
// timeout plus the lease: equal is refused, naming the tool; a millisecond
// more loads.
func TestUnknownRetentionBound(t *testing.T) {
	cfg := func(unknown string) string {
		return strings.Replace(edit(t, `"retention": "1h"`, `"retention": "1m", "unknown_retention": "`+unknown+`"`),
			`"spec": {"tool": "open.send", `, `"spec": {"tool": "open.send", "timeout": "5m", `, 1)
	}
	_, err := loadConfig([]byte(cfg("5m10s")), testEnv, &retry.Executor{})
	if err == nil || !strings.Contains(err.Error(), "tools[1] (open.send).spec.timeout:") {
		t.Errorf("unknown_retention = timeout + lease: %v, want refused naming open.send", err)
	}
	if _, err := loadConfig([]byte(cfg("5m10.001s")), testEnv, &retry.Executor{}); err != nil {
		t.Errorf("unknown_retention just above timeout + lease: %v", err)
	}
}

// TestConfigStoreDefaults: a file that leaves the store's options out gets
// redisstore's defaults, read from redisstore, not copies: a change there is
// a change here. The values the config keeps are the ones the store
// resolves from them.
// storeDefaults are the store's options when none is set.
var storeDefaults, _ = redisstore.Options{}.Resolve()

func TestConfigStoreDefaults(t *testing.T) {
	raw := edit(t, `"key_prefix": "gw1:", "retention": "1h", "lease": "10s", `, ``)
	c, err := loadConfig([]byte(raw), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Prefix != idempotency.DefaultPrefix || c.Store.Retention != storeDefaults.Retention ||
		c.Store.UnknownRetention != storeDefaults.UnknownRetention || c.Store.Lease != storeDefaults.Lease || c.Store.WaitReplicas != 0 {
		t.Errorf("prefix %q retention %v unknown retention %v lease %v wait replicas %d, want redisstore's defaults",
			c.Store.Prefix, c.Store.Retention, c.Store.UnknownRetention, c.Store.Lease, c.Store.WaitReplicas)
	}
	def, err := redisstore.Options{}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Prefix != def.Prefix || c.Store.Retention != def.Retention || c.Store.UnknownRetention != def.UnknownRetention || c.Store.Lease != def.Lease {
		t.Errorf("config %+v, store resolves %+v", c, def)
	}

	// A retention longer than the default unknown retention lifts it, as
	// the store does.
	c, err = loadConfig([]byte(edit(t, `"retention": "1h"`, `"retention": "720h"`)), testEnv, &retry.Executor{})
	if err != nil || c.Store.UnknownRetention != 720*time.Hour {
		t.Errorf("retention 720h: unknown retention %v, %v; want 720h", c.Store.UnknownRetention, err)
	}
	// What the config keeps is what the store would use: resolving it again
	// changes nothing.
	got := redisstore.Options{Prefix: c.Store.Prefix, Retention: c.Store.Retention, UnknownRetention: c.Store.UnknownRetention, Lease: c.Store.Lease, WaitReplicas: c.Store.WaitReplicas}
	if r, err := got.Resolve(); err != nil || r.Prefix != c.Store.Prefix || r.Retention != c.Store.Retention || r.UnknownRetention != c.Store.UnknownRetention || r.Lease != c.Store.Lease {
		t.Errorf("the store resolves the config's %+v to %+v, %v", got, r, err)
	}

	// The unknown_retention bound against a tool's timeout uses the lease
	// the store will use, here its default.
	unknown := 5*time.Minute + storeDefaults.Lease
	raw = strings.Replace(edit(t, `"retention": "1h", "lease": "10s"`,
		fmt.Sprintf(`"retention": "%s", "unknown_retention": "%s"`, redisstore.MinRetentionLeases*storeDefaults.Lease, unknown)),
		`"spec": {"tool": "open.send", `, `"spec": {"tool": "open.send", "timeout": "5m", `, 1)
	_, err = loadConfig([]byte(raw), testEnv, &retry.Executor{})
	want := fmt.Sprintf("tools[1] (open.send).spec.timeout: the timeout 5m0s plus the lease %s must be less than unknown_retention (%s)", storeDefaults.Lease, unknown)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("unknown_retention = timeout + default lease: %v, want %q", err, want)
	}
}

// TestConfigStoreOptionRefused: a store option the store would refuse is
// refused at load, by the store's rule, under the file's field name, once.
func TestConfigStoreOptionRefused(t *testing.T) {
	lease := storeDefaults.Lease
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown_retention under retention", `"retention": "1h"`, `"retention": "2h", "unknown_retention": "1h"`,
			"unknown_retention: must be at least the retention 2h0m0s"},
		{"unknown_retention under the file's retention", `"retention": "1h"`, `"retention": "1h", "unknown_retention": "30m"`,
			"unknown_retention: must be at least the retention 1h0m0s"},
		{"unknown_retention under the default retention", `"retention": "1h", `,
			fmt.Sprintf(`"unknown_retention": "%s", `, storeDefaults.Retention-time.Second),
			fmt.Sprintf("unknown_retention: must be at least the retention %s", storeDefaults.Retention)},
		{"retention under two default leases", `"retention": "1h", "lease": "10s"`,
			fmt.Sprintf(`"retention": "%s"`, redisstore.MinRetentionLeases*lease-time.Millisecond),
			fmt.Sprintf("retention: must be at least %d leases (%d times the lease %s)", redisstore.MinRetentionLeases, redisstore.MinRetentionLeases, lease)},
		{"retention under two leases", `"retention": "1h", "lease": "10s"`, `"retention": "1m", "lease": "31s"`,
			fmt.Sprintf("retention: must be at least %d leases (%d times the lease 31s)", redisstore.MinRetentionLeases, redisstore.MinRetentionLeases)},
		{"wait_replicas negative", `"lease": "10s"`, `"lease": "10s", "wait_replicas": -2`,
			"wait_replicas: must not be negative"},
		{"wait_replicas with a lease too short for the WAIT", `"lease": "10s"`,
			fmt.Sprintf(`"lease": "%s", "wait_replicas": 1`, storeDefaults.WaitTimeout),
			fmt.Sprintf("wait_replicas: the store's wait timeout %s: must be at most half the lease %[1]s", storeDefaults.WaitTimeout)},
		{"key_prefix", `"key_prefix": "gw1:"`, `"key_prefix": "gw 1:"`,
			"key_prefix: invalid scope: prefix: byte 2 is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig([]byte(edit(t, tc.old, tc.new)), testEnv, &retry.Executor{})
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Count(msg, tc.want) != 1 {
				t.Errorf("error %q\nwant once %q", msg, tc.want)
			}
			if strings.Contains(msg, "redisstore") || strings.Contains(msg, "store options") {
				t.Errorf("error %q names the store, not the file's field", msg)
			}
		})
	}
	// wait_replicas with a lease that fits the WAIT loads.
	fits := 2 * storeDefaults.WaitTimeout
	if _, err := loadConfig([]byte(edit(t, `"lease": "10s"`, fmt.Sprintf(`"lease": "%s", "wait_replicas": 1`, fits))), testEnv, &retry.Executor{}); err != nil {
		t.Errorf("wait_replicas 1, lease %s: %v", fits, err)
	}
}

// TestGateway: the gateway's part of the file is its tools and capabilities
// in file order, authentication by API key only, and a redactor of every
// secret and key.
func TestGateway(t *testing.T) {
	c, err := loadConfig([]byte(goodConfig), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	gc := c.Gateway()
	var names []string
	for _, tl := range gc.Tools {
		names = append(names, tl.Spec.Tool)
	}
	for _, cp := range gc.Capabilities {
		names = append(names, cp.Name)
	}
	if !slices.Equal(names, c.ToolOrder) {
		t.Errorf("gateway tools %v, want %v", names, c.ToolOrder)
	}
	if ws, ok := gc.Authenticate("ob_live_globex"); !ok || ws != "ws_globex" {
		t.Errorf("Authenticate(ob_live_globex) = %q, %v", ws, ok)
	}
	if _, ok := gc.Authenticate("ob_admin_key_1"); ok {
		t.Error("an approver key authenticates a workspace")
	}
	for _, s := range c.Secrets {
		if got := gc.Redact("x " + s + " y"); strings.Contains(got, s) {
			t.Errorf("Redact leaves a secret or key: %q", got)
		}
	}
}

// metrics_token: unset, the metrics are open; set, only the token opens
// them, and it is scrubbed like every other key.
func TestMetricsToken(t *testing.T) {
	c, err := loadConfig([]byte(goodConfig), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsTokenRequired() || !c.MetricsToken("") || !c.MetricsToken("anything") {
		t.Errorf("without metrics_token: required %v", c.MetricsTokenRequired())
	}
	const tok = "ob_metrics_scraper_1"
	c, err = loadConfig([]byte(edit(t, `"lease": "10s"`, `"lease": "10s", "metrics_token": "`+tok+`"`)), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.MetricsTokenRequired() || !c.MetricsToken(tok) {
		t.Errorf("with metrics_token: required %v, the token refused", c.MetricsTokenRequired())
	}
	for _, other := range []string{"", "ob_metrics_scraper_2", "OB_METRICS_SCRAPER_1", tok + " ", "ob_live_globex", "ob_admin_key_1"} {
		if c.MetricsToken(other) {
			t.Errorf("MetricsToken(%q) accepted", other)
		}
	}
	if _, ok := c.Workspace(tok); ok {
		t.Error("the metrics token is an API key")
	}
	if _, ok := c.Approver(tok); ok {
		t.Error("the metrics token is an approver key")
	}
	if !slices.Contains(c.Secrets, tok) {
		t.Error("the metrics token is not among the secrets scrubbed from logs")
	}
}

// TestConfigMaxAttempts: max_attempts defaults to 10 and is what the file
// says otherwise.
func TestConfigMaxAttempts(t *testing.T) {
	c, err := loadConfig([]byte(goodConfig), testEnv, &retry.Executor{})
	if err != nil || c.MaxAttempts != effectspec.DefaultMaxAttempts {
		t.Fatalf("default: %v, max attempts %d; want %d", err, c.MaxAttempts, effectspec.DefaultMaxAttempts)
	}
	c, err = loadConfig([]byte(edit(t, `"lease": "10s"`, `"lease": "10s", "max_attempts": 3`)), testEnv, &retry.Executor{})
	if err != nil || c.MaxAttempts != 3 {
		t.Fatalf("max_attempts 3: %v, max attempts %d", err, c.MaxAttempts)
	}
}

// TestPlaceholderKeys: production and staging refuse every key that holds
// the template's placeholder, each by its field and all at once; the
// other environments load them.
func TestPlaceholderKeys(t *testing.T) {
	conf := strings.NewReplacer(`"ob_live_globex"`, `"ob_live_REPLACE_ME_globex"`,
		`"key": "ob_admin_key_1"`, `"key": "ob_admin_REPLACE_ME_1"`).Replace(goodConfig)
	for _, env := range []string{"production", "staging", "development", "test"} {
		t.Run(env, func(t *testing.T) {
			_, err := loadConfig([]byte(strings.Replace(conf, `"environment": "production"`, `"environment": "`+env+`"`, 1)),
				testEnv, &retry.Executor{})
			if env == "development" || env == "test" {
				if err != nil {
					t.Fatalf("%s refuses the placeholders: %v", env, err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			for _, want := range []string{"workspaces[1].api_keys[0]: the template's REPLACE_ME placeholder", "approver_keys[0].key: the template's REPLACE_ME placeholder", env + " refuses it"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q not in %s", want, msg)
				}
			}
			if strings.Contains(msg, "ob_live_REPLACE_ME_globex") || strings.Contains(msg, "ob_admin_REPLACE_ME_1") {
				t.Errorf("a key quoted: %s", msg)
			}
		})
	}
}
