package idempotency

// ArgumentsOrEmpty returns arguments, or {} when they are absent: nil or
// empty, only JSON whitespace, or the literal null (what many encoders write
// for an absent map) with JSON whitespace around it. [RequestHash] hashes
// absent arguments as {}; whatever sends or checks arguments reads them
// through ArgumentsOrEmpty, so the vendor receives the request that was
// hashed. Any other input is returned as it is, not checked.
func ArgumentsOrEmpty(arguments []byte) []byte {
	if absentArguments(arguments) {
		return []byte("{}")
	}
	return arguments
}

func absentArguments(b []byte) bool {
	i, j := 0, len(b)
	for i < j && isJSONSpace(b[i]) {
		i++
	}
	for j > i && isJSONSpace(b[j-1]) {
		j--
	}
	return i == j || string(b[i:j]) == "null"
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
