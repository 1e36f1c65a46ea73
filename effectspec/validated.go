package effectspec

import "slices"

// New validates s as Parse does a JSON spec and returns it marked validated:
// the way to build a Spec in Go code. On error it returns the zero Spec and
// every problem, each a [*FieldError] that unwraps to [ErrInvalidSpec]. A Go
// value's empty Effect, Route, Approval or Binding Kind is its documented
// zero default and valid; only Parse can tell an explicit "" from an absent
// field, and it refuses the explicit one.
func New(s Spec) (Spec, error) {
	if err := s.check(); err != nil {
		return Spec{}, err
	}
	return s.seal(), nil
}

// MustNew is New for specs fixed in the program's source: it panics if s is
// invalid.
func MustNew(s Spec) Spec {
	v, err := New(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Validated reports whether s is a spec that Parse, ParseList or New returned,
// unchanged since. Changing any field afterwards, or an element of a status
// list, makes it false: pass the result through New again. A Spec built as a
// literal, decoded with encoding/json or the zero Spec is never validated.
func (s Spec) Validated() bool {
	v := s.validated
	return v != nil &&
		s.Tool == v.Tool && s.Effect == v.Effect && s.Route == v.Route &&
		s.Idempotency == v.Idempotency && s.Approval == v.Approval &&
		s.Timeout == v.Timeout && s.MaxAttempts == v.MaxAttempts &&
		slices.Equal(s.Status.Accepted, v.Status.Accepted) &&
		slices.Equal(s.Status.DefinitelyRejected, v.Status.DefinitelyRejected) &&
		slices.Equal(s.Status.Retryable, v.Status.Retryable) &&
		slices.Equal(s.Status.InUse, v.Status.InUse)
}

// seal marks a spec that passed validation. The copy it keeps owns its status
// lists, so a later write through s's slices shows as a change.
func (s Spec) seal() Spec {
	c := s
	c.validated = nil
	c.Status = Statuses{
		Accepted:           slices.Clone(s.Status.Accepted),
		DefinitelyRejected: slices.Clone(s.Status.DefinitelyRejected),
		Retryable:          slices.Clone(s.Status.Retryable),
		InUse:              slices.Clone(s.Status.InUse),
	}
	s.validated = &c
	return s
}
