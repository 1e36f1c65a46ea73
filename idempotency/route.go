package idempotency

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/receipt"
)

// Route is the non-secret set of dispatch facts that a claim pins
// (docs/DESIGN.md, "Request hash and dispatch fingerprint"). Its fingerprint
// changes when any fact changes (another connection, provider, scheme, host,
// path, binding or vendor account), which turns a re-used key of an unknown
// call into a destination_conflict instead of a dispatch somewhere else.
//
// Build it with NewRoute, which derives every fact the fingerprint needs
// from the spec and the target; retry.Orchestrator.Do refuses a Route that
// lacks one (Route.Check, ErrWeakRoute).
//
// Route holds no credentials by construction: never put a token, a header
// value or a URL with userinfo or query into it.
type Route struct {
	Connection string                 `json:"connection"`       // connection id, or the broker-side connection for federated calls
	Provider   string                 `json:"provider"`         // e.g. "stripe"
	Tool       string                 `json:"tool"`             // the concrete tool (the provider's tool for cap.* calls)
	Method     string                 `json:"method,omitempty"` // HTTP method
	Host       string                 `json:"host,omitempty"`   // URL host[:port], no userinfo; the server name in process
	Path       string                 `json:"path,omitempty"`   // path template, not the expanded path
	Binding    effectspec.BindingKind `json:"binding"`
	Broker     string                 `json:"broker,omitempty"` // federated: broker kind (nango, composio)
	Scheme     string                 `json:"scheme,omitempty"` // URL scheme (http, https), or SchemeInProcess
	// BindingName is where the key goes: the lowercased header name, the
	// JSON Pointer, or the params._meta member, of a header, body_pointer or
	// meta binding.
	BindingName string `json:"binding_name,omitempty"`
	// Credential names the vendor account the call is sent as, never the
	// secret itself: refserver uses the name of the environment variable
	// that holds the connection's secret. Another name means another vendor
	// account, so another destination. NoCredential says the call sends
	// none. Its fingerprint name is "secret_env", and NoCredential is left
	// out of the fingerprint, as absent: both keep the fingerprints that
	// stores already pin.
	Credential string `json:"secret_env,omitempty"`
	// UpstreamTool is the upstream MCP server's tool of an MCP route.
	UpstreamTool string `json:"upstream_tool,omitempty"`
}

// NoCredential is the Credential of a route that sends no credential (a
// vendor without authentication, an in-process handler without an account).
const NoCredential = "none"

// SchemeInProcess is the Scheme of an in-process route: a handler inside the
// gateway runs the tool, no request leaves it.
const SchemeInProcess = "inproc"

// RouteTarget is what NewRoute derives a Route from besides the spec. Which
// fields a kind reads is listed on NewRoute; a field a kind does not read
// must be empty.
type RouteTarget struct {
	// Connection: native and in-process, the gateway's connection id (the
	// scope's); federated, the broker-side connection (Nango connection_id,
	// Composio connected_account_id or "user:" + user_id), where the effect
	// lands.
	Connection string
	// Provider: the vendor (native, in-process: required), or the broker's
	// integration (Nango provider_config_key; optional, Composio has none).
	Provider string
	// Method is the HTTP method (native, federated). If empty, POST.
	Method string
	// URL is the endpoint (native: the vendor's, federated: the broker's),
	// with its path as a template ("https://api.stripe.com/v1/charges/{id}"),
	// never expanded with the call's values. It may hold no userinfo and no
	// fragment, and no query but a broker proxy path's. The path is taken
	// as written.
	URL string
	// Credential names the vendor account (native: required, NoCredential
	// if the call sends none; in-process: the handler's declared account,
	// or NoCredential). Never the secret. Federated: empty; the broker-side
	// Connection is the account.
	Credential string
	// Broker is the broker kind of a federated route ("nango", "composio").
	Broker string
	// Server names the gateway whose handler runs an in-process tool; set
	// it only for in-process routes.
	Server string
	// UpstreamTool names the tool of an upstream MCP server that a native
	// spec's calls go to; set it only for such a route, whose kind is then
	// [effectspec.RouteMCP] and whose URL is the upstream's endpoint.
	UpstreamTool string
}

// NewRoute returns the Route of spec's calls through t, with every fact its
// fingerprint covers. The kind is spec's route ("federated") or, for a
// native spec, in-process when t.Server is set and MCP when t.UpstreamTool
// is:
//
//   - native: Connection, Provider, Credential and URL are required; the
//     scheme (lowercased), host and path come from URL, the method from
//     Method (POST if empty); the binding and its name (the lowercased
//     header, or the pointer) from spec.
//   - federated: Broker, Connection and URL are required, Provider is
//     optional; method as native; the binding is unsupported. The broker's
//     URL scheme and credential are not facts (the broker-side connection
//     is the account, and a broker's base URL is its configuration).
//   - in-process: Connection, Provider and Server are required, and spec's
//     binding is in_process or in_process_keyed (and only such a route
//     takes one); Credential is the handler's declared account
//     (NoCredential if none, the default); scheme SchemeInProcess, host
//     Server, path the tool, no method; the binding from spec, no name.
//   - MCP: Connection, Provider, Credential, URL (the upstream's endpoint)
//     and UpstreamTool (an MCP tool name) are required, Method must be
//     empty, and spec's binding is meta, body_pointer or unsupported (and
//     only such a route takes meta); scheme, host and path from URL as
//     native, no method; the binding and its name (the params._meta
//     member, [effectspec.DefaultMetaName] if the spec names none, or the
//     pointer into the tool's arguments) from spec.
//
// The error wraps ErrWeakRoute and names the field; it holds no value of t.
func NewRoute(spec effectspec.Spec, t RouteTarget) (Route, error) {
	weak := func(format string, a ...any) (Route, error) {
		return Route{}, fmt.Errorf("%w: %s: %s", ErrWeakRoute, spec.Tool, fmt.Sprintf(format, a...))
	}
	if spec.Tool == "" {
		return weak("no tool")
	}
	r := Route{Connection: t.Connection, Provider: t.Provider, Tool: spec.Tool, Binding: spec.Idempotency.Kind}
	if r.Binding == "" {
		r.Binding = effectspec.BindingUnsupported
	}
	switch spec.Idempotency.Kind {
	case effectspec.BindingHeader:
		r.BindingName = strings.ToLower(spec.Idempotency.Header)
	case effectspec.BindingBodyPointer:
		r.BindingName = spec.Idempotency.Pointer
	case effectspec.BindingMeta:
		r.BindingName = cmp.Or(spec.Idempotency.Meta, effectspec.DefaultMetaName)
	}
	kind := effectspec.RouteNative
	switch {
	case spec.Route == effectspec.RouteFederated:
		kind = effectspec.RouteFederated
	case t.Server != "":
		kind = effectspec.RouteInProcess
	case t.UpstreamTool != "":
		kind = effectspec.RouteMCP
	}
	if kind != effectspec.RouteFederated && t.Broker != "" {
		return weak("Broker is set for a %s route", kind)
	}
	if kind != effectspec.RouteInProcess && t.Server != "" {
		return weak("Server is set for a %s route", kind)
	}
	if kind != effectspec.RouteMCP && t.UpstreamTool != "" {
		return weak("UpstreamTool is set for a %s route", kind)
	}
	// Only an upstream MCP server reads params._meta, and it never sees the
	// headers of the POST that carries its tools/call.
	if kind != effectspec.RouteMCP && spec.Idempotency.Kind == effectspec.BindingMeta {
		return weak("binding %s needs an MCP route (set UpstreamTool)", effectspec.BindingMeta)
	}
	if kind == effectspec.RouteMCP {
		switch spec.Idempotency.Kind {
		case effectspec.BindingMeta, effectspec.BindingBodyPointer, effectspec.BindingUnsupported, "":
		default:
			return weak("an MCP route needs binding %s, %s or %s", effectspec.BindingMeta, effectspec.BindingBodyPointer,
				effectspec.BindingUnsupported)
		}
		if err := ident.Check(t.UpstreamTool); err != nil {
			return weak("UpstreamTool: %v", err)
		}
		if t.Method != "" {
			return weak("Method is not a fact of an MCP route (every call is a tools/call POST)")
		}
		r.UpstreamTool = t.UpstreamTool
	}
	// A handler runs exactly the in-process bindings: an HTTP route for one
	// would send what the binding never declared, and a handler for a
	// header binding would drop the key the vendor needs.
	if kind == effectspec.RouteNative && spec.Idempotency.Kind.InProcess() {
		return weak("binding %s needs an in-process route (set Server)", spec.Idempotency.Kind)
	}
	if kind == effectspec.RouteInProcess && !spec.Idempotency.Kind.InProcess() {
		return weak("an in-process route needs binding %s or %s", effectspec.BindingInProcess, effectspec.BindingInProcessKeyed)
	}
	switch kind {
	case effectspec.RouteInProcess:
		if t.URL != "" || t.Method != "" {
			return weak("URL and Method are not facts of an in-process route")
		}
		r.Scheme, r.Host, r.Path = SchemeInProcess, t.Server, spec.Tool
		r.Credential = t.Credential
		if r.Credential == "" {
			r.Credential = NoCredential
		}
	case effectspec.RouteFederated:
		if t.Credential != "" {
			return weak("Credential is not a fact of a federated route (the broker-side connection is)")
		}
		r.Broker = t.Broker
		r.Binding, r.BindingName = effectspec.BindingUnsupported, ""
		fallthrough
	case effectspec.RouteNative, effectspec.RouteMCP:
		if kind != effectspec.RouteFederated {
			r.Credential = t.Credential
		}
		if kind != effectspec.RouteMCP {
			r.Method = cmp.Or(t.Method, http.MethodPost)
		}
		scheme, host, path, err := splitURL(t.URL, kind == effectspec.RouteFederated)
		if err != nil {
			return weak("URL: %v", err)
		}
		if scheme == SchemeInProcess {
			return weak("URL: scheme %s is an in-process route's (set Server)", SchemeInProcess)
		}
		r.Host, r.Path = host, path
		if kind != effectspec.RouteFederated {
			r.Scheme = scheme
		}
	}
	if err := r.check(kind); err != nil {
		return Route{}, fmt.Errorf("%w: %s: %s", ErrWeakRoute, spec.Tool, err)
	}
	return r, nil
}

// splitURL returns the scheme (lowercased), host and path of raw as written.
// A query is refused unless query is set (a broker's proxy path may carry
// the vendor's query, which is then part of the path). Its errors name no
// part of raw.
func splitURL(raw string, query bool) (scheme, host, path string, err error) {
	if raw == "" {
		return "", "", "", errors.New("required")
	}
	u, perr := url.Parse(raw)
	switch {
	case perr != nil:
		return "", "", "", errors.New("does not parse")
	case u.User != nil:
		return "", "", "", errors.New("holds userinfo (credentials are never route facts)")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", "", "", errors.New("holds a fragment")
	case !query && (u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?")):
		return "", "", "", errors.New("holds a query")
	case u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return "", "", "", errors.New("want scheme://host[:port]/path")
	}
	// The path as written: what follows the authority. url.Parse would
	// decode escapes and re-encode a template's braces.
	rest := raw[strings.Index(raw, "://")+3:]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		path = rest[i:]
	}
	if path == "" {
		path = "/"
	}
	return u.Scheme, u.Host, path, nil
}

// Kind returns the kind of route r is: federated when it names a broker,
// in-process when its scheme is SchemeInProcess, MCP when it names an
// upstream tool, else native.
func (r Route) Kind() effectspec.RouteKind {
	switch {
	case r.Broker != "":
		return effectspec.RouteFederated
	case r.Scheme == SchemeInProcess:
		return effectspec.RouteInProcess
	case r.UpstreamTool != "":
		return effectspec.RouteMCP
	}
	return effectspec.RouteNative
}

// Check reports whether r holds every fact the fingerprint of its kind
// needs (see NewRoute), so that another destination cannot pass as this
// one. The error wraps ErrWeakRoute and names the missing fact.
func (r Route) Check() error {
	if err := r.check(r.Kind()); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrWeakRoute, r.Tool, err)
	}
	return nil
}

func (r Route) check(kind effectspec.RouteKind) error {
	var missing []string
	need := func(name, v string) {
		if v == "" {
			missing = append(missing, name)
		}
	}
	need("Connection", r.Connection)
	need("Tool", r.Tool)
	need("Host", r.Host)
	need("Path", r.Path)
	switch kind {
	case effectspec.RouteFederated:
		need("Broker", r.Broker)
		need("Method", r.Method)
	case effectspec.RouteInProcess:
		need("Provider", r.Provider)
		need("Credential", r.Credential)
	case effectspec.RouteMCP:
		need("Provider", r.Provider)
		need("Scheme", r.Scheme)
		need("Credential", r.Credential)
		need("UpstreamTool", r.UpstreamTool)
	default:
		need("Provider", r.Provider)
		need("Scheme", r.Scheme)
		need("Method", r.Method)
		need("Credential", r.Credential)
	}
	if kind != effectspec.RouteFederated && (r.Binding == effectspec.BindingHeader || r.Binding == effectspec.BindingBodyPointer ||
		r.Binding == effectspec.BindingMeta) {
		need("BindingName", r.BindingName)
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (build it with idempotency.NewRoute)", strings.Join(missing, ", "))
	}
	if r.Binding == effectspec.BindingMeta && kind != effectspec.RouteMCP {
		return fmt.Errorf("binding %s on a %s route (only an upstream MCP server reads params._meta)", r.Binding, kind)
	}
	return nil
}

// Fingerprint is "sha256:" + hex SHA-256 of the canonical JSON of r. A
// Credential of NoCredential is left out, as an absent one.
func (r Route) Fingerprint() string {
	if r.Credential == NoCredential {
		r.Credential = ""
	}
	b, err := json.Marshal(r)
	if err == nil {
		b, err = Canonicalize(b)
	}
	if err != nil {
		// Marshalling a struct of strings cannot fail, and json.Marshal's
		// output (invalid UTF-8 already replaced) is always canonicalizable.
		panic("idempotency: route fingerprint: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Record returns the route record of r, as a claim pins it and receipts
// show it ([receipt.RouteRecord]): every fact but the binding, the broker kind, the scheme and the
// credential, and the fingerprint of them all.
func (r Route) Record() receipt.RouteRecord {
	return receipt.RouteRecord{Connection: r.Connection, Provider: r.Provider, Tool: r.Tool, Method: r.Method, Host: r.Host, Path: r.Path,
		UpstreamTool: r.UpstreamTool, Fingerprint: r.Fingerprint()}
}
