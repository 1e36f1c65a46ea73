package retry

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/canonical"
)

// requestHashes is [idempotency.RequestHashes] of a call's arguments, but
// for a body_pointer binding over the arguments without the member at the
// pointer: the target overwrites it with the slot's vendor key, so it is
// never sent as written, and a caller that regenerates its own "unique" key
// on a retry still retries the same slot (docs/DESIGN.md, "Request hash and
// dispatch fingerprint"). The member is removed from the canonical form,
// which the hash then reads again. When a member was removed, previous is
// the hash over the whole arguments, which a record claimed before this
// rule pins.
func requestHashes(binding effectspec.BindingKind, pointer string, args []byte) (hash, previous string, err error) {
	hash, previous, err = idempotency.RequestHashes(args)
	if err != nil || binding != effectspec.BindingBodyPointer || canonical.Absent(args) {
		return hash, previous, err
	}
	canon, err := idempotency.Canonicalize(args)
	if err != nil {
		return "", "", err
	}
	stripped, ok := withoutPointer(canon, pointer)
	if !ok {
		return hash, previous, nil
	}
	h, _, err := idempotency.RequestHashes(stripped)
	if err != nil {
		return "", "", err
	}
	return h, hash, nil
}

// withoutPointer returns doc without the object member at the RFC 6901
// pointer (an array element there reads as null); ok is false when doc
// holds nothing there. doc is a canonical form: its numbers are kept as
// written.
func withoutPointer(doc []byte, pointer string) (out []byte, ok bool) {
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return nil, false
	}
	cur := root
	for i, t := range tokens {
		last := i == len(tokens)-1
		switch v := cur.(type) {
		case map[string]any:
			next, found := v[t]
			if !found {
				return nil, false
			}
			if last {
				delete(v, t)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(v) || (t != "0" && t[0] == '0') {
				return nil, false
			}
			if last {
				v[n] = nil
			}
			cur = v[n]
		default:
			return nil, false
		}
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, false
	}
	return out, true
}
