package idempotency

// ToolHash is toolHash, for the tests of package idempotency_test.
var ToolHash = toolHash
