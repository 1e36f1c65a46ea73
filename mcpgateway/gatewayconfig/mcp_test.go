package gatewayconfig

import (
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// mcpConn is an MCP connection with a secret, added to goodConfig.
const mcpConn = `{"id": "conn_up", "provider": "payco", "protocol": "mcp", "base_url": "http://127.0.0.1:9100/mcp", "secret_env": "VENDOR_KEY"}`

// mcpEdit adds conn to goodConfig's connections and tools to its tools.
func mcpEdit(t *testing.T, conn string, tools ...string) string {
	t.Helper()
	c := edit(t, `"connections": [`, `"connections": [`+conn+`, `)
	if len(tools) > 0 {
		c = strings.Replace(c, `"tools": [`, `"tools": [`+strings.Join(tools, ", ")+`, `, 1)
	}
	return c
}

func TestMCPConnection(t *testing.T) {
	exec := &retry.Executor{}
	c, err := loadConfig([]byte(mcpEdit(t, mcpConn,
		`{"connection": "conn_up", "upstream_tool": "create_payment", "description": "pay",
		  "spec": {"tool": "pay.create", "effect": "write", "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}}`,
		`{"connection": "conn_up", "spec": {"tool": "pay.list", "effect": "read", "idempotency": {"binding": "meta"}, "status": {"tool_error": "definitely_rejected"}}}`)), testEnv, exec)
	if err != nil {
		t.Fatal(err)
	}
	create, list := c.Tools["pay.create"], c.Tools["pay.list"]
	if create == nil || list == nil {
		t.Fatalf("tools %v", c.ToolOrder)
	}
	up := create.Upstream
	if up == nil || list.Upstream != up {
		t.Fatal("the tools of one MCP connection do not share one upstream")
	}
	if up.URL != "http://127.0.0.1:9100/mcp" || up.Executor != exec {
		t.Errorf("upstream URL %q, executor shared %v", up.URL, up.Executor == exec)
	}
	if got := up.Header.Get("Authorization"); got != "Bearer "+testSecret+"_VENDOR_KEY" {
		t.Error("the connection's secret is not sent as Authorization: Bearer")
	}
	if create.Target == nil || create.Connection != "conn_up" || create.Description != "pay" {
		t.Errorf("tool %+v", create)
	}
	if list.Spec.Idempotency.Kind != effectspec.BindingMeta || list.Spec.Status.ToolError != effectspec.DefinitelyRejected {
		t.Errorf("spec %+v", list.Spec)
	}
	r := create.Route
	if r.Connection != "conn_up" || r.Provider != "payco" || r.Host != "127.0.0.1:9100" || r.Path != "/mcp" ||
		r.Credential != "VENDOR_KEY" || r.Binding != effectspec.BindingBodyPointer || r.BindingName != "/idempotency_key" {
		t.Errorf("route %+v", r)
	}
	// Without secret_env: no Authorization, the route's credential none.
	c, err = loadConfig([]byte(mcpEdit(t, `{"id": "conn_up", "provider": "payco", "protocol": "mcp", "base_url": "https://up.example/mcp"}`,
		`{"connection": "conn_up", "spec": {"tool": "pay.list", "effect": "read"}}`)), testEnv, exec)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Tools["pay.list"]; l.Upstream.Header != nil || l.Route.Credential != idempotency.NoCredential {
		t.Errorf("header %v credential %q", l.Upstream.Header, l.Route.Credential)
	}
	// protocol "http" is the default, spelled out.
	if _, err := loadConfig([]byte(edit(t, `"base_url": "https://open.example"`, `"base_url": "https://open.example", "protocol": "http"`)), testEnv, exec); err != nil {
		t.Error(err)
	}
}

func TestMCPConfigRefused(t *testing.T) {
	tool := func(extra, spec string) string {
		return `{"connection": "conn_up"` + extra + `, "spec": {"tool": "pay.create", "effect": "write"` + spec + `}}`
	}
	cases := []struct {
		name, config string
		want         []string
	}{
		{"other protocol", mcpEdit(t, strings.Replace(mcpConn, `"mcp"`, `"grpc"`, 1)), []string{`connections[0].protocol: "grpc" is not "http" or "mcp"`}},
		{"near-miss protocol", mcpEdit(t, strings.Replace(mcpConn, `"protocol"`, `"protcol"`, 1)), []string{"connections[0].protcol: unknown field"}},
		{"near-miss upstream_tool", mcpEdit(t, mcpConn, tool(`, "upstreamTool": "x"`, "")), []string{`tools[0] (pay.create): unknown field upstreamTool`}},
		{"method on MCP", mcpEdit(t, mcpConn, tool(`, "method": "POST"`, "")), []string{"tools[0] (pay.create).method: not for a tool of an MCP connection"}},
		{"path on MCP", mcpEdit(t, mcpConn, tool(`, "path": "/x"`, "")), []string{"tools[0] (pay.create).path: not for a tool of an MCP connection"}},
		{"bad upstream_tool", mcpEdit(t, mcpConn, tool(`, "upstream_tool": "a b"`, "")), []string{"tools[0] (pay.create).upstream_tool: must be 1 to 128"}},
		{"upstream_tool not a string", mcpEdit(t, mcpConn, tool(`, "upstream_tool": 7`, "")), []string{"tools[0] (pay.create).upstream_tool: must be a string"}},
		{"header binding", mcpEdit(t, mcpConn, tool("", `, "idempotency": {"binding": "header", "header": "Idempotency-Key"}`)),
			[]string{"tools[0] (pay.create).spec.idempotency.binding: header is refused for a tool of an MCP connection: the upstream's tool never sees the HTTP headers"}},
		{"HTTP statuses", mcpEdit(t, mcpConn, tool("", `, "status": {"accepted": [200], "retryable": [503]}`)),
			[]string{"tools[0] (pay.create).spec.status.accepted: not for a tool of an MCP connection", "spec.status.retryable: not for a tool"}},
		{"in_use", mcpEdit(t, mcpConn, tool("", `, "status": {"in_use": [409]}`)), []string{"spec.status.in_use: not for a tool of an MCP connection"}},
		{"bad tool_error", mcpEdit(t, mcpConn, tool("", `, "status": {"tool_error": "accepted"}`)), []string{"tool_error"}},
		{"meta on HTTP", mcpEdit(t, mcpConn, `{"connection": "conn_open", "path": "/pay", "spec": {"tool": "pay.create", "idempotency": {"binding": "meta"}}}`),
			[]string{`tools[0] (pay.create).spec.idempotency.binding: meta is only for a tool of an MCP connection ("protocol": "mcp")`}},
		{"tool_error on HTTP", mcpEdit(t, mcpConn, `{"connection": "conn_open", "path": "/pay", "spec": {"tool": "pay.create", "status": {"tool_error": "unknown"}}}`),
			[]string{`tools[0] (pay.create).spec.status.tool_error: only for a tool of an MCP connection`}},
		{"upstream_tool on HTTP", edit(t, `"path": "/send2",`, `"path": "/send2", "upstream_tool": "x",`),
			[]string{"tools[2] (open.send2).upstream_tool: only a tool of an MCP connection"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig([]byte(tc.config), testEnv, &retry.Executor{})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Error("the error holds a secret")
			}
		})
	}
}
