// Package canonical is the canonical JSON of a tool call's arguments: RFC
// 8785 (JCS) with numbers kept exact (docs/DESIGN.md, "Request hash and
// dispatch fingerprint"). Its entry points for the library are
// [github.com/obol-gateway/obol/idempotency.Canonicalize],
// [github.com/obol-gateway/obol/idempotency.RequestHash] and
// [github.com/obol-gateway/obol/idempotency.RequestHashes], which call [JSON],
// [Hash] and [Hashes].
//
// One pass validates the input and writes each token in canonical form to a
// tape, sorting each object's members as it closes (canonical.go, object.go);
// parse.go reads the grammar, string.go the strings, number.go the numbers.
// The tests hold a frozen copy of the previous number rule (v1_test.go), the
// differential tests against it, against gowebpki/jcs and against
// JavaScript, and the fuzz targets.
package canonical
