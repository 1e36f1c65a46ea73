package gatewayconfig

import "encoding/json"

// fileFormat is the configuration file as written (docs/DESIGN.md, "refserver
// config (JSON)"): what Load decodes, strictly, before it checks anything.
type fileFormat struct {
	KeyPrefix *string `json:"key_prefix"`
	Retention string  `json:"retention"`
	// UnknownRetention keeps unknown records (and records of attempts in
	// flight) longer: their slot must not re-open soon.
	UnknownRetention string `json:"unknown_retention"`
	Lease            string `json:"lease"`
	// WaitReplicas is [redisstore.Options].WaitReplicas: every reservation
	// waits until that many replicas acknowledged it.
	WaitReplicas int `json:"wait_replicas"`
	// DeploymentID is [redisstore.Options].DeploymentID: the fleet's id in
	// every vendor key, kept stable when Redis is rebuilt.
	DeploymentID string `json:"deployment_id"`
	Environment  string `json:"environment"`
	// AllowUnsupportedWrites is [effectspec.Policy].AllowUnsupportedWrites:
	// the explicit opt-in to writes whose vendor cannot deduplicate
	// (binding unsupported, every federated route) in production.
	AllowUnsupportedWrites bool             `json:"allow_unsupported_writes"`
	Workspaces             []workspaceEntry `json:"workspaces"`
	// ApproverKeys are {"name", "key"} objects ([ApproverEntry]); a bare
	// key is refused with an error that shows the object form.
	ApproverKeys []json.RawMessage `json:"approver_keys"`
	Connections  []connectionEntry `json:"connections"`
	Brokers      []brokerEntry     `json:"brokers"`
	// Tools are tool entries: a native one has connection, method and
	// path, a federated one names a broker and holds its routing fields;
	// both have a spec, and may have a description and an input_schema.
	Tools        []json.RawMessage `json:"tools"`
	Capabilities []capabilityEntry `json:"capabilities"`

	// MaxResponseBytes is [retry.Executor].MaxResponseBytes of every vendor call
	// (0: [retry.DefaultMaxResponseBytes], 10 MiB). A larger answer is not read:
	// its status is kept, its body dropped.
	MaxResponseBytes int64 `json:"max_response_bytes"`
	// MaxAttempts is the max_attempts of every tool whose spec sets none
	// ([effectspec.Spec].MaxAttempts): how many attempts of one key's slot
	// may reach the vendor over its life (0: the default, 10).
	MaxAttempts int `json:"max_attempts"`

	// DefaultQuota is every workspace's quota but for the members its own
	// Quota sets (docs/DESIGN.md, "Fair share"): a quota object
	// {"calls_per_second", "burst", "stored_bytes", "in_flight"}, 0 or
	// absent unlimited.
	DefaultQuota json.RawMessage `json:"default_quota"`
	// StoreFullFraction is [mcpgateway.Config].StoreFullFraction: above
	// it of Redis maxmemory, fresh claims are refused store_full.
	StoreFullFraction *float64 `json:"store_full_fraction"`

	// MetricsToken, when set, is the key a scraper of GET /metrics must
	// send as a Bearer token: the metrics name every workspace. A key like
	// the API keys (8 to 256 bytes, distinct from every other key); empty,
	// the metrics are open.
	MetricsToken string `json:"metrics_token"`
}

// workspaceEntry is a workspaces entry: a tenant and the API keys that
// authenticate it.
type workspaceEntry struct {
	ID      string   `json:"id"`
	APIKeys []string `json:"api_keys"`
	// Quota overrides DefaultQuota member by member.
	Quota json.RawMessage `json:"quota"`
}

// approverEntry is one approver_keys entry: a name, which is what a settlement
// records as its "by" and what the log lines of an approval or a pin name,
// and the key the approver authenticates with. The name follows the id rule
// of docs/DESIGN.md, "Scope and the Redis key", and is unique; the key is never recorded.
type approverEntry struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// approverForm is the form an approver_keys entry must have, shown in the
// error that refuses another.
const approverForm = `{"name": "ops-alice", "key": "..."}`

// connectionEntry is a connections entry: a native connection. Without
// secret_env its calls send no Authorization header. Protocol "mcp" makes
// base_url an upstream MCP server's Streamable HTTP endpoint.
type connectionEntry struct {
	ID        string `json:"id"`
	Provider  string `json:"provider"`
	BaseURL   string `json:"base_url"`
	SecretEnv string `json:"secret_env"`
	Protocol  string `json:"protocol"`
}

// Protocols of a connection.
const (
	protocolHTTP = "http"
	protocolMCP  = "mcp"
)

// brokerEntry is a brokers entry: a federated broker (kind nango or
// composio).
type brokerEntry struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	BaseURL   string `json:"base_url"`
	SecretEnv string `json:"secret_env"`
}

// capabilityEntry is a capabilities entry: a cap.* tool over
// interchangeable providers, which Load makes an [mcpgateway.Capability].
type capabilityEntry struct {
	Name        string          `json:"name"`
	Providers   []string        `json:"providers"`
	Pin         string          `json:"pin"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}
