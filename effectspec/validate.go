package effectspec

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/obol-gateway/obol/internal/ident"
)

// reservedHeaders may not carry the key: framing and hop-by-hop headers that
// net/http or the connection owns, credentials the gateway sets, and the
// headers that say how the body it builds is read. Keys are canonical.
var reservedHeaders = map[string]string{
	"Host":                "it names the target host",
	"Content-Length":      "it frames the body",
	"Transfer-Encoding":   "it frames the body",
	"Trailer":             "it frames the body",
	"Te":                  "it is hop-by-hop",
	"Connection":          "it is hop-by-hop",
	"Keep-Alive":          "it is hop-by-hop",
	"Proxy-Connection":    "it is hop-by-hop",
	"Upgrade":             "it is hop-by-hop",
	"Expect":              "it changes how the request is sent",
	"Proxy-Authorization": "it carries credentials",
	"Proxy-Authenticate":  "it carries credentials",
	"Authorization":       "it carries the vendor credential",
	"Cookie":              "it carries credentials",
	"Content-Type":        "it says how the body is read",
	"Content-Encoding":    "it says how the body is read",
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// checkHeaderName returns why name cannot carry the key, or "".
func checkHeaderName(name string) string {
	if name == "" {
		return "required with binding header"
	}
	for i := 0; i < len(name); i++ {
		if !isTchar(name[i]) {
			return fmt.Sprintf("%s is not a valid header name (RFC 9110 token)", quoteTrunc(name))
		}
	}
	if why, ok := reservedHeaders[http.CanonicalHeaderKey(name)]; ok {
		return fmt.Sprintf("%s may not carry the key: %s", name, why)
	}
	return ""
}

// maxMetaName is the longest params._meta member name a meta binding may
// write.
const maxMetaName = 128

// checkMetaName returns why name cannot carry the key as a params._meta
// member, or "". A name is an MCP _meta key: an optional prefix of
// dot-separated labels (a letter first, a letter or digit last, hyphens
// inside) ending in '/', then a name that starts and ends with a letter or
// digit, with '-', '_' and '.' inside. A prefix with the label
// modelcontextprotocol or mcp is MCP's own, and dev.obol/ is this
// gateway's: only DefaultMetaName is allowed there.
func checkMetaName(name string) string {
	if len(name) > maxMetaName {
		return fmt.Sprintf("longer than %d bytes", maxMetaName)
	}
	prefix, rest, hasPrefix := strings.Cut(name, "/")
	if !hasPrefix {
		prefix, rest = "", name
	}
	bad := func() string {
		return fmt.Sprintf("%s is not an MCP _meta key (optional prefix of dot-separated labels and '/', then a name of letters, digits and -_. that starts and ends with a letter or digit)", quoteTrunc(name))
	}
	if !metaLabelName(rest) {
		return bad()
	}
	if !hasPrefix {
		return ""
	}
	for _, l := range strings.Split(prefix, ".") {
		if !metaPrefixLabel(l) {
			return bad()
		}
		if strings.EqualFold(l, "modelcontextprotocol") || strings.EqualFold(l, "mcp") {
			return "the prefix " + prefix + "/ is reserved by MCP"
		}
	}
	if strings.EqualFold(prefix, "dev.obol") && name != DefaultMetaName {
		return fmt.Sprintf("the prefix %s/ is the gateway's own; of it only %q may carry the key", prefix, DefaultMetaName)
	}
	return ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// metaPrefixLabel reports whether l is a label of a _meta key's prefix.
func metaPrefixLabel(l string) bool {
	if l == "" || !('a' <= l[0] && l[0] <= 'z' || 'A' <= l[0] && l[0] <= 'Z') || !isAlnum(l[len(l)-1]) {
		return false
	}
	for i := 0; i < len(l); i++ {
		if !isAlnum(l[i]) && l[i] != '-' {
			return false
		}
	}
	return true
}

// metaLabelName reports whether n is the name part of a _meta key.
func metaLabelName(n string) bool {
	if n == "" || !isAlnum(n[0]) || !isAlnum(n[len(n)-1]) {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isAlnum(n[i]) && strings.IndexByte("-_.", n[i]) < 0 {
			return false
		}
	}
	return true
}

// checkPointer returns why p is not a writable RFC 6901 pointer, or "".
func checkPointer(p string) string {
	if _, err := parsePointer(p); err != nil {
		return strings.TrimPrefix(err.Error(), ErrInvalidPointer.Error()+": ")
	}
	return ""
}

// check checks every rule of the contract and reports all problems at
// once, as [New] documents; it does not mark s validated.
func (s Spec) check() error {
	p := newProblems(s.Tool, -1)
	s.validate(&p)
	return p.err()
}

func (s Spec) validate(p *problems) {
	switch {
	case s.Tool == "":
		p.add("tool", "must not be empty")
	case !ident.Valid(s.Tool):
		p.add("tool", fmt.Sprintf("must be 1 to %d of A-Z a-z 0-9 _ . -", ident.MaxLen))
	}
	switch s.Effect {
	case "", EffectRead, EffectWrite:
	default:
		p.add("effect", fmt.Sprintf("%s is not %q or %q", quoteTrunc(string(s.Effect)), EffectRead, EffectWrite))
	}
	switch s.Route {
	case "", RouteNative, RouteFederated:
	default:
		p.add("route", fmt.Sprintf("%s is not %q or %q", quoteTrunc(string(s.Route)), RouteNative, RouteFederated))
	}
	switch s.Approval {
	case "", ApprovalNone, ApprovalRequired:
	default:
		p.add("approval", fmt.Sprintf("%s is not %q or %q", quoteTrunc(string(s.Approval)), ApprovalNone, ApprovalRequired))
	}
	b := s.Idempotency
	switch b.Kind {
	case BindingHeader:
		if why := checkHeaderName(b.Header); why != "" {
			p.add("idempotency.header", why)
		}
		if b.Pointer != "" {
			p.add("idempotency.pointer", "not allowed with binding header")
		}
	case BindingBodyPointer:
		if why := checkPointer(b.Pointer); why != "" {
			p.add("idempotency.pointer", why)
		}
		if b.Header != "" {
			p.add("idempotency.header", "not allowed with binding body_pointer")
		}
	case "", BindingUnsupported:
		if b.Header != "" {
			p.add("idempotency.header", "not allowed with binding unsupported")
		}
		if b.Pointer != "" {
			p.add("idempotency.pointer", "not allowed with binding unsupported")
		}
	case BindingMeta:
		if b.Header != "" {
			p.add("idempotency.header", "not allowed with binding meta")
		}
		if b.Pointer != "" {
			p.add("idempotency.pointer", "not allowed with binding meta")
		}
		if b.Meta != "" {
			if why := checkMetaName(b.Meta); why != "" {
				p.add("idempotency.meta", why)
			}
		}
		if s.Route == RouteFederated {
			p.add("idempotency.binding", "a federated route propagates no key; binding must be unsupported")
		}
		if len(s.Status.Accepted)+len(s.Status.DefinitelyRejected)+len(s.Status.Retryable)+len(s.Status.InUse) > 0 {
			p.add("status", "not allowed with binding meta (an MCP tool's answers have a fixed classification; only status.tool_error is read)")
		}
	case BindingInProcess, BindingInProcessKeyed:
		if b.Header != "" || b.Pointer != "" {
			p.add("idempotency.binding", "an in-process binding has no header or pointer: the handler receives the key")
		}
		if s.Route == RouteFederated {
			p.add("idempotency.binding", "a federated route propagates no key; binding must be unsupported")
		}
		if len(s.Status.Accepted)+len(s.Status.DefinitelyRejected)+len(s.Status.Retryable)+len(s.Status.InUse) > 0 {
			p.add("status", "not allowed with an in-process binding (a handler returns, rejects or fails; it has no status codes)")
		}
	default:
		p.add("idempotency.binding", fmt.Sprintf("%s is not %q, %q, %q, %q, %q or %q",
			quoteTrunc(string(b.Kind)), BindingHeader, BindingBodyPointer, BindingUnsupported, BindingInProcess, BindingInProcessKeyed, BindingMeta))
	}
	switch b.Kind {
	case "", BindingUnsupported, BindingHeader, BindingBodyPointer, BindingInProcess, BindingInProcessKeyed:
		// Checked only for a valid kind: an unknown one is reported above.
		if b.Meta != "" {
			p.add("idempotency.meta", "not allowed with binding "+string(cmp.Or(b.Kind, BindingUnsupported)))
		}
	}
	// Only a tool of an MCP connection has tool errors, and such a tool's
	// binding is meta, body_pointer or unsupported on a native route
	// (its configuration checks the connection).
	switch s.Status.ToolError {
	case "":
	case DefinitelyRejected, Unknown:
		switch {
		case s.Route == RouteFederated:
			p.add("status.tool_error", "not allowed on a federated route (only a tool of an MCP connection has tool errors)")
		case b.Kind == BindingHeader || b.Kind.InProcess():
			p.add("status.tool_error", "not allowed with binding "+string(b.Kind)+" (only a tool of an MCP connection has tool errors)")
		}
	default:
		p.add("status.tool_error", fmt.Sprintf("%s is not %q or %q", quoteTrunc(string(s.Status.ToolError)), DefinitelyRejected, Unknown))
	}
	switch {
	case b.Window == 0:
	case b.Kind != BindingHeader && b.Kind != BindingBodyPointer && b.Kind != BindingInProcessKeyed && b.Kind != BindingMeta:
		// Checked only for a valid kind: an unknown one is reported above.
		switch b.Kind {
		case "", BindingUnsupported:
			p.add("idempotency.window", "not allowed with binding unsupported (the vendor deduplicates nothing)")
		case BindingInProcess:
			p.add("idempotency.window", "not allowed with binding in_process (the handler passes no key on)")
		}
	case b.Window < minVendorWindow:
		p.add("idempotency.window", fmt.Sprintf("%s is less than the minimum %s", b.Window, minVendorWindow))
	case b.Window > maxVendorWindow:
		p.add("idempotency.window", fmt.Sprintf("%s is more than the maximum %s", b.Window, maxVendorWindow))
	}
	if s.Route == RouteFederated && (b.Kind == BindingHeader || b.Kind == BindingBodyPointer) {
		p.add("idempotency.binding", "a federated route propagates no key; binding must be unsupported")
	}
	checkStatusList(p, "status.accepted", s.Status.Accepted)
	checkStatusList(p, "status.definitely_rejected", s.Status.DefinitelyRejected)
	checkStatusList(p, "status.retryable", s.Status.Retryable)
	checkStatusList(p, "status.in_use", s.Status.InUse)
	for _, c := range sortedUnique(s.Status.Accepted) {
		if slices.Contains(s.Status.DefinitelyRejected, c) {
			p.add("status.definitely_rejected", fmt.Sprintf("%d is also accepted", c))
		}
		if slices.Contains(s.Status.Retryable, c) {
			p.add("status.retryable", fmt.Sprintf("%d is also accepted", c))
		}
	}
	// An in-use answer says nothing yet: it must not read as any outcome,
	// nor earn a second attempt while the first may still succeed.
	for _, c := range sortedUnique(s.Status.InUse) {
		for _, l := range []struct {
			name  string
			codes []int
		}{{"accepted", s.Status.Accepted}, {"definitely_rejected", s.Status.DefinitelyRejected}, {"retryable", s.Status.Retryable}} {
			if slices.Contains(l.codes, c) {
				p.add("status.in_use", fmt.Sprintf("%d is also %s", c, l.name))
			}
		}
	}
	switch {
	case s.Timeout < 0:
		p.add("timeout", "must be positive (zero means the default "+DefaultAttemptTimeout.String()+")")
	case s.Timeout > MaxAttemptTimeout:
		p.add("timeout", fmt.Sprintf("%s is more than the maximum %s", s.Timeout, MaxAttemptTimeout))
	}
	if s.MaxAttempts < 0 || s.MaxAttempts > MaxMaxAttempts {
		p.add("max_attempts", fmt.Sprintf("%d is not from 1 to %d (zero means the gateway's default)", s.MaxAttempts, MaxMaxAttempts))
	}
}

func checkStatusList(p *problems, field string, codes []int) {
	for i, c := range codes {
		f := field + "[" + strconv.Itoa(i) + "]"
		if c < 100 || c > 599 {
			p.add(f, fmt.Sprintf("%d is not a status code (100-599)", c))
			continue
		}
		if j := slices.Index(codes[:i], c); j >= 0 {
			p.add(f, fmt.Sprintf("%d duplicates %s[%d]", c, field, j))
		}
	}
}

func sortedUnique(codes []int) []int {
	c := slices.Clone(codes)
	slices.Sort(c)
	return slices.Compact(c)
}

// validKey reports whether key may be written into a header or a body: a
// non-empty run of printable ASCII, so no header injection or re-encoding.
func validKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}
