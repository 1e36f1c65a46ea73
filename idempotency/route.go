package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/obol-gateway/obol/effectspec"
)

// Route is the non-secret set of dispatch facts that a claim pins (DESIGN.md
// section 5). Its fingerprint changes when any fact changes (another
// connection, provider, scheme, host, path, binding or vendor account), which
// turns a re-used key of an unknown call into a destination_conflict instead
// of a dispatch somewhere else.
//
// Route holds no credentials by construction: never put a token, a header
// value or a URL with userinfo or query into it.
type Route struct {
	Connection string                 `json:"connection"`       // connection id, or the broker id for federated calls
	Provider   string                 `json:"provider"`         // e.g. "stripe"
	Tool       string                 `json:"tool"`             // the concrete tool (the provider's tool for cap.* calls)
	Method     string                 `json:"method,omitempty"` // HTTP method
	Host       string                 `json:"host,omitempty"`   // URL host[:port], no userinfo
	Path       string                 `json:"path,omitempty"`   // path template, not the expanded path
	Binding    effectspec.BindingKind `json:"binding"`
	Broker     string                 `json:"broker,omitempty"` // federated: broker kind (nango, composio)
	Scheme     string                 `json:"scheme,omitempty"` // URL scheme (http, https)
	// BindingName is where the key goes: the lowercased header name, or the
	// JSON Pointer, of a header or body_pointer binding.
	BindingName string `json:"binding_name,omitempty"`
	// SecretEnv names the environment variable that holds the connection's
	// secret (never the secret): another name means another vendor account.
	SecretEnv string `json:"secret_env,omitempty"`
}

// Fingerprint is "sha256:" + hex SHA-256 of the canonical JSON of r.
func (r Route) Fingerprint() string {
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

// Record returns the route record of r: every fact but the binding and the
// broker kind.
func (r Route) Record() RouteRecord {
	return RouteRecord{Connection: r.Connection, Provider: r.Provider, Tool: r.Tool, Method: r.Method, Host: r.Host, Path: r.Path}
}
