package nango

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/brokerkit"
	"github.com/obol-gateway/obol/retry"
)

// Kind is the broker kind in a Route and in refserver configuration.
const Kind = "nango"

// Routing field names.
const (
	fieldConnectionID      = "connection_id"       // Connection-Id header; required
	fieldProviderConfigKey = "provider_config_key" // Provider-Config-Key header; required
	fieldPath              = "path"                // proxy: the vendor path, with an optional query
	fieldMethod            = "method"              // proxy: GET, POST, PUT, PATCH or DELETE; default POST
	fieldAction            = "action"              // action: the action name
)

// Config configures the adapter. Only BaseURL and Secret are needed; the retry
// fields exist so that a configuration which asks Nango to retry is refused
// loudly instead of being ignored.
type Config struct {
	// BaseURL is Nango's API root, such as "https://api.nango.dev" or a
	// self-hosted instance. Required: http or https, a host, no userinfo,
	// query or fragment. A path prefix is kept.
	BaseURL string

	// Secret is the Nango environment secret key, sent as
	// "Authorization: Bearer <Secret>". Required. The caller reads it from
	// the environment; it never appears in an error, in String or in a log
	// value of Config.
	Secret string

	// Retries is Nango's proxy retry count. It must be 0: the adapter sends
	// "Retries: 0" on every call whatever the value, and New refuses any
	// other.
	Retries int

	// RetryOn lists statuses Nango's proxy would retry on. It must be empty:
	// the adapter never sends Retry-On.
	RetryOn []int

	// Async triggers actions asynchronously. It must be false: the adapter
	// sends "X-Async: false".
	Async bool

	// MaxRetries is the X-Max-Retries of asynchronous actions. It must be 0:
	// the adapter never sends X-Max-Retries.
	MaxRetries int

	// Executor sends each request. If nil, the adapter uses its own zero
	// retry.Executor. Share one Executor with the native routes to share
	// its limits and keep-alive connections.
	Executor *retry.Executor
}

// String describes c with the secret redacted.
func (c Config) String() string {
	return fmt.Sprintf("nango.Config{BaseURL:%q Secret:%s Retries:%d RetryOn:%v Async:%t MaxRetries:%d}",
		c.BaseURL, redacted(c.Secret), c.Retries, c.RetryOn, c.Async, c.MaxRetries)
}

// GoString is String, so %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// LogValue logs c with the secret redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("secret", redacted(c.Secret)),
		slog.Int("retries", c.Retries),
		slog.Any("retry_on", c.RetryOn),
		slog.Bool("async", c.Async),
		slog.Int("max_retries", c.MaxRetries),
	)
}

func redacted(secret string) string {
	if secret == "" {
		return `""`
	}
	return "[redacted]"
}

// adapter dispatches federated calls through Nango.
type adapter struct {
	base   *url.URL
	secret string
	exec   *retry.Executor
	core   brokerkit.Adapter[route]
}

var _ broker.Broker = (*adapter)(nil)

// New validates cfg and returns the [broker.Broker] that dispatches
// federated calls through Nango, the proxy or synchronous actions, safe
// for concurrent use. Its Route returns the Nango connection and
// integration, the method and the path under the base URL (an action's
// is "/action/trigger/" and the escaped action name, so that another
// action is another destination); its Dispatch returns the Executor's
// Result unchanged, and it reports the secret key as its Secrets, so that
// it is scrubbed from every answer.
//
// Every problem of cfg is reported at once (errors.Join of
// [*effectspec.FieldError]); none names the secret.
func New(cfg Config) (broker.Broker, error) {
	p := brokerkit.Problems{Broker: Kind}
	base := p.BaseURL(cfg.BaseURL, "Secret")
	p.Secret("Secret", cfg.Secret)
	if cfg.Retries != 0 {
		p.Add("Retries", fmt.Sprintf("is %d, must be 0: the gateway owns every retry", cfg.Retries), broker.ErrRetriesEnabled)
	}
	if len(cfg.RetryOn) != 0 {
		p.Add("RetryOn", "must be empty: the gateway owns every retry", broker.ErrRetriesEnabled)
	}
	if cfg.Async {
		msg := "must be false: an asynchronous trigger does not report the outcome"
		if cfg.MaxRetries != 0 {
			msg += ", and Nango would retry it"
		}
		p.Add("Async", msg, broker.ErrAsync)
	}
	if cfg.MaxRetries != 0 {
		p.Add("MaxRetries", fmt.Sprintf("is %d, must be 0: the gateway owns every retry", cfg.MaxRetries), broker.ErrRetriesEnabled)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	b := &adapter{base: base, secret: cfg.Secret, exec: cmp.Or(cfg.Executor, new(retry.Executor))}
	b.core = brokerkit.Adapter[route]{Parse: parseRouting, Resolve: b.route, Send: b.send, Secrets: b.Secrets}
	return b, nil
}

// Secrets returns the Nango secret key, the one credential the adapter sends,
// so that it is scrubbed from every answer (broker.Target reports it).
func (b *adapter) Secrets() []string { return []string{b.secret} }

// route is a validated set of routing fields.
type route struct {
	connection string
	provider   string
	method     string // proxy
	path       string // proxy, without the leading slash
	action     string // action
}

func (r route) isAction() bool { return r.action != "" }

// parseRouting validates a routing: a proxy path or an action, never both.
// The proxy method defaults to POST and must be GET, POST, PUT, PATCH or
// DELETE (the methods the proxy serves); an action takes no method.
// Connection-Id and Provider-Config-Key must be printable ASCII without
// spaces, at most 256 bytes; an action name, printable text.
func parseRouting(routing map[string]string) (route, error) {
	p := brokerkit.Problems{Broker: Kind}
	p.Fields(routing, fieldConnectionID, fieldProviderConfigKey, fieldPath, fieldMethod, fieldAction)
	r := route{connection: routing[fieldConnectionID], provider: routing[fieldProviderConfigKey]}
	p.ID(fieldConnectionID, r.connection)
	p.ID(fieldProviderConfigKey, r.provider)
	path, hasPath := routing[fieldPath]
	method, hasMethod := routing[fieldMethod]
	action, hasAction := routing[fieldAction]
	switch {
	case hasPath && hasAction:
		p.Routing(fieldAction, "not allowed with path: a route is either the proxy (path) or an action")
	case hasAction:
		if hasMethod {
			p.Routing(fieldMethod, "not allowed with action: actions are triggered with POST")
		}
		if action == "" || len(action) > 256 || !printable(action) {
			p.Routing(fieldAction, "must be 1 to 256 printable characters")
		}
		r.action = action
	case hasPath:
		cleaned, why := checkPath(path)
		if why != "" {
			p.Routing(fieldPath, why)
		}
		r.path = cleaned
		r.method = http.MethodPost
		if hasMethod {
			r.method = strings.ToUpper(method)
			switch r.method {
			case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			default:
				p.Routing(fieldMethod, "must be GET, POST, PUT, PATCH or DELETE")
			}
		}
	default:
		p.Routing(fieldPath, "one of path (proxy) or action is required")
	}
	if err := p.Err(); err != nil {
		return route{}, err
	}
	return r, nil
}

// Route validates routing and returns the dispatch facts of tool: the Nango
// connection and integration, the method and the path under the base URL.
// An action's path is "/action/trigger/" followed by the escaped action name,
// so that another action is another destination.
func (b *adapter) Route(tool string, routing map[string]string) (idempotency.Route, error) {
	return b.core.Route(tool, routing)
}

func (b *adapter) route(tool string, r route) (idempotency.Route, error) {
	t := idempotency.RouteTarget{Broker: Kind, Connection: r.connection, Provider: r.provider, Method: http.MethodPost}
	path := b.base.Path + "/proxy/" + r.path
	if r.isAction() {
		path = b.base.Path + "/action/trigger/" + url.PathEscape(r.action)
	} else {
		t.Method = r.method
	}
	t.URL = b.base.Scheme + "://" + b.base.Host + path
	return idempotency.NewRoute(effectspec.Spec{Tool: tool, Route: effectspec.RouteFederated}, t)
}

// Dispatch sends call as one request: to the proxy when the routing names a
// path, else as a synchronous action. It returns the Executor's Result
// unchanged; a call refused before sending is broker.Refused. Answers pass
// through as they are: the proxy relays the vendor's status, headers and
// body, a synchronous action answers with its output or an error status,
// and Nango's own refusals (unknown connection, bad secret) are statuses
// the tool's EffectSpec classifies.
func (b *adapter) Dispatch(ctx context.Context, call broker.Call) retry.Result {
	return b.core.Dispatch(ctx, call)
}

func (b *adapter) send(ctx context.Context, r route, arguments []byte) retry.Result {
	args := idempotency.ArgumentsOrEmpty(arguments)
	if !json.Valid(args) {
		return broker.Refused(fmt.Errorf("%w: not one JSON value", broker.ErrInvalidArguments))
	}
	var (
		req *http.Request
		err error
	)
	if r.isAction() {
		req, err = b.actionRequest(ctx, r, args)
	} else {
		req, err = b.proxyRequest(ctx, r, args)
	}
	if err != nil {
		return broker.Refused(err)
	}
	return b.exec.Do(ctx, req)
}

func (b *adapter) proxyRequest(ctx context.Context, r route, args []byte) (*http.Request, error) {
	u := b.base.String() + "/proxy/" + r.path
	var body []byte
	if r.method == http.MethodGet {
		// Nango forwards a GET without a body; arguments that would be
		// dropped (anything but absent or {}) are refused rather than
		// silently lost. Query parameters belong in the path.
		if !isEmptyObject(args) {
			return nil, fmt.Errorf("%w: a GET proxy route sends no body; put parameters in the path's query", broker.ErrInvalidArguments)
		}
	} else {
		body = args
	}
	return b.newRequest(ctx, r.method, u, body, r)
}

func (b *adapter) actionRequest(ctx context.Context, r route, args []byte) (*http.Request, error) {
	// The envelope is written by hand so the input is the arguments byte for
	// byte (json.Marshal would compact and HTML-escape them).
	name, _ := json.Marshal(r.action) // a string always marshals
	body := make([]byte, 0, len(`{"action_name":,"input":}`)+len(name)+len(args))
	body = append(body, `{"action_name":`...)
	body = append(body, name...)
	body = append(body, `,"input":`...)
	body = append(body, args...)
	body = append(body, '}')
	req, err := b.newRequest(ctx, http.MethodPost, b.base.String()+"/action/trigger", body, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Async", "false")
	return req, nil
}

// Prepare is what [broker.Prepare] calls: it parses routing once for both
// the Route and the Target, so the Nango request sent is the one pinned.
func (b *adapter) Prepare(tool string, routing map[string]string) (retry.Target, idempotency.Route, error) {
	return b.core.Prepare(tool, routing)
}

// newRequest builds a request with the headers of every Nango call.
// "Retries: 0" goes on actions too, not only on the proxy: Nango's default
// is 0 today, and sending it keeps the request saying what we need whatever
// a future default becomes; it is harmless where ignored. No Nango-Proxy-
// header is ever sent, so none of our headers reaches the vendor: in
// particular never an idempotency key, which a broker does not propagate.
func (b *adapter) newRequest(ctx context.Context, method, u string, body []byte, r route) (*http.Request, error) {
	req, err := brokerkit.NewRequest(ctx, Kind, fieldPath, method, u, body)
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+b.secret)
	h.Set("Connection-Id", r.connection)
	h.Set("Provider-Config-Key", r.provider)
	h.Set("Retries", "0")
	return req, nil
}

// checkPath returns the proxy path without its leading slashes, or why it is
// not allowed. It may carry a query but no fragment, and no "." or ".."
// segment, even percent-encoded: after normalization such a path would climb
// out of /proxy/ and reach Nango's own API with our secret.
func checkPath(p string) (string, string) {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "", "required: the vendor path under /proxy/"
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= 0x20 || c >= 0x7f || c == '#' || c == '\\' {
			return "", "must be printable ASCII without spaces, '#' or '\\'"
		}
	}
	pathPart, _, _ := strings.Cut(p, "?")
	if pathPart == "" {
		return "", "required: the vendor path under /proxy/"
	}
	// Check the decoded path: a server that decodes %2F or %2E before it
	// normalizes must not find a dot segment either.
	dec, err := url.PathUnescape(pathPart)
	if err != nil {
		return "", "has an invalid percent-escape"
	}
	for i := 0; i < len(dec); i++ {
		if c := dec[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "", "must not encode control characters or '\\'"
		}
	}
	for _, seg := range strings.Split(dec, "/") {
		if seg == "." || seg == ".." {
			return "", "must not contain . or .. segments, even percent-encoded"
		}
	}
	return p, ""
}

func isEmptyObject(args []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(args, &m) == nil && m != nil && len(m) == 0
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
