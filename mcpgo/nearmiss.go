package mcpgo

import (
	"net/http"

	"github.com/obol-gateway/obol/internal/nearmiss"
	"github.com/obol-gateway/obol/mcpgateway"
)

// The near-miss rule of mcpgateway (docs/DESIGN.md, "The key" and
// "refserver wire contract"), from the one package both fronts share: a
// name spelled like one the front reads but not exactly it is refused as
// malformed_key. The published vectors test that both fronts agree.

// nearMissName reports whether a params._meta member name is a near miss.
func nearMissName(name []byte) bool {
	return nearmiss.Name(name, mcpgateway.MetaKey, mcpgateway.MetaTicket)
}

// nearMissContainer reports whether a member name of params other than
// _meta is spelled like _meta.
func nearMissContainer(name []byte) bool { return nearmiss.Container(name) }

// nearMissHeader reports whether h has a field named like the key or the
// ticket other than exactly except ("" makes every such field one).
func nearMissHeader(h http.Header, except string) bool { return nearmiss.Header(h, except) }
