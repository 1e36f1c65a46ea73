// Package spanattr names the attributes of the spans a call makes: the
// keys retry's Orchestrator passes to its Tracer, and the ones
// mcpgateway/otelhooks sets on a call's server span. The strings are the
// contract (retry.Tracer lists them); the names keep the packages that
// write them in step.
package spanattr

// Attribute keys.
const (
	Workspace    = "obol.workspace"
	Tool         = "obol.tool"
	Connection   = "obol.connection"
	KeySource    = "obol.key_source"
	ClaimStatus  = "obol.claim.status"
	Binding      = "obol.binding"
	Attempt      = "obol.attempt"
	Phase        = "obol.phase"
	Status       = "obol.vendor.status"
	Outcome      = "obol.outcome"
	AttemptCount = "obol.attempt_count"
)
