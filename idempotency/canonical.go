package idempotency

import "github.com/obol-gateway/obol/internal/canonical"

// Canonicalize returns the RFC 8785 (JCS) canonical form of one JSON value:
// no insignificant whitespace, object members sorted by the UTF-16 code units
// of their names, numbers as ECMAScript's Number.prototype.toString prints the
// nearest IEEE 754 double, strings as UTF-8 with only the escapes JCS requires.
//
// One departure keeps numbers exact: a number whose value as written is not the
// value of the shortest decimal of its nearest double (9007199254740993, a
// 25-digit id, 1e-400) is written as that exact value in the notation
// -?[1-9](\.[0-9]*[1-9])?e[+-](0|[1-9][0-9]*) (9.007199254740993e+15), a text
// that no double prints as, unless it is that double printed at a fixed
// precision: written with a '.' or an exponent, with k <= 17 significant digits
// (leading and trailing zeros not counted) that are the double correctly
// rounded to k digits (a tie rounded to even, as C's printf, or up, as
// JavaScript's toPrecision). So 0.10000000000000001 (%.17g of 0.1) is 0.1,
// while the integer literals 72057594037927936 and 72057594037927940, two int64
// ids that are one double, stay apart. Every number that a JavaScript or Go
// encoder writes from a double, at its shortest or at up to 17 digits, keeps
// its RFC 8785 form, and two numbers kept exactly share a canonical form only
// if they have the same value (0 and -0 are both 0). So requests that differ
// beyond a double's precision never replay each other (docs/DESIGN.md, "Request
// hash and dispatch fingerprint").
//
// Input that is not exactly one JSON value (RFC 8259, whitespace around it
// allowed), invalid UTF-8, a lone surrogate escape, two members of one object
// with the same name (compared after unescaping), a number beyond the double
// range, a nonzero number of magnitude below 1e-9999 or with more than 100
// significant digits, nesting of arrays and objects deeper than 10000, or
// more than 256 MiB of input is an error wrapping [ErrInvalidJSON]. The error
// names the input offset but never quotes the input, which may hold secrets.
// Canonicalize never modifies data.
func Canonicalize(data []byte) ([]byte, error) {
	return canonical.JSON(data)
}

// RequestHash returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical form of a tool call's arguments (see [Canonicalize]), computed in
// one streaming pass with one allocation.
//
// Absent arguments hash as "{}" (see [ArgumentsOrEmpty]): nil or empty input,
// input of only JSON whitespace, and the JSON literal null (what many
// encoders write for an absent map), so a client that omits arguments and
// one that sends {} or null never see a request mismatch. Any other value is hashed as it is; checking
// that arguments are an object is left to the caller.
func RequestHash(arguments []byte) (string, error) {
	return canonical.Hash(arguments)
}

// RequestHashes returns [RequestHash](arguments) and, when the arguments hold a
// number that the previous release hashed otherwise, the hash under the
// previous number rule; otherwise previous is "". The previous rule kept the
// exact value of a number that its nearest double prints as at a fixed
// precision (0.10000000000000001, the double 0.1 printed by %.17g), which the
// current rule reads as that double, and it wrote an integer such as
// 72057594037927936 as 7.2057594037927936e+16, which the current rule writes
// as its plain digits (docs/DESIGN.md, "Request hash and dispatch
// fingerprint"). A record claimed under the previous rule pins previous: a
// caller whose claim is refused as a request mismatch claims again with
// previous, so that the record still matches its own retries while such records
// can live.
func RequestHashes(arguments []byte) (hash, previous string, err error) {
	return canonical.Hashes(arguments)
}
