package mcpgateway

import (
	"net/http"

	"github.com/obol-gateway/obol/internal/callkey"
	"github.com/obol-gateway/obol/internal/nearmiss"
)

// The front refuses, as malformed_key, every name spelled like one it reads
// but not exactly it: the rule is package internal/nearmiss, read through
// internal/callkey as mcpgo reads it (docs/DESIGN.md, "The key" and
// "refserver wire contract").

// nearMissName reports whether a params._meta member name is a near miss.
func nearMissName(name []byte) bool { return nearmiss.Name(name, metaKey, metaTicket) }

// nearMiss is the front's refusal of a request that carries a near miss,
// nil when it carries none: env's, else one of its header or trailer
// fields' ([callkey.NearMissHeader]).
func nearMiss(r *http.Request, env envelope) error {
	if env.nearMiss != nil {
		return env.nearMiss
	}
	return callkey.NearMissHeader(r.Header, r.Trailer)
}
