package effectspec

import (
	"errors"
	"strconv"
	"strings"

	"github.com/obol-gateway/obol/internal/ident"
)

var (
	// ErrInvalidSpec: a spec (or list of specs) breaks the JSON shape or a rule
	// of the contract. The error joins a [*FieldError] for every problem,
	// each of which unwraps to it.
	ErrInvalidSpec = errors.New("effectspec: invalid spec")
	// ErrUnvalidated: a spec that did not come from Parse, ParseList or New
	// (or was changed since) where a validated one is required; see
	// Spec.Validated.
	ErrUnvalidated = errors.New("effectspec: spec not validated (build it with Parse, ParseList or New)")
	// ErrPolicyDenied: the policy refuses the call before any claim. Its wire
	// reason is ReasonPolicyDenied.
	ErrPolicyDenied = errors.New("effectspec: policy denied")
	// ErrInvalidPointer: the pointer is not a writable RFC 6901 JSON Pointer
	// (bad syntax, invalid UTF-8, or the document root).
	ErrInvalidPointer = errors.New("effectspec: invalid JSON pointer")
	// The other failures of [SetAtPointer] and [Spec.Apply]: no caller
	// tells them apart, so their texts name them.

	// errInvalidBody: the body is not a single valid JSON object or array.
	errInvalidBody = errors.New("effectspec: body is not a JSON object or array")
	// errNoTarget: RFC 6901 gives the pointer no place in this body: it
	// crosses a string, number, boolean or null, names an array element that
	// does not exist, or names a member that occurs more than once.
	errNoTarget = errors.New("effectspec: pointer has no target in body")
	// errInvalidKey: the key handed to Apply or SetAtPointer cannot be written
	// safely (empty, or not printable ASCII).
	errInvalidKey = errors.New("effectspec: invalid key")
)

// ReasonPolicyDenied is the stable wire reason of ErrPolicyDenied.
const ReasonPolicyDenied = "policy_denied"

// FieldError is one problem with one field: of a spec here, of a
// configuration or a routing elsewhere (a broker adapter's). It is the one
// shape in which the module's packages refuse a field, each wrapping its
// own sentinel. Its message never holds a key, a request body or a value
// that may be a secret.
type FieldError struct {
	// Err is the sentinel of the package that refused the field, such as
	// [ErrInvalidSpec] or broker.ErrInvalidConfig; Unwrap returns it. The
	// message begins with that package's name, Err's text up to its first
	// colon.
	Err error
	// Subject names what holds the field, as the message shows it: a
	// spec's tool (quoted when it is not a valid name, or its position
	// "[N]" in the array given to ParseList), an adapter ("nango"); empty
	// for a spec with no tool or a problem with the document as a whole.
	Subject string
	// Field is the path of the field, such as "idempotency.pointer",
	// "status.accepted[1]", "Retries" or "routing.connection_id"; empty for
	// a problem with the document as a whole.
	Field string
	// Problem says what is wrong.
	Problem string
}

// Error renders "PACKAGE: SUBJECT: FIELD: PROBLEM", without an empty
// subject or field.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Err != nil {
		pkg, _, _ := strings.Cut(e.Err.Error(), ":")
		b.WriteString(pkg)
		b.WriteString(": ")
	}
	for _, part := range [...]string{e.Subject, e.Field} {
		if part != "" {
			b.WriteString(part)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// problems collects the problems of one spec: each a *FieldError that
// unwraps to ErrInvalidSpec.
type problems struct {
	subject string
	list    []error
}

// newProblems returns the collector of the spec of tool, at position index
// of a list (-1: not from a list). A tool that is not a valid name is shown
// by its position, else quoted, so that a hostile name cannot forge the
// shape of the message.
func newProblems(tool string, index int) problems {
	switch {
	case ident.Valid(tool):
		return problems{subject: tool}
	case index >= 0:
		return problems{subject: "[" + strconv.Itoa(index) + "]"}
	case tool != "":
		return problems{subject: quoteTrunc(tool)}
	}
	return problems{}
}

func (p *problems) add(field, msg string) {
	p.list = append(p.list, &FieldError{Err: ErrInvalidSpec, Subject: p.subject, Field: field, Problem: msg})
}

// specProblem is the one problem of the spec of tool with field.
func specProblem(tool, field, msg string) error {
	p := newProblems(tool, -1)
	p.add(field, msg)
	return p.list[0]
}

// err returns every problem, one per line (errors.Join), or nil.
func (p *problems) err() error { return errors.Join(p.list...) }

// quoteTrunc quotes s for an error message, cut to a readable length.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
