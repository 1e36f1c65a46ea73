package effectspec

import "slices"

// Propagation says what Apply does with the key: a federated route, an
// unsupported binding and any binding this package does not know propagate
// nothing.
func (s Spec) Propagation() Propagation {
	if s.Route == RouteFederated {
		return PropagationNone
	}
	return s.Idempotency.Kind.Propagation()
}

// Propagation is how a key reaches the vendor under binding b: in a header,
// at a body pointer, through an in_process_keyed handler, in an upstream MCP
// server's params._meta, or not at all.
func (b BindingKind) Propagation() Propagation {
	switch b {
	case BindingHeader:
		return PropagationHeader
	case BindingBodyPointer:
		return PropagationBodyPointer
	case BindingInProcessKeyed:
		return PropagationHandler
	case BindingMeta:
		return PropagationMeta
	}
	return PropagationNone
}

// vendorDedup reports whether the vendor can deduplicate on our key: the
// key reaches it by header, body pointer or params._meta on a native route,
// or through an in_process_keyed handler. Only then may an attempt whose
// outcome is unknown be followed by another one.
func (s Spec) vendorDedup() bool { return s.Propagation() != PropagationNone }

// Classify gives the final outcome of a vendor status: Accepted or
// DefinitelyRejected by the spec's lists, otherwise Unknown. A status in
// InUse, and a status that an invalid spec lists as both accepted and
// rejected, is Unknown: unknown never becomes success.
//
// An in-process binding lists no statuses: InProcessAccepted is Accepted,
// InProcessRejected DefinitelyRejected, anything else Unknown.
func (s Spec) Classify(status int) Outcome {
	if s.Route != RouteFederated && s.Idempotency.Kind.InProcess() {
		switch status {
		case InProcessAccepted:
			return Accepted
		case InProcessRejected:
			return DefinitelyRejected
		}
		return Unknown
	}
	if slices.Contains(s.Status.InUse, status) {
		return Unknown
	}
	acc := slices.Contains(s.Status.Accepted, status)
	rej := slices.Contains(s.Status.DefinitelyRejected, status)
	switch {
	case acc && !rej:
		return Accepted
	case rej && !acc:
		return DefinitelyRejected
	}
	return Unknown
}

// Retryable reports whether a responded status may earn the one immediate
// second attempt: the status is in the retryable list, not in InUse, and the
// vendor deduplicates on our key. Without a vendor binding a
// second request could be a second effect, so no status is retryable; an
// in-use answer means the first request is still running, so a second one
// now would only be answered in use again.
//
// The caller still owes the rest of the rule: a complete and consistent
// response, and never more than two attempts in one cycle.
func (s Spec) Retryable(status int) bool {
	return s.vendorDedup() && slices.Contains(s.Status.Retryable, status) &&
		!slices.Contains(s.Status.Accepted, status) && !slices.Contains(s.Status.InUse, status)
}
