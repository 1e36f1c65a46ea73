package composio

import (
	"bytes"
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
const Kind = "composio"

// defaultBaseURL is Composio's API root.
const defaultBaseURL = "https://backend.composio.dev"

// StatusToolFailed is the status reported for a reply of HTTP 2xx whose body
// says "successful": false: 424 Failed Dependency. Composio ran (or tried to
// run) the tool and the tool failed. Passing the 200 through would let a
// spec that accepts 200 record a failed run as accepted. 424 is not among
// the statuses Composio's error reference lists, so it cannot be confused
// with Composio's own answers. The tool's EffectSpec classifies it like any
// status: a spec that lists 424 under definitely_rejected says "this tool's
// failures are clean"; one that does not leaves such calls unknown, the
// cautious default.
const StatusToolFailed = http.StatusFailedDependency

// Routing field names.
const (
	fieldToolSlug           = "tool_slug"            // required: the Composio tool, e.g. GITHUB_CREATE_AN_ISSUE
	fieldConnectedAccountID = "connected_account_id" // the connected account to act as
	fieldUserID             = "user_id"              // the Composio user; one of the two ids is required
)

// Config configures the adapter. Composio's execute endpoint has no retry knob:
// the adapter's single request is the only one.
type Config struct {
	// BaseURL is Composio's API root. If empty,
	// "https://backend.composio.dev". It must be http or https with a host
	// and no userinfo, query or fragment.
	BaseURL string

	// APIKey is the project API key, sent as "x-api-key". Required. The
	// caller reads it from the environment; it never appears in an error,
	// in String or in a log value of Config.
	APIKey string

	// Executor sends each request. If nil, the adapter uses its own zero
	// retry.Executor.
	Executor *retry.Executor
}

// String describes c with the API key redacted.
func (c Config) String() string {
	key := `""`
	if c.APIKey != "" {
		key = "[redacted]"
	}
	return fmt.Sprintf("composio.Config{BaseURL:%q APIKey:%s}", c.BaseURL, key)
}

// GoString is String, so %#v does not print the API key either.
func (c Config) GoString() string { return c.String() }

// LogValue logs c with the API key redacted.
func (c Config) LogValue() slog.Value {
	key := ""
	if c.APIKey != "" {
		key = "[redacted]"
	}
	return slog.GroupValue(slog.String("base_url", c.BaseURL), slog.String("api_key", key))
}

// adapter executes federated calls as Composio tools.
type adapter struct {
	base   *url.URL
	apiKey string
	exec   *retry.Executor
	core   brokerkit.Adapter[route]
}

var _ broker.Broker = (*adapter)(nil)

// New validates cfg and returns the [broker.Broker] that executes federated
// calls as Composio tools, safe for concurrent use. Every problem is
// reported at once (errors.Join of [*effectspec.FieldError]); none names
// the API key.
//
// Its Route returns the dispatch facts of a tool: the connected account
// (or, without one, the user) as the connection, and the execute path of
// the tool slug. Its Dispatch is one POST to that endpoint, reporting the
// Executor's Result with one translation for a 2xx reply: "successful":
// true keeps the status; "successful": false becomes [StatusToolFailed]
// (body and headers kept); a body that says neither (not a JSON object
// with one boolean "successful", or Truncated) becomes post_send with
// [broker.ErrUndecidableReply], so the outcome is unknown whatever the
// spec lists. Other statuses are Composio's own and pass through. It
// reports the API key as its Secrets, so that it is scrubbed from every
// answer.
func New(cfg Config) (broker.Broker, error) {
	p := brokerkit.Problems{Broker: Kind}
	raw := cfg.BaseURL
	if raw == "" {
		raw = defaultBaseURL
	}
	base := p.BaseURL(raw, "APIKey")
	p.Secret("APIKey", cfg.APIKey)
	if err := p.Err(); err != nil {
		return nil, err
	}
	b := &adapter{base: base, apiKey: cfg.APIKey, exec: cmp.Or(cfg.Executor, new(retry.Executor))}
	b.core = brokerkit.Adapter[route]{Parse: parseRouting, Resolve: b.route, Send: b.send, Secrets: b.Secrets}
	return b, nil
}

// Secrets returns the API key, the one credential the adapter sends, so that
// it is scrubbed from every answer (broker.Target reports it).
func (b *adapter) Secrets() []string { return []string{b.apiKey} }

type route struct {
	slug, account, user string
}

// parseRouting validates a routing: tool_slug and at least one of
// connected_account_id and user_id. The slug must be 1 to 128 of A-Z a-z 0-9
// _ -, so it is one path segment that needs no escaping.
func parseRouting(routing map[string]string) (route, error) {
	p := brokerkit.Problems{Broker: Kind}
	p.Fields(routing, fieldToolSlug, fieldConnectedAccountID, fieldUserID)
	r := route{slug: routing[fieldToolSlug], account: routing[fieldConnectedAccountID], user: routing[fieldUserID]}
	if !validSlug(r.slug) {
		p.Routing(fieldToolSlug, "must be 1 to 128 of A-Z a-z 0-9 _ -")
	}
	if r.account == "" && r.user == "" {
		p.Routing(fieldConnectedAccountID, "connected_account_id or user_id is required")
	}
	for _, f := range []string{fieldConnectedAccountID, fieldUserID} {
		if v, ok := routing[f]; ok {
			p.ID(f, v)
		}
	}
	if err := p.Err(); err != nil {
		return route{}, err
	}
	return r, nil
}

func (b *adapter) route(tool string, r route) (idempotency.Route, error) {
	conn := r.account
	if conn == "" {
		conn = "user:" + r.user
	}
	return idempotency.NewRoute(effectspec.Spec{Tool: tool, Route: effectspec.RouteFederated}, idempotency.RouteTarget{
		Broker:     Kind,
		Connection: conn,
		Method:     http.MethodPost,
		URL:        b.base.Scheme + "://" + b.base.Host + b.executePath(r.slug),
	})
}

// Route validates routing and returns the dispatch facts of tool: the
// connected account (or, without one, the user) as the connection, and the
// execute path of the tool slug.
func (b *adapter) Route(tool string, routing map[string]string) (idempotency.Route, error) {
	return b.core.Route(tool, routing)
}

// executePath is the execute endpoint of API v3, as the contract fixes
// (Composio also serves v3.1 with the same body). No tool version is sent,
// so Composio applies its default.
func (b *adapter) executePath(slug string) string {
	return b.base.Path + "/api/v3/tools/execute/" + slug
}

// Prepare is what [broker.Prepare] calls: it parses routing once for both
// the Route and the Target, so the Composio request sent is the one pinned.
func (b *adapter) Prepare(tool string, routing map[string]string) (retry.Target, idempotency.Route, error) {
	return b.core.Prepare(tool, routing)
}

// Dispatch executes call as one POST to the tool's execute endpoint and
// reports the Executor's Result, with one translation for a 2xx reply:
//
//   - "successful": true keeps the status;
//   - "successful": false becomes StatusToolFailed (body and headers kept);
//   - a body that does not say either (not a JSON object with one boolean
//     "successful", or Truncated) becomes post_send with
//     broker.ErrUndecidableReply, so the outcome is unknown whatever the
//     spec lists.
//
// Other statuses are Composio's own answer and pass through unchanged.
func (b *adapter) Dispatch(ctx context.Context, call broker.Call) retry.Result {
	return b.core.Dispatch(ctx, call)
}

// send makes the one request of an attempt. The arguments must be a JSON
// object (absent reads as {}), as Composio's "arguments" is; they go into
// the envelope byte for byte.
func (b *adapter) send(ctx context.Context, r route, arguments []byte) retry.Result {
	args := idempotency.ArgumentsOrEmpty(arguments)
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return broker.Refused(fmt.Errorf("%w: Composio arguments must be a JSON object", broker.ErrInvalidArguments))
	}
	body := envelope(r, args)
	req, err := brokerkit.NewRequest(ctx, Kind, fieldToolSlug, http.MethodPost, b.base.Scheme+"://"+b.base.Host+b.executePath(r.slug), body)
	if err != nil {
		return broker.Refused(err)
	}
	req.Header.Set("x-api-key", b.apiKey)
	return translate(b.exec.Do(ctx, req))
}

// envelope writes the execute body by hand, so the arguments are sent byte
// for byte (json.Marshal would compact and HTML-escape them). An id absent
// from the routing is omitted.
func envelope(r route, args []byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range [...]struct{ name, v string }{{fieldConnectedAccountID, r.account}, {fieldUserID, r.user}} {
		if f.v != "" {
			v, _ := json.Marshal(f.v) // a string always marshals
			fmt.Fprintf(&b, "%q:%s,", f.name, v)
		}
	}
	b.WriteString(`"arguments":`)
	b.Write(args)
	b.WriteByte('}')
	return b.Bytes()
}

// translate applies Dispatch's rule for 2xx replies.
func translate(res retry.Result) retry.Result {
	if res.Phase != retry.Responded || res.Status < 200 || res.Status > 299 {
		return res
	}
	var rep reply
	err := broker.ErrUndecidableReply
	if !res.Truncated {
		rep, err = parseReply(res.Body)
	}
	if err != nil {
		return retry.Result{Phase: retry.PostSend, Status: res.Status, Err: &retry.Error{
			Phase: retry.PostSend, Op: "read body", Reason: "undecidable reply", Err: broker.ErrUndecidableReply,
		}}
	}
	if !rep.Successful {
		res.Status = StatusToolFailed
	}
	return res
}

// reply is the envelope of an execute reply.
type reply struct {
	// Successful says whether the tool run succeeded.
	Successful bool
	// Data is the tool's output, as sent.
	Data json.RawMessage
	// Error is the tool's error (a string, an object or null), as sent.
	Error json.RawMessage
	// LogID identifies the run in Composio's logs.
	LogID string
}

// parseReply reads an execute reply. It returns an error wrapping
// broker.ErrUndecidableReply unless body is one JSON object with exactly one
// member "successful" whose value is a boolean.
func parseReply(body []byte) (reply, error) {
	var rep reply
	undecidable := func(why string) (reply, error) {
		return reply{}, fmt.Errorf("%w: %s", broker.ErrUndecidableReply, why)
	}
	if !json.Valid(body) {
		return undecidable("not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, _ := dec.Token(); t != json.Delim('{') {
		return undecidable("not a JSON object")
	}
	seen := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return undecidable("not a JSON object")
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return undecidable("not a JSON object")
		}
		if strings.EqualFold(name, "successful") && name != "successful" {
			// encoding/json would read it as "successful"; Composio's
			// field is lower case. Two readings: refuse to choose.
			return undecidable(`a "successful" member in another case`)
		}
		switch name {
		case "successful":
			seen++
			if err := json.Unmarshal(v, &rep.Successful); err != nil || bytes.Equal(v, []byte("null")) {
				return undecidable(`"successful" is not a boolean`)
			}
		case "data":
			rep.Data = v
		case "error":
			rep.Error = v
		case "log_id":
			_ = json.Unmarshal(v, &rep.LogID) // informational only
		}
	}
	switch seen {
	case 0:
		return undecidable(`no "successful" member`)
	case 1:
		return rep, nil
	}
	return undecidable(`more than one "successful" member`)
}

// validSlug keeps the slug a single path segment that needs no escaping.
func validSlug(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
