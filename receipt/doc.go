// Package receipt defines the receipt of a tool call: the effective
// idempotency key, the request hash, the route, the attempt count and the
// outcome, an [effectspec.Outcome] (docs/DESIGN.md, "Receipt (JSON)").
//
// A receipt is built from the claim record (the idempotency package's
// Record.Receipt); this package only defines its shape and its stable JSON
// encoding, so that it can be imported by code that merely reads receipts.
// Its [Redactor] replaces a route's secrets in every form a vendor's echo may hold them (raw,
// JSON-escaped, base64), in log text and in a vendor's answer before it is
// stored or returned (docs/DESIGN.md, "Attempts and retries").
//
// The JSON encoding follows Receipt's field order, idempotency_key first and
// resolution last, byte for byte what encoding/json gave for it (the tests
// compare the two). created_at and finalized_at are UTC with millisecond
// precision; finalized_at and status are omitted until they exist.
package receipt
