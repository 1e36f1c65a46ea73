package mcpgateway

import (
	"net/http"

	"github.com/obol-gateway/obol/internal/nearmiss"
)

// The front refuses, as malformed_key, every name spelled like one it reads
// but not exactly it: the rule is package internal/nearmiss, shared with
// mcpgo (docs/DESIGN.md, "The key" and "refserver wire contract").

// nearMissName reports whether a params._meta member name is a near miss.
func nearMissName(name []byte) bool { return nearmiss.Name(name, metaKey, metaTicket) }

// nearMissContainer reports whether a member name of params other than
// _meta is spelled like _meta.
func nearMissContainer(name []byte) bool { return nearmiss.Container(name) }

// nearMissHeader reports whether h has a field named like the key or the
// ticket other than exactly except ("" makes every such field one).
func nearMissHeader(h http.Header, except string) bool { return nearmiss.Header(h, except) }

// nearMiss is the front's refusal of a request that carries a near miss,
// nil when it carries none: env's, else one of its header fields, else a
// trailer field named like the key. The key is read from the header section
// only, so a trailer Idempotency-Key, exact or not, would be ignored too
// (Go's server lists the trailer fields a request announces in r.Trailer).
func nearMiss(r *http.Request, env envelope) error {
	switch {
	case env.nearMiss != nil:
		return env.nearMiss
	case nearMissHeader(r.Header, headerKey):
		return errNearMissHeader
	case nearMissHeader(r.Trailer, ""):
		return errKeyInTrailer
	}
	return nil
}
