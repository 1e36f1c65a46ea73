package gatewayconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/composio"
	"github.com/obol-gateway/obol/broker/nango"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/baseurl"
	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// Limits of the configuration. The store's options (key_prefix, retention,
// unknown_retention, lease, wait_replicas) take their defaults and bounds
// from redisstore ([redisstore.Options.Resolve]); only the file's own are here.
const (
	// minLease is the file's floor for lease, stricter than the store's
	// (1ms).
	minLease       = time.Second
	maxConfigBytes = 4 << 20
	minAPIKeyLen   = 8
)

// Config is a loaded, validated configuration: everything a gateway needs to
// dispatch, with secrets resolved. Secrets live only in the targets' headers
// and the brokers, and in Secrets for redaction; nothing here is logged.
type Config struct {
	// Store is the store's options the file sets (Prefix, Retention,
	// UnknownRetention, Lease, WaitReplicas, DeploymentID) as
	// [redisstore.Options.Resolve] resolves them: the file's values,
	// redisstore's defaults for those it leaves out. The others are zero
	// (redisstore's defaults). DeploymentID empty: the store adopts or
	// makes the fleet's.
	Store       redisstore.Options
	Environment effectspec.Environment
	Policy      effectspec.Policy
	Workspaces  []string // ids, in file order
	Approvers   []string // names, in file order
	// Tools and Capabilities by name; ToolOrder is their names in file
	// order (the tools, then the capabilities).
	Tools        map[string]*mcpgateway.Tool
	Capabilities map[string]*mcpgateway.Capability
	ToolOrder    []string
	// Secrets is every connection and broker secret, then every API key,
	// approver key and the metrics_token: what a [receipt.Redactor] scrubs
	// from logs and notes.
	Secrets []string
	// quotas are default_quota, every workspace's quota (its own members
	// over default_quota's) and store_full_fraction, as [Config.Gateway]
	// sets them on [mcpgateway.Config]. When a workspace limits its stored
	// bytes, Store.AccountBytes is set too.
	quotas quotaSettings
	// MaxAttempts is max_attempts, resolved: [retry.Orchestrator].MaxAttempts,
	// the max_attempts of every tool whose spec sets none.
	MaxAttempts int

	workspaces map[[32]byte]string // sha256(api key) -> workspace id
	approvers  map[[32]byte]string // sha256(approver key) -> approver name
	metrics    *[32]byte           // sha256(metrics_token); nil: metrics are open
}

// Options are what Load needs besides the file.
type Options struct {
	// Getenv resolves secret_env names; nil: [os.LookupEnv].
	Getenv func(name string) (string, bool)
	// Executor sends every native tool's and broker's attempts; Load sets
	// its MaxResponseBytes from max_response_bytes. Nil: a new one.
	Executor *retry.Executor
}

// Load parses and validates a configuration file. Besides the strict JSON
// (also invalid UTF-8, lone surrogates and trailing data) it refuses invalid
// specs (every problem at once), ids and approver names that do not match
// [A-Za-z0-9_.-]{1,128}, an approver entry that is not a {"name", "key"}
// object, API keys shorter than 8 bytes or shared between workspaces,
// approvers and the metrics_token, store options that redisstore refuses (named by the file's
// field), an unknown_retention that a tool's timeout plus the lease reaches,
// and a secret_env that names an unset or empty variable. The error wraps
// [ErrInvalidConfig].
func Load(data []byte, opt Options) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, &configError{problems: []string{fmt.Sprintf("file larger than %d bytes", maxConfigBytes)}}
	}
	// encoding/json alone would accept a repeated member (the last wins)
	// and a name in another case ("WORKSPACES" matches "workspaces", so the
	// two merge); decodeStrict refuses both at every depth, and unknown
	// members, naming the path, never a value.
	var fc fileFormat
	if err := decodeStrict(data, &fc); err != nil {
		return nil, &configError{problems: []string{err.Error()}}
	}
	if opt.Getenv == nil {
		opt.Getenv = os.LookupEnv
	}
	if opt.Executor == nil {
		opt.Executor = &retry.Executor{}
	}
	return fc.resolve(opt.Getenv, opt.Executor)
}

// LoadFile reads the file at path, unless ctx is done, and loads it (see
// [Load]). A file that cannot be read is an error that wraps
// [ErrInvalidConfig] and the read error.
func LoadFile(ctx context.Context, path string, opt Options) (*Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, &configError{problems: []string{err.Error()}, err: err}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &configError{problems: []string{err.Error()}, err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, &configError{problems: []string{err.Error()}, err: err}
	}
	return Load(data, opt)
}

// Gateway is the part of an [mcpgateway.Config] the file decides: the tools
// and capabilities in file order, authentication by API key, and redaction
// of every secret and key. The caller adds the Orchestrator (on a store
// opened with Store, under Policy) and its hooks.
func (c *Config) Gateway() mcpgateway.Config {
	gc := mcpgateway.Config{Authenticate: c.Workspace, Redact: receipt.NewRedactor(c.Secrets...).String,
		DefaultQuota: c.quotas.Default, Quotas: c.quotas.Workspaces, StoreFullFraction: c.quotas.StoreFullFraction}
	for _, name := range c.ToolOrder {
		if t := c.Tools[name]; t != nil {
			gc.Tools = append(gc.Tools, *t)
		} else {
			gc.Capabilities = append(gc.Capabilities, *c.Capabilities[name])
		}
	}
	return gc
}

// Workspace returns the workspace of an API key.
func (c *Config) Workspace(apiKey string) (string, bool) {
	ws, ok := c.workspaces[sha256.Sum256([]byte(apiKey))]
	return ws, ok
}

// MetricsTokenRequired reports whether the file sets metrics_token.
func (c *Config) MetricsTokenRequired() bool { return c.metrics != nil }

// MetricsToken reports whether tok is the metrics_token; without one, any
// tok (none included) is. Digests are compared, in constant time.
func (c *Config) MetricsToken(tok string) bool {
	if c.metrics == nil {
		return true
	}
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], c.metrics[:]) == 1
}

// Approver returns the name of the approver whose key is k.
func (c *Config) Approver(k string) (name string, ok bool) {
	name, ok = c.approvers[sha256.Sum256([]byte(k))]
	return name, ok
}

func (fc *fileFormat) resolve(getenv func(string) (string, bool), exec *retry.Executor) (*Config, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	c := &Config{
		workspaces:   map[[32]byte]string{},
		approvers:    map[[32]byte]string{},
		Tools:        map[string]*mcpgateway.Tool{},
		Capabilities: map[string]*mcpgateway.Capability{},
	}
	// The store's options: what the file sets, zero (redisstore's default)
	// for what it leaves out or gets wrong, resolved and checked by the
	// store's own rules, the ones New applies at start.
	opts := redisstore.Options{WaitReplicas: fc.WaitReplicas, DeploymentID: fc.DeploymentID}
	if fc.KeyPrefix != nil {
		opts.Prefix = *fc.KeyPrefix
	}
	opts.Retention = parseDuration(fc.Retention, "retention", bad)
	opts.UnknownRetention = parseDuration(fc.UnknownRetention, "unknown_retention", bad)
	opts.Lease = parseDuration(fc.Lease, "lease", bad)
	if opts.Lease != 0 && opts.Lease < minLease {
		bad("lease: must be at least %s", minLease)
	}
	resolved, err := opts.Resolve()
	storeOK := err == nil
	if err != nil {
		bad("%s", optionProblem(err))
	}
	c.Store = redisstore.Options{Prefix: resolved.Prefix, Retention: resolved.Retention,
		UnknownRetention: resolved.UnknownRetention, Lease: resolved.Lease, WaitReplicas: resolved.WaitReplicas}
	const maxResponseBytes = 1 << 30
	switch {
	case fc.MaxResponseBytes < 0 || fc.MaxResponseBytes > maxResponseBytes:
		bad("max_response_bytes: must be 0 (the default, %d) to %d", retry.DefaultMaxResponseBytes, maxResponseBytes)
	case exec != nil:
		exec.MaxResponseBytes = fc.MaxResponseBytes
	}
	switch {
	case fc.MaxAttempts < 0 || fc.MaxAttempts > effectspec.MaxMaxAttempts:
		bad("max_attempts: must be 0 (the default, %d) to %d", effectspec.DefaultMaxAttempts, effectspec.MaxMaxAttempts)
	case fc.MaxAttempts == 0:
		c.MaxAttempts = effectspec.DefaultMaxAttempts
	default:
		c.MaxAttempts = fc.MaxAttempts
	}
	if storeOK {
		c.Store.DeploymentID = resolved.DeploymentID
	}
	env, err := effectspec.ParseEnvironment(fc.Environment)
	if err != nil {
		bad("environment: %s", trimErr(err))
	}
	c.Environment = env
	c.Policy = effectspec.Policy{Environment: env, AllowUnsupportedWrites: fc.AllowUnsupportedWrites}

	// Keys: workspace API keys and approver keys, all distinct.
	var secrets, keys []string
	seenKey := map[[32]byte]string{}
	addKey := func(where, k string) ([32]byte, bool) {
		h := sha256.Sum256([]byte(k))
		if why := checkAPIKey(k); why != "" {
			bad("%s: %s", where, why)
			return h, false
		}
		if strings.Contains(k, placeholderMark) && (env == effectspec.Production || env == effectspec.Staging) {
			// Never the value: it is a key, if a published one.
			bad("%s: the template's %s placeholder: replace it with a key of your own (%s refuses it)", where, placeholderMark, env)
			return h, false
		}
		if prev, dup := seenKey[h]; dup {
			bad("%s: the same key as %s", where, prev)
			return h, false
		}
		seenKey[h] = where
		keys = append(keys, k)
		return h, true
	}
	if len(fc.Workspaces) == 0 {
		bad("workspaces: at least one is required")
	}
	seenWS := map[string]bool{}
	for i, ws := range fc.Workspaces {
		where := fmt.Sprintf("workspaces[%d]", i)
		if err := validSegment(ws.ID); err != "" {
			bad("%s.id: %s", where, err)
		} else if seenWS[ws.ID] {
			bad("%s.id: duplicate workspace %s", where, ws.ID)
		}
		seenWS[ws.ID] = true
		c.Workspaces = append(c.Workspaces, ws.ID)
		if len(ws.APIKeys) == 0 {
			bad("%s.api_keys: at least one is required", where)
		}
		for j, k := range ws.APIKeys {
			if h, ok := addKey(fmt.Sprintf("%s.api_keys[%d]", where, j), k); ok {
				c.workspaces[h] = ws.ID
			}
		}
	}
	quotas, qp := parseQuotas(fc.DefaultQuota, fc.StoreFullFraction, c.Workspaces, workspaceQuotas(fc.Workspaces))
	c.quotas, problems = quotas, append(problems, qp...)
	c.Store.AccountBytes = quotas.accountBytes()
	seenApprover := map[string]bool{}
	for i, raw := range fc.ApproverKeys {
		where := fmt.Sprintf("approver_keys[%d]", i)
		var ac approverEntry
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			// Never the value: it may be a key.
			bad("%s: must be an object %s (a bare key is no longer accepted: name the approver)", where, approverForm)
			continue
		}
		if err := decodeStrict(raw, &ac); err != nil {
			bad("%s: %s (want %s)", where, err, approverForm)
			continue
		}
		nameOK := true
		if why := validSegment(ac.Name); why != "" {
			bad("%s.name: %s", where, why)
			nameOK = false
		} else if seenApprover[ac.Name] {
			bad("%s.name: duplicate approver %s", where, ac.Name)
			nameOK = false
		}
		seenApprover[ac.Name] = true
		if h, ok := addKey(where+".key", ac.Key); ok && nameOK {
			c.approvers[h] = ac.Name
			c.Approvers = append(c.Approvers, ac.Name)
		}
	}

	if fc.MetricsToken != "" {
		if h, ok := addKey("metrics_token", fc.MetricsToken); ok {
			c.metrics = &h
		}
	}

	secret := func(where, name string, required bool) string {
		if name == "" {
			if required {
				bad("%s.secret_env: required", where)
			}
			return ""
		}
		if !validEnvName(name) {
			bad("%s.secret_env: %s is not an environment variable name", where, strconv.Quote(truncate(name)))
			return ""
		}
		v, ok := getenv(name)
		if !ok || v == "" {
			bad("%s.secret_env: environment variable %s is not set", where, name)
			return ""
		}
		if receipt.CheckSecret(v) != nil {
			// Vendor answers are scrubbed of every secret; a shorter one
			// could not be replaced without corrupting them.
			bad("%s.secret_env: environment variable %s holds fewer than %d bytes", where, name, receipt.MinSecretLen)
			return ""
		}
		secrets = append(secrets, v)
		return v
	}

	conns := map[string]*connectionEntry{}
	upstreams := map[string]*retry.MCPUpstream{}
	connSecrets := map[string]string{}
	connURLs := map[string]*url.URL{}
	for i := range fc.Connections {
		cc := &fc.Connections[i]
		where := fmt.Sprintf("connections[%d]", i)
		if why := validSegment(cc.ID); why != "" {
			bad("%s.id: %s", where, why)
		} else if cc.ID == idempotency.Unresolved {
			bad("%s.id: %q is reserved for capability calls", where, idempotency.Unresolved)
		} else if conns[cc.ID] != nil {
			bad("%s.id: duplicate connection %s", where, cc.ID)
		}
		if why := validSegment(cc.Provider); why != "" {
			bad("%s.provider: %s", where, why)
		}
		u, err := baseurl.Parse(cc.BaseURL)
		switch {
		case errors.Is(err, baseurl.ErrCredentials):
			bad("%s.base_url: %v (use secret_env)", where, err)
		case err != nil:
			bad("%s.base_url: %v", where, err)
		}
		switch cc.Protocol {
		case "":
			cc.Protocol = protocolHTTP
		case protocolHTTP, protocolMCP:
		default:
			bad("%s.protocol: %s is not %q or %q", where, strconv.Quote(truncate(cc.Protocol)), protocolHTTP, protocolMCP)
		}
		conns[cc.ID] = cc
		connURLs[cc.ID] = u
		connSecrets[cc.ID] = secret(where, cc.SecretEnv, false)
		if cc.Protocol == protocolMCP && u != nil {
			// One per upstream server: it keeps what the server said once
			// (discovery, a session) for every tool of it.
			up := &retry.MCPUpstream{URL: u.String(), Executor: exec}
			if s := connSecrets[cc.ID]; s != "" {
				up.Header = http.Header{"Authorization": {"Bearer " + s}}
			}
			upstreams[cc.ID] = up
		}
	}

	brokers := map[string]broker.Broker{}
	for i, bc := range fc.Brokers {
		where := fmt.Sprintf("brokers[%d]", i)
		if why := validSegment(bc.ID); why != "" {
			bad("%s.id: %s", where, why)
			continue
		}
		if _, dup := brokers[bc.ID]; dup || conns[bc.ID] != nil {
			bad("%s.id: %s is already a broker or connection id", where, bc.ID)
			continue
		}
		sec := secret(where, bc.SecretEnv, true)
		var (
			b   broker.Broker
			err error
		)
		switch bc.Kind {
		case nango.Kind:
			b, err = nango.New(nango.Config{BaseURL: bc.BaseURL, Secret: sec, Executor: exec})
		case composio.Kind:
			b, err = composio.New(composio.Config{BaseURL: bc.BaseURL, APIKey: sec, Executor: exec})
		default:
			bad("%s.kind: want %q or %q", where, nango.Kind, composio.Kind)
			continue
		}
		if err != nil {
			if sec != "" { // a missing secret is already reported
				bad("%s: %s", where, oneLine(err))
			}
			continue
		}
		brokers[bc.ID] = b
	}

	for i, raw := range fc.Tools {
		t, errs := resolveTool(i, raw, conns, connURLs, connSecrets, upstreams, brokers, exec)
		problems = append(problems, errs...)
		if t == nil {
			continue
		}
		if c.Tools[t.Spec.Tool] != nil {
			bad("tools[%d]: duplicate tool %s", i, t.Spec.Tool)
			continue
		}
		// A reservation keeps its record for unknown_retention; the record
		// must outlive the attempt (its timeout) and the lease after it, or
		// the slot re-opens while the attempt may still reach the vendor.
		// Both are the store's resolved values; options it refuses are
		// reported above and give no bound to check against.
		if d := t.Spec.AttemptTimeout() + c.Store.Lease; storeOK && d >= c.Store.UnknownRetention {
			bad("tools[%d] (%s).spec.timeout: the timeout %s plus the lease %s must be less than unknown_retention (%s)",
				i, t.Spec.Tool, t.Spec.AttemptTimeout(), c.Store.Lease, c.Store.UnknownRetention)
		}
		c.Tools[t.Spec.Tool] = t
		c.ToolOrder = append(c.ToolOrder, t.Spec.Tool)
	}
	if len(fc.Tools) == 0 {
		bad("tools: at least one is required")
	}

	for i, cp := range fc.Capabilities {
		where := fmt.Sprintf("capabilities[%d]", i)
		if !strings.HasPrefix(cp.Name, "cap.") || !ident.Valid(cp.Name) {
			bad("%s.name: must be cap. followed by a tool name ([A-Za-z0-9_.-], at most 128 bytes)", where)
			continue
		}
		if c.Capabilities[cp.Name] != nil || c.Tools[cp.Name] != nil {
			bad("%s.name: duplicate tool %s", where, cp.Name)
			continue
		}
		if len(cp.Providers) == 0 {
			bad("%s.providers: at least one is required", where)
		}
		ok := len(cp.Providers) > 0
		for j, p := range cp.Providers {
			switch {
			case c.Tools[p] == nil:
				bad("%s.providers[%d]: no tool named %s", where, j, quoteName(p))
				ok = false
			case slices.Index(cp.Providers, p) != j:
				bad("%s.providers[%d]: %s is listed twice", where, j, p)
				ok = false
			}
		}
		if !slices.Contains(cp.Providers, cp.Pin) {
			bad("%s.pin: must be one of the providers", where)
			ok = false
		}
		var schema *mcpgateway.InputSchema
		if cp.InputSchema != nil {
			var why string
			if schema, why = parseInputSchema(cp.InputSchema); why != "" {
				bad("%s (%s).input_schema: %s", where, cp.Name, why)
				ok = false
			}
		}
		if ok {
			c.Capabilities[cp.Name] = &mcpgateway.Capability{Name: cp.Name, Description: cp.Description,
				Providers: slices.Clone(cp.Providers), Pin: cp.Pin, InputSchema: schema}
			c.ToolOrder = append(c.ToolOrder, cp.Name)
		}
	}

	if len(problems) > 0 {
		return nil, &configError{problems: problems}
	}
	c.Secrets = slices.Concat(secrets, keys)
	return c, nil
}

// toolEntry is the fixed part of a tool entry. A native tool has connection,
// method and path; a federated one names a configured broker, and every
// other member except spec, description and input_schema is a routing
// field of that broker (strings only), validated by the broker at start.
// The scope's connection segment of a federated call is the broker's id.
var nativeFields = []string{"connection", "method", "path", "spec", "description", "input_schema"}

func resolveTool(i int, raw json.RawMessage, conns map[string]*connectionEntry, urls map[string]*url.URL,
	secrets map[string]string, upstreams map[string]*retry.MCPUpstream, brokers map[string]broker.Broker,
	exec *retry.Executor) (*mcpgateway.Tool, []string) {
	var problems []string
	where := fmt.Sprintf("tools[%d]", i)
	bad := func(format string, args ...any) {
		problems = append(problems, where+fmt.Sprintf(format, args...))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		bad(": must be a JSON object")
		return nil, problems
	}
	str := func(name string) (string, bool) {
		v, ok := m[name]
		if !ok {
			return "", false
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			bad(".%s: must be a string", name)
			return "", false
		}
		return s, true
	}
	specRaw, ok := m["spec"]
	if !ok {
		bad(".spec: required")
		return nil, problems
	}
	spec, err := effectspec.Parse(specRaw)
	if err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, p := range j.Unwrap() {
				bad(".spec: %s", p.Error())
			}
		} else {
			bad(".spec: %s", err)
		}
		return nil, problems
	}
	where = fmt.Sprintf("tools[%d] (%s)", i, spec.Tool)
	if strings.HasPrefix(spec.Tool, "cap.") {
		bad(".spec.tool: the cap. prefix is reserved for capabilities")
	}
	desc, _ := str("description")
	t := &mcpgateway.Tool{Description: desc, Spec: spec}
	if raw, ok := m["input_schema"]; ok {
		var why string
		if t.InputSchema, why = parseInputSchema(raw); why != "" {
			bad(".input_schema: %s", why)
		}
	}

	if brokerID, isFederated := str("broker"); isFederated {
		if spec.Route != effectspec.RouteFederated {
			bad(`.spec.route: a tool with "broker" must be "federated"`)
		}
		if err := broker.ValidateSpec(spec); err != nil && spec.Route == effectspec.RouteFederated {
			bad(": %s", oneLine(err))
		}
		b := brokers[brokerID]
		if b == nil {
			bad(".broker: no broker named %s", quoteName(brokerID))
			return nil, problems
		}
		routing := map[string]string{}
		for _, k := range sortedKeys(m) {
			switch k {
			case "broker", "spec", "description", "input_schema":
				continue
			}
			var s string
			if err := json.Unmarshal(m[k], &s); err != nil {
				bad(".%s: a routing field must be a string", quoteName(k))
				continue
			}
			routing[k] = s
		}
		target, rt, err := broker.Prepare(b, spec.Tool, routing)
		if err != nil {
			bad(": %s", oneLine(err))
			return nil, problems
		}
		t.Connection = brokerID
		t.Route = rt
		t.Target = target
		if len(problems) > 0 {
			return nil, problems
		}
		return t, nil
	}

	if spec.Route == effectspec.RouteFederated {
		bad(`.broker: required for a "federated" tool`)
	}
	connID, _ := str("connection")
	cc := conns[connID]
	if cc == nil {
		bad(".connection: no connection named %s", quoteName(connID))
	}
	if cc != nil && cc.Protocol == protocolMCP {
		resolveMCPTool(t, m, cc, urls[connID], upstreams[connID], len(problems) == 0, bad)
		if len(problems) > 0 {
			return nil, problems
		}
		return t, nil
	}
	for _, k := range sortedKeys(m) {
		switch {
		case k == "upstream_tool" && cc != nil:
			bad(".upstream_tool: only a tool of an MCP connection (\"protocol\": \"mcp\") names an upstream tool; %s is an HTTP connection", connID)
		case !slices.Contains(nativeFields, k):
			bad(": unknown field %s (a native tool has connection, method, path, spec, description, input_schema; "+
				"a tool of an MCP connection has upstream_tool instead of method and path)", quoteName(k))
		}
	}
	switch {
	case spec.Idempotency.Kind == effectspec.BindingMeta:
		bad(".spec.idempotency.binding: meta is only for a tool of an MCP connection (\"protocol\": \"mcp\")")
	case spec.Status.ToolError != "":
		bad(".spec.status.tool_error: only for a tool of an MCP connection (\"protocol\": \"mcp\")")
	}
	method, hasMethod := str("method")
	if !hasMethod {
		method = http.MethodPost
	}
	if !validMethod(method) {
		bad(".method: must be an upper-case HTTP method token")
	}
	path, _ := str("path")
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \t\r\n") {
		bad(".path: must start with / and hold no query, fragment or whitespace")
	}
	if len(problems) > 0 || cc == nil {
		return nil, problems
	}
	base := urls[connID]
	if base == nil {
		return nil, problems // base_url already reported
	}
	target := &retry.HTTPTarget{Executor: exec, Method: method, URL: base.String() + path}
	if s := secrets[connID]; s != "" {
		// The target reports this credential (retry.SecretHolder), so the
		// orchestrator scrubs it from every answer the vendor echoes it in.
		target.Header = http.Header{"Authorization": {"Bearer " + s}}
	}
	t.Connection = connID
	t.Target = target
	// The fingerprint's facts come from the one constructor: the scheme,
	// host and path of the URL the target sends to, the binding's name from
	// the spec, and the vendor account from the secret's variable name.
	credential := cc.SecretEnv
	if credential == "" {
		credential = idempotency.NoCredential // no Authorization is sent
	}
	rt, err := idempotency.NewRoute(spec, idempotency.RouteTarget{
		Connection: connID,
		Provider:   cc.Provider,
		Method:     method,
		URL:        base.Scheme + "://" + base.Host + base.Path + path,
		Credential: credential,
	})
	if err != nil {
		bad(": %s", oneLine(err))
		return nil, problems
	}
	t.Route = rt
	return t, nil
}

// parseDuration parses a duration of the store's options: 0, which is
// the store's default, when s is empty or refused.
func parseDuration(s string, field string, bad func(string, ...any)) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		bad("%s: %s is not a positive duration such as \"30s\"", field, strconv.Quote(truncate(s)))
		return 0
	}
	return d
}

// optionFields is the file's field of each redisstore option it sets.
// WaitTimeout is not in the file: the store's default bounds the WAIT that
// wait_replicas asks for.
var optionFields = map[string]string{
	"Prefix":           "key_prefix",
	"Retention":        "retention",
	"UnknownRetention": "unknown_retention",
	"Lease":            "lease",
	"WaitReplicas":     "wait_replicas",
	"WaitTimeout":      "wait_replicas",
	"DeploymentID":     "deployment_id",
}

// optionProblem is the store's refusal of its options (Options.Resolve) in
// the file's terms: the field first.
func optionProblem(err error) string {
	var fe *effectspec.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, redisstore.ErrInvalidConfig) {
		return "store options: " + oneLine(err)
	}
	field, ok := optionFields[fe.Field]
	switch {
	case !ok:
		return "store options: " + fe.Field + ": " + fe.Problem
	case fe.Field == "Prefix":
		// The idempotency package's refusal, which the store wraps.
		return field + ": " + trimText(strings.TrimPrefix(fe.Err.Error(), redisstore.ErrInvalidConfig.Error()+": "))
	case fe.Field == "WaitTimeout":
		// The bound is the store's, its default; the file can only
		// lengthen the lease.
		d, _ := redisstore.Options{}.Resolve()
		return fmt.Sprintf("%s: the store's wait timeout %v: %s (lengthen the lease)", field, d.WaitTimeout, fe.Problem)
	case fe.Field == "Retention" && strings.HasPrefix(fe.Problem, "must be at least "):
		// The one bound relative to the lease.
		return fmt.Sprintf("%s: must be at least %d leases (%s)", field, redisstore.MinRetentionLeases, strings.TrimPrefix(fe.Problem, "must be at least "))
	}
	return field + ": " + fe.Problem
}

// checkAPIKey returns why k cannot be an API key, or "".
// placeholderMark marks the keys of a shipped template (examples/obol.json):
// published, so anyone may know them. Production and staging refuse a key
// that holds it, so a template cannot go live by accident.
const placeholderMark = "REPLACE_ME"

func checkAPIKey(k string) string {
	if len(k) < minAPIKeyLen || len(k) > 256 {
		return fmt.Sprintf("must be %d to 256 bytes", minAPIKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return "must be printable ASCII without spaces"
		}
	}
	return ""
}

func validSegment(s string) string {
	if !ident.Valid(s) {
		return "must be 1 to 128 of [A-Za-z0-9_.-]"
	}
	return ""
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 'A' || m[i] > 'Z' {
			return false
		}
	}
	return true
}

// quoteName shows a name in an error: as is when it is a valid tool name,
// quoted and cut short otherwise.
func quoteName(s string) string {
	if ident.Valid(s) {
		return s
	}
	return strconv.Quote(truncate(s))
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func trimErr(err error) string { return trimText(err.Error()) }

func trimText(s string) string {
	for _, p := range []string{"idempotency: ", "effectspec: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// mcpFields are the members of a tool entry of an MCP connection.
var mcpFields = []string{"connection", "upstream_tool", "spec", "description", "input_schema"}

// resolveMCPTool resolves t, a tool of the MCP connection cc whose endpoint
// is base, to a call of its upstream tool through up (docs/DESIGN.md,
// "MCP upstreams"), reporting its problems to bad; ok says the entry had
// none before. Its spec's binding is meta, body_pointer (into the tool's
// arguments) or unsupported, and it lists no HTTP status: the MCP route
// classifies the upstream's answers itself.
func resolveMCPTool(t *mcpgateway.Tool, m map[string]json.RawMessage, cc *connectionEntry, base *url.URL,
	up *retry.MCPUpstream, ok bool, report func(string, ...any)) {
	bad := func(format string, args ...any) {
		ok = false
		report(format, args...)
	}
	spec := t.Spec
	for _, k := range sortedKeys(m) {
		switch {
		case k == "method" || k == "path":
			bad(".%s: not for a tool of an MCP connection (%s); name the upstream's tool with upstream_tool", k, cc.ID)
		case !slices.Contains(mcpFields, k):
			bad(": unknown field %s (a tool of an MCP connection has connection, upstream_tool, spec, description, input_schema)", quoteName(k))
		}
	}
	name := spec.Tool
	if raw, ok := m["upstream_tool"]; ok {
		if err := json.Unmarshal(raw, &name); err != nil {
			bad(".upstream_tool: must be a string")
		} else if why := validSegment(name); why != "" {
			bad(".upstream_tool: %s", why)
		}
	}
	switch spec.Idempotency.Kind {
	case effectspec.BindingMeta, effectspec.BindingBodyPointer, effectspec.BindingUnsupported, "":
	case effectspec.BindingHeader:
		bad(".spec.idempotency.binding: header is refused for a tool of an MCP connection: the upstream's tool never sees " +
			"the HTTP headers of the gateway's POST; use meta (the key in params._meta) or body_pointer (into the arguments)")
	default:
		bad(".spec.idempotency.binding: a tool of an MCP connection takes meta, body_pointer or unsupported")
	}
	for _, l := range []struct {
		field string
		codes []int
	}{{"accepted", spec.Status.Accepted}, {"definitely_rejected", spec.Status.DefinitelyRejected},
		{"retryable", spec.Status.Retryable}, {"in_use", spec.Status.InUse}} {
		if len(l.codes) > 0 {
			bad(".spec.status.%s: not for a tool of an MCP connection: its answers are classified by the MCP route "+
				"(status.tool_error says what a result with isError true is)", l.field)
		}
	}
	switch spec.Status.ToolError {
	case "", effectspec.DefinitelyRejected, effectspec.Unknown:
	default:
		bad(".spec.status.tool_error: must be %q or %q", effectspec.DefinitelyRejected, effectspec.Unknown)
	}
	if !ok || base == nil || up == nil {
		return // base_url is reported where it is
	}
	credential := cc.SecretEnv
	if credential == "" {
		credential = idempotency.NoCredential
	}
	rt, err := idempotency.NewRoute(spec, idempotency.RouteTarget{
		Connection:   cc.ID,
		Provider:     cc.Provider,
		URL:          base.Scheme + "://" + base.Host + base.Path,
		Credential:   credential,
		UpstreamTool: name,
	})
	if err != nil {
		bad(": %s", oneLine(err))
		return
	}
	t.Connection, t.Route, t.Target, t.Upstream = cc.ID, rt, up.Target(name), up
}
