package idempotency

import "github.com/obol-gateway/obol/internal/canonical"

// ArgumentsOrEmpty returns arguments, or {} when they are absent: nil or
// empty, only JSON whitespace, or the literal null (what many encoders write
// for an absent map) with JSON whitespace around it. [RequestHash] hashes
// absent arguments as {}; whatever sends or checks arguments reads them
// through ArgumentsOrEmpty, so the vendor receives the request that was
// hashed. Any other input is returned as it is, not checked.
func ArgumentsOrEmpty(arguments []byte) []byte {
	if canonical.Absent(arguments) {
		return []byte("{}")
	}
	return arguments
}
