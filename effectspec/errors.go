package effectspec

import (
	"errors"
	"strconv"
	"strings"

	"github.com/obol-gateway/obol/internal/ident"
)

var (
	// ErrInvalidSpec: a spec (or list of specs) breaks the JSON shape or a rule
	// of the contract. Every *FieldError unwraps to it.
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
	// ErrInvalidBody: the body is not a single valid JSON object or array.
	ErrInvalidBody = errors.New("effectspec: body is not a JSON object or array")
	// ErrNoTarget: RFC 6901 gives the pointer no place in this body: it
	// crosses a string, number, boolean or null, names an array element that
	// does not exist, or names a member that occurs more than once.
	ErrNoTarget = errors.New("effectspec: pointer has no target in body")
	// ErrInvalidKey: the key handed to Apply or SetAtPointer cannot be written
	// safely (empty, or not printable ASCII).
	ErrInvalidKey = errors.New("effectspec: invalid key")
)

// ReasonPolicyDenied is the stable wire reason of ErrPolicyDenied.
const ReasonPolicyDenied = "policy_denied"

// FieldError is one problem with one field of one spec. It unwraps to
// ErrInvalidSpec. Like every error of this package, it never contains a key
// or a request body.
type FieldError struct {
	// Tool is the spec's tool name as declared (possibly empty or invalid).
	Tool string
	// Index is the spec's position, from 0, in the array given to ParseList;
	// -1 when the spec did not come from a list.
	Index int
	// Field is the JSON path of the field, such as "idempotency.pointer" or
	// "status.accepted[1]"; empty for problems with the document as a whole.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error renders "effectspec: TOOL: FIELD: MSG". A tool that is not a valid
// name is quoted, or replaced by the list position "[N]" when there is one,
// so a hostile name cannot forge the shape of the message.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("effectspec: ")
	switch {
	case ident.Valid(e.Tool):
		b.WriteString(e.Tool)
		b.WriteString(": ")
	case e.Index >= 0:
		b.WriteString("[")
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteString("]: ")
	case e.Tool != "":
		b.WriteString(quoteTrunc(e.Tool))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrInvalidSpec.
func (e *FieldError) Unwrap() error { return ErrInvalidSpec }

// ValidationError holds every problem found in a spec or a list of specs, in
// document order. Parse, ParseList and Validate return it (never a nil
// *ValidationError as a non-nil error).
type ValidationError struct {
	Problems []*FieldError
}

// Error renders one problem per line, like errors.Join.
func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the problems, so errors.Is(err, ErrInvalidSpec) and
// errors.As(err, &fieldErr) see them.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects FieldErrors for one spec.
type problems struct {
	tool  string
	index int
	list  []*FieldError
}

func (p *problems) add(field, msg string) {
	p.list = append(p.list, &FieldError{Tool: p.tool, Index: p.index, Field: field, Msg: msg})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// quoteTrunc quotes s for an error message, cut to a readable length.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
