package effectspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/obol-gateway/obol/internal/strictjson"
)

// Parse loads one spec from a JSON object and validates it. Member names are
// matched exactly (case-sensitive; encoding/json alone would accept "Tool");
// an unknown or repeated member, a null, a value of the wrong type, trailing
// data after the object and every rule [New] checks are errors. An absent
// effect, route, approval or idempotency.binding takes its zero default
// (write, native, none, unsupported); an explicit "" is an error, because it
// is more likely a templating slip than a choice. All
// problems are reported at once, each a [*FieldError]. The spec returned is
// validated (Spec.Validated).
func Parse(data []byte) (Spec, error) {
	raw, err := single(data, '{', "a JSON object")
	if err != nil {
		return Spec{}, err
	}
	s, p := parseSpec(raw, -1)
	if err := p.err(); err != nil {
		return Spec{}, err
	}
	return s.seal(), nil
}

// ParseList loads a JSON array of specs, as Parse does each one, and also
// refuses two specs for the same tool. All problems of all specs are
// reported at once; on error no spec is returned. The specs returned are
// validated (Spec.Validated).
func ParseList(data []byte) ([]Spec, error) {
	raw, err := single(data, '[', "a JSON array")
	if err != nil {
		return nil, err
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, docError(err.Error())
	}
	specs := make([]Spec, 0, len(elems))
	var all []error
	first := make(map[string]int, len(elems))
	for i, e := range elems {
		s, p := parseSpec(e, i)
		if j, dup := first[s.Tool]; dup && s.Tool != "" {
			p.add("tool", fmt.Sprintf("duplicates the spec at [%d]", j))
		} else if s.Tool != "" {
			first[s.Tool] = i
		}
		all = append(all, p.list...)
		specs = append(specs, s)
	}
	if len(all) > 0 {
		return nil, errors.Join(all...)
	}
	for i := range specs {
		specs[i] = specs[i].seal()
	}
	return specs, nil
}

func docError(msg string) error {
	p := newProblems("", -1)
	p.add("", msg)
	return p.err()
}

// single checks that data is exactly one JSON value that opens with open.
func single(data []byte, open byte, what string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, docError("empty document")
		}
		return nil, docError("invalid JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, docError("trailing data after " + what)
	}
	if raw[0] != open {
		return nil, docError("document must be " + what)
	}
	// encoding/json silently replaces invalid UTF-8 and lone surrogates;
	// the module's one strict reading refuses them (and a depth beyond its
	// bound). A repeated member is left to object, which names its field.
	switch err := strictjson.Check(raw); {
	case errors.Is(err, strictjson.ErrDepth):
		return nil, docError("invalid JSON: nested too deeply")
	case err != nil && !errors.Is(err, strictjson.ErrRepeated):
		// The decoder above took everything else.
		return nil, docError("invalid JSON: invalid UTF-8 or a lone surrogate")
	}
	return raw, nil
}

// members splits a JSON object into its members in document order, with
// names unescaped. raw must be valid JSON.
func members(raw json.RawMessage) (names []string, vals []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		names = append(names, t.(string))
		vals = append(vals, v)
	}
	return names, vals, true
}

// object walks the members of raw at path (the field name of the object, ""
// for the spec itself), reporting unknown and repeated names, and calls set
// for each known one.
func object(p *problems, path string, raw json.RawMessage, known []string, set func(name string, v json.RawMessage)) {
	names, vals, ok := members(raw)
	if !ok {
		field := path
		p.add(field, "must be a JSON object")
		return
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		field := n
		if path != "" {
			field = path + "." + n
		}
		switch {
		case seen[n]:
			p.add(field, "repeated member")
		case !contains(known, n):
			p.add(field, "unknown field")
		default:
			set(n, vals[i])
		}
		seen[n] = true
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseSpec decodes one spec object; the returned problems include check's.
func parseSpec(raw json.RawMessage, index int) (Spec, *problems) {
	var s Spec
	// The tool is read first so that every later problem names it.
	if names, vals, ok := members(raw); ok {
		for i, n := range names {
			if n == "tool" {
				var t string
				if json.Unmarshal(vals[i], &t) == nil {
					s.Tool = t
				}
				break
			}
		}
	}
	p := new(newProblems(s.Tool, index))
	if raw[0] != '{' {
		p.add("", "spec must be a JSON object")
		return Spec{}, p
	}
	object(p, "", raw, []string{"tool", "effect", "route", "idempotency", "status", "approval", "timeout", "max_attempts"}, func(name string, v json.RawMessage) {
		switch name {
		case "tool":
			if t, ok := str(p, name, v, false); ok {
				s.Tool = t
			}
		case "effect":
			if t, ok := str(p, name, v, true); ok {
				s.Effect = Effect(t)
			}
		case "route":
			if t, ok := str(p, name, v, true); ok {
				s.Route = RouteKind(t)
			}
		case "approval":
			if t, ok := str(p, name, v, true); ok {
				s.Approval = Approval(t)
			}
		case "timeout":
			if t, ok := str(p, name, v, true); ok {
				s.Timeout = duration(p, name, t)
			}
		case "max_attempts":
			n, err := strconv.Atoi(string(v))
			switch {
			case err != nil || len(v) > 4:
				p.add(name, fmt.Sprintf("%s is not an integer from 1 to %d", quoteTrunc(string(v)), MaxMaxAttempts))
			case n == 0:
				p.add(name, "must be at least 1 (omit the field for the gateway's default)")
			default:
				s.MaxAttempts = n // check checks the range
			}
		case "idempotency":
			object(p, name, v, []string{"binding", "header", "pointer", "meta", "window"}, func(n string, v json.RawMessage) {
				f := name + "." + n
				switch n {
				case "binding":
					if t, ok := str(p, f, v, true); ok {
						s.Idempotency.Kind = BindingKind(t)
					}
				case "header":
					if t, ok := str(p, f, v, false); ok {
						s.Idempotency.Header = t
					}
				case "pointer":
					// "" is a valid RFC 6901 pointer (the root); check
					// refuses it with a precise message.
					if t, ok := str(p, f, v, false); ok {
						s.Idempotency.Pointer = t
					}
				case "meta":
					// Empty means the default name: say so by omitting it.
					if t, ok := str(p, f, v, true); ok {
						s.Idempotency.Meta = t
					}
				case "window":
					if t, ok := str(p, f, v, true); ok {
						s.Idempotency.Window = durationDefault(p, f, t, DefaultVendorWindow)
					}
				}
			})
		case "status":
			object(p, name, v, []string{"accepted", "definitely_rejected", "retryable", "in_use", "tool_error"}, func(n string, v json.RawMessage) {
				if n == "tool_error" {
					if t, ok := str(p, name+"."+n, v, true); ok {
						s.Status.ToolError = Outcome(t)
					}
					return
				}
				codes := ints(p, name+"."+n, v)
				switch n {
				case "accepted":
					s.Status.Accepted = codes
				case "definitely_rejected":
					s.Status.DefinitelyRejected = codes
				case "retryable":
					s.Status.Retryable = codes
				case "in_use":
					s.Status.InUse = codes
				}
			})
		}
	})
	s.validate(p)
	return s, p
}

// str decodes a JSON string. enum refuses "": an absent field takes the
// documented default, but an explicit empty value is a mistake.
func str(p *problems, field string, v json.RawMessage, enum bool) (string, bool) {
	if string(v) == "null" {
		p.add(field, "must be a string, not null")
		return "", false
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		p.add(field, "must be a string")
		return "", false
	}
	if enum && s == "" {
		p.add(field, "must not be empty (omit the field for its default)")
		return "", false
	}
	return s, true
}

// duration decodes a Go duration string. Zero and negative durations are
// refused here, because check reads a zero Timeout as the default: an
// explicit "0s" is a mistake, not a request for the default.
func duration(p *problems, field, text string) time.Duration {
	return durationDefault(p, field, text, DefaultAttemptTimeout)
}

// durationDefault is duration for a field whose default is def.
func durationDefault(p *problems, field, text string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		p.add(field, fmt.Sprintf("%s is not a Go duration such as \"30s\"", quoteTrunc(text)))
		return 0
	case d <= 0:
		p.add(field, "must be positive (omit the field for the default "+def.String()+")")
		return 0
	}
	return d
}

// ints decodes a JSON array of integer literals; the range is check's.
func ints(p *problems, field string, v json.RawMessage) []int {
	var elems []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &elems) != nil {
		p.add(field, "must be an array of status codes")
		return nil
	}
	if len(elems) == 0 {
		return nil // as absent, so specs compare and round-trip
	}
	codes := make([]int, len(elems))
	bad := false
	for i, e := range elems {
		n, err := strconv.Atoi(string(e))
		if err != nil || len(e) > 4 {
			p.add(field+"["+strconv.Itoa(i)+"]", fmt.Sprintf("%s is not a status code (100-599)", quoteTrunc(string(e))))
			bad = true
			continue
		}
		codes[i] = n
	}
	if bad {
		// Leave the list out rather than let check report shifted indexes.
		return nil
	}
	return codes
}
