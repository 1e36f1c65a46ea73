package canonical

// Absent reports whether arguments are absent: nil or empty, only JSON
// whitespace, or the literal null (what many encoders write for an absent
// map) with JSON whitespace around it. [Hash] hashes them as {}.
func Absent(b []byte) bool {
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
