package main

import (
	"bytes"
	"crypto/sha256"
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
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// fileConfig is the configuration file of docs/DESIGN.md, "refserver wire contract", as written.
type fileConfig struct {
	KeyPrefix *string `json:"key_prefix"`
	Retention string  `json:"retention"`
	// UnknownRetention keeps unknown records (and records of attempts in
	// flight) longer: their slot must not re-open soon.
	UnknownRetention string `json:"unknown_retention"`
	Lease            string `json:"lease"`
	// WaitReplicas is redisstore.Options.WaitReplicas: every reservation
	// waits until that many replicas acknowledged it.
	WaitReplicas int `json:"wait_replicas"`
	// DeploymentID is redisstore.Options.DeploymentID: the fleet's id in
	// every vendor key, kept stable when Redis is rebuilt.
	DeploymentID string `json:"deployment_id"`
	Environment  string `json:"environment"`
	// AllowUnsupportedWrites is effectspec.Policy.AllowUnsupportedWrites:
	// the explicit opt-in to writes whose vendor cannot deduplicate
	// (binding unsupported, every federated route) in production.
	AllowUnsupportedWrites bool              `json:"allow_unsupported_writes"`
	Workspaces             []workspaceConfig `json:"workspaces"`
	// ApproverKeys are approverConfig objects; a bare key (the form of
	// earlier drafts) is refused with an error that shows the object form.
	ApproverKeys []json.RawMessage  `json:"approver_keys"`
	Connections  []connectionConfig `json:"connections"`
	Brokers      []brokerConfig     `json:"brokers"`
	Tools        []json.RawMessage  `json:"tools"`
	Capabilities []capabilityConfig `json:"capabilities"`

	// MaxResponseBytes is retry.Executor.MaxBodyBytes of every vendor call
	// (0: retry.DefaultMaxBodyBytes, 10 MiB). A larger answer is not read:
	// its status is kept, its body dropped.
	MaxResponseBytes int64 `json:"max_response_bytes"`

	// DefaultQuota, each workspace's Quota and StoreFullFraction: quotaconfig.go.
	DefaultQuota      json.RawMessage `json:"default_quota"`
	StoreFullFraction *float64        `json:"store_full_fraction"`
}

type workspaceConfig struct {
	ID      string          `json:"id"`
	APIKeys []string        `json:"api_keys"`
	Quota   json.RawMessage `json:"quota"`
}

// approverConfig is one approver: a name, which is what a settlement
// records as its "by" and what the log lines of an approval or a pin name,
// and the key the approver authenticates with. The name follows the id rule
// of docs/DESIGN.md, "Scope and the Redis key", and is unique; the key is never recorded.
type approverConfig struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// approverForm is the form an approver_keys entry must have, shown in the
// error that refuses another.
const approverForm = `{"name": "ops-alice", "key": "..."}`

// connectionConfig is a native connection. Without secret_env its calls
// send no Authorization header.
type connectionConfig struct {
	ID        string `json:"id"`
	Provider  string `json:"provider"`
	BaseURL   string `json:"base_url"`
	SecretEnv string `json:"secret_env"`
}

type brokerConfig struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	BaseURL   string `json:"base_url"`
	SecretEnv string `json:"secret_env"`
}

type capabilityConfig struct {
	Name        string          `json:"name"`
	Providers   []string        `json:"providers"`
	Pin         string          `json:"pin"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Limits of the configuration. The store's options (key_prefix, retention,
// unknown_retention, lease, wait_replicas) take their defaults and bounds
// from redisstore (Options.Resolve); only the file's own are here.
const (
	// minLease is the file's floor for lease, stricter than the store's
	// (redisstore.MinLease).
	minLease       = time.Second
	maxConfigBytes = 4 << 20
	minAPIKeyLen   = 8
)

// config is a loaded, validated configuration: everything the server needs
// to dispatch, with secrets resolved. Secrets live only in the targets'
// headers and the brokers; nothing here is logged.
type config struct {
	// Prefix, Retention, UnknownRetention, Lease and WaitReplicas are the
	// store's options as redisstore.Options.Resolve resolved them: the
	// file's values, redisstore's defaults for those it leaves out.
	Prefix           string
	Retention        time.Duration
	UnknownRetention time.Duration
	Lease            time.Duration
	WaitReplicas     int
	DeploymentID     string // empty: the store adopts or makes the fleet's
	Environment      effectspec.Environment
	Policy           effectspec.Policy
	workspaces       map[[32]byte]string // sha256(api key) -> workspace id
	approvers        map[[32]byte]string // sha256(approver key) -> approver name
	Workspaces       []string            // ids, in file order
	Tools            map[string]*tool
	ToolOrder        []string // tool and capability names, in file order
	Capabilities     map[string]*capability
	Quotas           quotaSettings
	secrets          []string // every connection and broker secret, for redaction
	// keys are every API key and approver key: a settlement note is
	// scrubbed of them as of the secrets.
	keys []string
}

// tool is one configured tool: its spec and how a call reaches the vendor.
type tool struct {
	Name        string
	Description string
	Spec        effectspec.Spec
	// Connection is the scope's connection segment: the connection id of a
	// native tool, the broker id of a federated one.
	Connection string
	Route      idempotency.Route
	Target     retry.Target
	// Schema validates the arguments of every call. If nil, any object
	// passes and tools/list shows {"type": "object"}.
	Schema *inputSchema
}

// capability is a cap.* tool: a stable name over interchangeable providers.
// cap.* names are reserved for capabilities.
type capability struct {
	Name        string
	Description string
	Providers   []string
	Pin         string // initial pin; the live pin is in pins
	// Schema validates the arguments of every call to the capability,
	// before the pinned provider's own. If nil, only the provider's does.
	Schema *inputSchema
}

// configError is every problem of a configuration, one per line.
type configError struct{ problems []string }

func (e *configError) Error() string {
	return "refserver: config: " + strings.Join(e.problems, "\n  ")
}

// loadConfig parses and validates a configuration file. Besides the
// strict JSON (decodeStrict: also invalid UTF-8, lone surrogates and
// trailing data) it refuses invalid specs (every problem at once), ids
// and approver names that do not match [A-Za-z0-9_.-]{1,128}, an approver
// entry that is not a {"name", "key"} object, API keys shorter than 8 bytes
// or shared between workspaces and approvers, store options that
// redisstore.Options.Resolve refuses (named by the file's field), an
// unknown_retention that a tool's timeout plus the lease reaches, and a
// secret_env that names an unset or empty variable. Errors name the field
// path, never a value (a member name that is not a plain identifier shows
// as {member N}). getenv resolves secret_env names (os.LookupEnv in
// production). exec is shared by every native tool and broker.
func loadConfig(data []byte, getenv func(string) (string, bool), exec *retry.Executor) (*config, error) {
	if len(data) > maxConfigBytes {
		return nil, &configError{[]string{fmt.Sprintf("file larger than %d bytes", maxConfigBytes)}}
	}
	// encoding/json alone would accept a repeated member (the last wins)
	// and a name in another case ("WORKSPACES" matches "workspaces", so the
	// two merge); decodeStrict refuses both at every depth, and unknown
	// members, naming the path, never a value.
	var fc fileConfig
	if err := decodeStrict(data, &fc); err != nil {
		return nil, &configError{[]string{err.Error()}}
	}
	return fc.resolve(getenv, exec)
}

// loadConfigFile reads path and loads it with the process environment.
func loadConfigFile(path string, exec *retry.Executor) (*config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("refserver: config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("refserver: config: %w", err)
	}
	return loadConfig(data, os.LookupEnv, exec)
}

func (fc *fileConfig) resolve(getenv func(string) (string, bool), exec *retry.Executor) (*config, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	c := &config{
		workspaces:   map[[32]byte]string{},
		approvers:    map[[32]byte]string{},
		Tools:        map[string]*tool{},
		Capabilities: map[string]*capability{},
	}
	// The store's options: what the file sets, zero (redisstore's default)
	// for what it leaves out or gets wrong, resolved and checked by the
	// store's own rules, the ones New applies at start.
	opts := redisstore.Options{WaitReplicas: fc.WaitReplicas, ReadTimeout: storeReadTimeout, DeploymentID: fc.DeploymentID}
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
	c.Prefix, c.Retention, c.UnknownRetention, c.Lease, c.WaitReplicas =
		resolved.Prefix, resolved.Retention, resolved.UnknownRetention, resolved.Lease, resolved.WaitReplicas
	const maxResponseBytes = 1 << 30
	switch {
	case fc.MaxResponseBytes < 0 || fc.MaxResponseBytes > maxResponseBytes:
		bad("max_response_bytes: must be 0 (the default, %d) to %d", retry.DefaultMaxBodyBytes, maxResponseBytes)
	case exec != nil:
		exec.MaxBodyBytes = fc.MaxResponseBytes
	}
	if storeOK {
		c.DeploymentID = resolved.DeploymentID
	}
	env, err := effectspec.ParseEnvironment(fc.Environment)
	if err != nil {
		bad("environment: %s", trimErr(err))
	}
	c.Environment = env
	c.Policy = effectspec.Policy{Environment: env, AllowUnsupportedWrites: fc.AllowUnsupportedWrites}

	// Keys: workspace API keys and approver keys, all distinct.
	seenKey := map[[32]byte]string{}
	addKey := func(where, k string) ([32]byte, bool) {
		h := sha256.Sum256([]byte(k))
		if why := checkAPIKey(k); why != "" {
			bad("%s: %s", where, why)
			return h, false
		}
		if prev, dup := seenKey[h]; dup {
			bad("%s: the same key as %s", where, prev)
			return h, false
		}
		seenKey[h] = where
		c.keys = append(c.keys, k)
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
	c.Quotas, problems = quotas, append(problems, qp...)
	seenApprover := map[string]bool{}
	for i, raw := range fc.ApproverKeys {
		where := fmt.Sprintf("approver_keys[%d]", i)
		var ac approverConfig
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
		c.secrets = append(c.secrets, v)
		return v
	}

	conns := map[string]*connectionConfig{}
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
		conns[cc.ID] = cc
		connURLs[cc.ID] = u
		connSecrets[cc.ID] = secret(where, cc.SecretEnv, false)
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
		t, errs := resolveTool(i, raw, conns, connURLs, connSecrets, brokers, exec)
		problems = append(problems, errs...)
		if t == nil {
			continue
		}
		if c.Tools[t.Name] != nil {
			bad("tools[%d]: duplicate tool %s", i, t.Name)
			continue
		}
		// A reservation keeps its record for unknown_retention; the record
		// must outlive the attempt (its timeout) and the lease after it, or
		// the slot re-opens while the attempt may still reach the vendor.
		// Both are the store's resolved values; options it refuses are
		// reported above and give no bound to check against.
		if d := t.Spec.AttemptTimeout() + c.Lease; storeOK && d >= c.UnknownRetention {
			bad("tools[%d] (%s).spec.timeout: the timeout %s plus the lease %s must be less than unknown_retention (%s)",
				i, t.Name, t.Spec.AttemptTimeout(), c.Lease, c.UnknownRetention)
		}
		c.Tools[t.Name] = t
		c.ToolOrder = append(c.ToolOrder, t.Name)
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
		var schema *inputSchema
		if cp.InputSchema != nil {
			var why string
			if schema, why = parseInputSchema(cp.InputSchema); why != "" {
				bad("%s (%s).input_schema: %s", where, cp.Name, why)
				ok = false
			}
		}
		if ok {
			c.Capabilities[cp.Name] = &capability{Name: cp.Name, Description: cp.Description,
				Providers: slices.Clone(cp.Providers), Pin: cp.Pin, Schema: schema}
			c.ToolOrder = append(c.ToolOrder, cp.Name)
		}
	}

	if len(problems) > 0 {
		return nil, &configError{problems}
	}
	return c, nil
}

// toolEntry is the fixed part of a tool entry. A native tool has connection,
// method and path; a federated one names a configured broker, and every
// other member except spec, description and input_schema is a routing
// field of that broker (strings only), validated by the broker at start.
// The scope's connection segment of a federated call is the broker's id.
var nativeFields = []string{"connection", "method", "path", "spec", "description", "input_schema"}

func resolveTool(i int, raw json.RawMessage, conns map[string]*connectionConfig, urls map[string]*url.URL,
	secrets map[string]string, brokers map[string]broker.Broker, exec *retry.Executor) (*tool, []string) {
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
		var ve *effectspec.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
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
	t := &tool{Name: spec.Tool, Description: desc, Spec: spec}
	if raw, ok := m["input_schema"]; ok {
		var why string
		if t.Schema, why = parseInputSchema(raw); why != "" {
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

	for _, k := range sortedKeys(m) {
		if !slices.Contains(nativeFields, k) {
			bad(": unknown field %s (a native tool has connection, method, path, spec, description, input_schema)", quoteName(k))
		}
	}
	if spec.Route == effectspec.RouteFederated {
		bad(`.broker: required for a "federated" tool`)
	}
	connID, _ := str("connection")
	cc := conns[connID]
	if cc == nil {
		bad(".connection: no connection named %s", quoteName(connID))
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
	var oe *redisstore.OptionError
	if !errors.As(err, &oe) {
		return "store options: " + oneLine(err)
	}
	field, ok := optionFields[oe.Option]
	switch {
	case !ok:
		return "store options: " + trimText(strings.TrimPrefix(oe.Error(), redisstore.ErrInvalidOptions.Error()+": "))
	case oe.Option == "Prefix":
		return field + ": " + trimText(oe.Reason)
	case oe.Option == "WaitTimeout":
		// The bound is the store's; the file can only lengthen the lease.
		return field + ": the store's " + strings.TrimPrefix(oe.Error(), redisstore.ErrInvalidOptions.Error()+": ") + " (lengthen the lease)"
	case oe.Option == "Retention" && oe.Relative == "Lease":
		return fmt.Sprintf("%s: must be at least %d leases (%s)", field, redisstore.MinRetentionLeases, strings.TrimPrefix(oe.Reason, "must be at least "))
	}
	return field + ": " + oe.Reason
}

// checkAPIKey returns why k cannot be an API key, or "".
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

// workspace returns the workspace of an API key.
func (c *config) workspace(apiKey string) (string, bool) {
	ws, ok := c.workspaces[sha256.Sum256([]byte(apiKey))]
	return ws, ok
}

// approver returns the name of the approver whose key is k.
func (c *config) approver(k string) (name string, ok bool) {
	name, ok = c.approvers[sha256.Sum256([]byte(k))]
	return name, ok
}

// maxAttemptTimeout is the longest attempt timeout of any configured tool.
func (c *config) maxAttemptTimeout() time.Duration {
	var d time.Duration
	for _, t := range c.Tools {
		d = max(d, t.Spec.AttemptTimeout())
	}
	return d
}
