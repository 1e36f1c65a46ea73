package effectspec

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Apply propagates key as the spec declares and reports what it did:
//
//   - header: every value of the named header in h, whatever its case, is
//     replaced by key (h.Set, canonical name), so neither the arguments nor
//     the client can put a different key on the wire. body is returned as is.
//   - body_pointer: key is written at the pointer with SetAtPointer and the
//     new body is returned; h is untouched.
//   - meta: nothing changes here (the MCP target writes the key at
//     params._meta of its tools/call); PropagationMeta.
//   - unsupported, and every federated route: nothing changes;
//     PropagationNone.
//   - in_process, in_process_keyed: an error; a handler runs such a tool,
//     never an HTTP request.
//
// key must be non-empty printable ASCII (an idt_ key always is). On error
// neither h nor body is changed, the returned body is the input, and the
// call must not be sent.
func (s Spec) Apply(h http.Header, body []byte, key string) ([]byte, Propagation, error) {
	if s.Route != RouteFederated && s.Idempotency.Kind.InProcess() {
		// A handler in the gateway runs it: an HTTP request for it would be
		// a send the binding never declared.
		return body, PropagationNone, specProblem(s.Tool, "idempotency.binding", "an in-process binding is not sent over HTTP")
	}
	prop := s.Propagation()
	if prop == PropagationNone {
		return body, PropagationNone, nil
	}
	if !validKey(key) {
		return body, PropagationNone, fmt.Errorf("%w: must be non-empty printable ASCII", errInvalidKey)
	}
	switch prop {
	case PropagationMeta:
		return body, PropagationMeta, nil
	case PropagationHeader:
		name := s.Idempotency.Header
		if why := checkHeaderName(name); why != "" {
			return body, PropagationNone, specProblem(s.Tool, "idempotency.header", why)
		}
		if h == nil {
			return body, PropagationNone, errors.New("effectspec: nil header")
		}
		for k := range h {
			if strings.EqualFold(k, name) {
				delete(h, k)
			}
		}
		h.Set(name, key)
		return body, PropagationHeader, nil
	default: // PropagationBodyPointer
		out, err := SetAtPointer(body, s.Idempotency.Pointer, key)
		if err != nil {
			return body, PropagationNone, err
		}
		return out, PropagationBodyPointer, nil
	}
}
