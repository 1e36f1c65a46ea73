package main

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

// tenant is a workspace of the soak; every tenant shares the same vendor
// accounts (connections), as two customers of one gateway may.
type tenant struct {
	id, apiKey, marker string
}

// credentials are the soak's secrets, drawn from the seed. Each holds
// "_soak_", which the vendors check for on every request.
type credentials struct {
	env      map[string]string // secret_env name -> secret
	tenants  []tenant
	approver string
	// deployment is the fleet's deployment_id: configured, so that a
	// store loss keeps the vendor keys (docs/DESIGN.md section 5a), and
	// vendors with a binding deduplicate the lost calls' retries.
	deployment string
}

func newCredentials(rng *rand.Rand) credentials {
	word := func() string {
		var b [10]byte
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return hex.EncodeToString(b[:])
	}
	c := credentials{env: map[string]string{}, approver: "ob_soak_approver_" + word()}
	for _, n := range []string{"STRIPE", "ECHO", "SLOW", "MAIL", "NANGO", "COMPOSIO", "MCP", "MCPS"} {
		c.env["SOAK_"+n+"_SECRET"] = "sk_soak_" + strings.ToLower(n) + "_" + word()
	}
	for _, id := range []string{"ws_a", "ws_b", "ws_c"} {
		c.tenants = append(c.tenants, tenant{id: id, apiKey: "ob_soak_key_" + id + "_" + word(), marker: "mk_" + id + "_" + word()})
	}
	var d [16]byte
	for i := range d {
		d[i] = byte(rng.UintN(256))
	}
	c.deployment = hex.EncodeToString(d[:])
	return c
}

// secrets is every value that must never appear in a reply, receipt,
// Redis value or gateway log.
func (c credentials) secrets() []string {
	out := []string{c.approver}
	for _, s := range c.env {
		out = append(out, s)
	}
	for _, t := range c.tenants {
		out = append(out, t.apiKey)
	}
	return out
}

func (c credentials) envList(broken string) []string {
	var out []string
	for k, v := range c.env {
		out = append(out, k+"="+v)
	}
	if broken != "" {
		out = append(out, "OBOL_BROKEN_STORE="+broken)
	}
	return out
}

// toolInfo is what the workload and the checks need to know of a tool.
type toolInfo struct {
	name     string
	vendorKB bool // header, meta or body_pointer binding: one effect per vendor key
	approval bool
	weight   int
	// metaKey: the client sends its key in _meta rather than as a header,
	// so that an upstream MCP server would see it if the gateway forwarded
	// the client's _meta.
	metaKey bool
}

var tools = []toolInfo{
	{name: "pay.charge", vendorKB: true, weight: 20},
	{name: "pay.refund", vendorKB: true, approval: true, weight: 6},
	{name: "crm.contact", vendorKB: true, weight: 12},
	{name: "chat.post", weight: 14},
	{name: "slow.export", vendorKB: true, weight: 5},
	{name: "gh.issue", weight: 10},
	{name: "gmail.send", weight: 8},
	{name: "cap.send", vendorKB: true, weight: 10},
	{name: "mcp.charge", vendorKB: true, weight: 5, metaKey: true},
	{name: "mcp.ticket", vendorKB: true, weight: 5, metaKey: true},
	{name: "mcp.note", weight: 4, metaKey: true},
	{name: "mcps.charge", vendorKB: true, weight: 4, metaKey: true},
	{name: "mcps.ticket", vendorKB: true, weight: 4, metaKey: true},
}

// gatewayConfig renders the fleet's shared refserver configuration.
func gatewayConfig(c credentials, vendorURL string, waitReplicas int) string {
	var ws []string
	for _, t := range c.tenants {
		ws = append(ws, fmt.Sprintf(`{"id": %q, "api_keys": [%q]}`, t.id, t.apiKey))
	}
	status := `"status": {"accepted": [200, 201], "definitely_rejected": [400], "retryable": [503], "in_use": [409]}`
	fed := `"status": {"accepted": [200, 201]}`
	return `{
  "key_prefix": "soak:", "retention": "24h", "unknown_retention": "168h", "lease": "2s",
  "wait_replicas": ` + fmt.Sprint(waitReplicas) + `, "environment": "test", "deployment_id": "` + c.deployment + `",
  "workspaces": [` + strings.Join(ws, ", ") + `],
  "approver_keys": [{"name": "soak-operator", "key": "` + c.approver + `"}],
  "connections": [
    {"id": "conn_stripe", "provider": "stripe", "base_url": "` + vendorURL + `/stripe", "secret_env": "SOAK_STRIPE_SECRET"},
    {"id": "conn_echo", "provider": "echo", "base_url": "` + vendorURL + `/echo", "secret_env": "SOAK_ECHO_SECRET"},
    {"id": "conn_slow", "provider": "slow", "base_url": "` + vendorURL + `/slow", "secret_env": "SOAK_SLOW_SECRET"},
    {"id": "conn_mail", "provider": "mail", "base_url": "` + vendorURL + `/mail", "secret_env": "SOAK_MAIL_SECRET"},
    {"id": "conn_mcp", "provider": "ledger", "protocol": "mcp", "base_url": "` + vendorURL + `/mcp/stateless", "secret_env": "SOAK_MCP_SECRET"},
    {"id": "conn_mcps", "provider": "desk", "protocol": "mcp", "base_url": "` + vendorURL + `/mcp/sessions", "secret_env": "SOAK_MCPS_SECRET"}],
  "brokers": [
    {"id": "nango", "kind": "nango", "base_url": "` + vendorURL + `/nango", "secret_env": "SOAK_NANGO_SECRET"},
    {"id": "composio", "kind": "composio", "base_url": "` + vendorURL + `/composio", "secret_env": "SOAK_COMPOSIO_SECRET"}],
  "tools": [
    {"connection": "conn_stripe", "method": "POST", "path": "/v1/charges", "spec": {"tool": "pay.charge", "timeout": "6s",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, ` + status + `}},
    {"connection": "conn_stripe", "method": "POST", "path": "/v1/refunds", "spec": {"tool": "pay.refund", "timeout": "6s", "approval": "required",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, ` + status + `}},
    {"connection": "conn_echo", "path": "/contact", "spec": {"tool": "crm.contact", "timeout": "6s",
      "idempotency": {"binding": "body_pointer", "pointer": "/idem"}, ` + status + `}},
    {"connection": "conn_echo", "path": "/chat", "spec": {"tool": "chat.post", "timeout": "6s",
      "idempotency": {"binding": "unsupported"}, ` + status + `}},
    {"connection": "conn_slow", "path": "/export", "spec": {"tool": "slow.export", "timeout": "20s",
      "idempotency": {"binding": "header", "header": "X-Export-Key"}, ` + status + `}},
    {"connection": "conn_mail", "path": "/a", "spec": {"tool": "mail.a", "timeout": "6s",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, ` + status + `}},
    {"connection": "conn_mail", "path": "/b", "spec": {"tool": "mail.b", "timeout": "6s",
      "idempotency": {"binding": "body_pointer", "pointer": "/meta/key"}, ` + status + `}},
    {"broker": "nango", "connection_id": "user-1", "provider_config_key": "github", "path": "/issues",
     "spec": {"tool": "gh.issue", "effect": "write", "route": "federated", "timeout": "6s", ` + fed + `}},
    {"broker": "composio", "tool_slug": "GMAIL_SEND_EMAIL", "user_id": "u1",
     "spec": {"tool": "gmail.send", "effect": "write", "route": "federated", "timeout": "6s", ` + fed + `}},
    {"connection": "conn_mcp", "upstream_tool": "charge", "spec": {"tool": "mcp.charge", "effect": "write", "route": "native", "timeout": "6s",
      "idempotency": {"binding": "meta"}}},
    {"connection": "conn_mcp", "upstream_tool": "create_ticket", "spec": {"tool": "mcp.ticket", "effect": "write", "route": "native", "timeout": "6s",
      "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}, "status": {"tool_error": "definitely_rejected"}}},
    {"connection": "conn_mcp", "upstream_tool": "post_note", "spec": {"tool": "mcp.note", "effect": "write", "route": "native", "timeout": "6s",
      "idempotency": {"binding": "unsupported"}}},
    {"connection": "conn_mcps", "upstream_tool": "charge", "spec": {"tool": "mcps.charge", "effect": "write", "route": "native", "timeout": "6s",
      "idempotency": {"binding": "meta", "meta": "` + mcpMetaKey + `"}}},
    {"connection": "conn_mcps", "upstream_tool": "create_ticket", "spec": {"tool": "mcps.ticket", "effect": "write", "route": "native", "timeout": "6s",
      "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}}
  ],
  "capabilities": [{"name": "cap.send", "providers": ["mail.a", "mail.b"], "pin": "mail.a"}]
}`
}
