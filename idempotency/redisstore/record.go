package redisstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// schemaVersion is the layout of the record (lua/common.lua: one string of
// tagged fields; the tags and codes below). Changing any of them is a new
// schema. Being one string, a record keeps one encoding whatever its body.
// What it takes in memory is measured in examples/bench/README.md (row 5).
//
// Schema 1 was a hash of the same fields (legacySchema): every script and
// [CountRecords] read it as it is, and the first script that changes one
// writes it back as schema 2, with its TTL. So a gateway of this version
// can join a schema 1 fleet, but not the other way round (README.md,
// "Upgrading the record layout").
//
// A final record (accepted, definitely_rejected) is written in the final
// form of schema 2 when it can be (compact in lua/common.lua): byte 0 is
// finalForm, then its fields at fixed places, without tags or lengths.
const (
	schemaVersion = 2
	legacySchema  = 1
	finalForm     = 3
)

// numericTags are the fields a record stores as unsigned big-endian bytes.
const numericTags = "wnsyleCUFxzWAE"

// unpackRecord reads a record string (schema 2, tagged or in the final
// form) into the flat field/value list that decodeRecord reads: numbers as
// decimal text, a header that has no code as ":"+name. It never trusts a
// length.
func unpackRecord(raw string) ([]string, error) {
	flat, cut, err := unpack(raw)
	if err == nil && cut {
		err = fmt.Errorf("%w: cut short", errCorruptRecord)
	}
	return flat, err
}

// unpackHead reads the fields of a record string's first bytes that are
// whole.
func unpackHead(head string) ([]string, bool) {
	flat, _, err := unpack(head)
	return flat, err == nil
}

// unpack reads the fields of raw up to the first one cut short (cut).
func unpack(raw string) (flat []string, cut bool, err error) {
	if raw != "" && raw[0] == finalForm {
		return unpackFinal(raw)
	}
	if raw == "" || raw[0] != schemaVersion {
		return nil, false, fmt.Errorf("%w: not a record of schema %d", errCorruptRecord, schemaVersion)
	}
	flat = make([]string, 0, 40)
	if _, cut, err = unpackFields(raw, 1, false, &flat); err != nil {
		return nil, false, err
	}
	return flat, cut, nil
}

// unpackFields reads the fields of raw from i, to its end or (stop) to a 0
// byte, into flat; next is the index after them (after the 0 byte).
func unpackFields(raw string, i int, stop bool, flat *[]string) (next int, cut bool, err error) {
	for i < len(raw) {
		tag := raw[i]
		if stop && tag == 0 {
			return i + 1, false, nil
		}
		n, w := binary.Uvarint([]byte(raw[i+1 : min(len(raw), i+1+binary.MaxVarintLen64)]))
		if w < 0 {
			return i, false, fmt.Errorf("%w: field %q: length overflows", errCorruptRecord, tag)
		}
		if w == 0 || n > uint64(len(raw)-i-1-w) {
			return i, true, nil
		}
		i += 1 + w
		v := raw[i : i+int(n)]
		i += int(n)
		switch {
		case strings.IndexByte(numericTags, tag) >= 0:
			if len(v) > 7 { // beyond 2^53, more than the scripts' numbers hold
				return i, false, fmt.Errorf("%w: field %q: number of %d bytes", errCorruptRecord, tag, len(v))
			}
			var x uint64
			for j := 0; j < len(v); j++ {
				x = x<<8 | uint64(v[j])
			}
			v = strconv.FormatUint(x, 10)
		case tag == ':':
			name, hv, ok := strings.Cut(v, ":")
			if !ok || name == "" {
				return i, false, fmt.Errorf("%w: header field without a name", errCorruptRecord)
			}
			*flat = append(*flat, ":"+name, hv)
			continue
		}
		*flat = append(*flat, string([]byte{tag}), v)
	}
	return i, stop, nil
}

// Flags of the final form's byte 2.
const (
	finalVendorKey = 1 << iota // k follows the fingerprint
	finalJSON                  // J
	finalDropped               // D
	_                          // unused
	finalSize                  // the body's size precedes the body
	finalMethod    = 32        // times the method's code (methodCodes)
)

// methodCodes are the final form's method codes, from 1 (0: none, or a
// field M of the tail). Append only: the codes are part of the layout
// (code_method in lua/common.lua).
var methodCodes = [...]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// finalBindings are the binding codes of field m by their index in the
// final form's byte 1 (meta_byte in lua/common.lua).
const finalBindings = "hpuikm"

// unpackFinal reads a record in the final form (finalForm) as unpack does:
// the fixed fields, their flags, then the fields of the tail as schema 2
// up to a 0 byte, then the body's size and the body, the rest.
func unpackFinal(raw string) (flat []string, cut bool, err error) {
	flat = make([]string, 0, 40)
	if len(raw) < 3 {
		return flat, true, nil
	}
	// Byte 1 is field m: bit 0 the state (a, r), bit 1 the key source (s,
	// m), bits 2-4 the binding (finalBindings).
	mb, flags := raw[1], raw[2]
	if int(mb>>2) >= len(finalBindings) {
		return nil, false, fmt.Errorf("%w: final form: meta byte 0x%02x", errCorruptRecord, mb)
	}
	flat = append(flat, "m", string([]byte{"ar"[mb&1], "sm"[mb>>1&1], finalBindings[mb>>2]}))
	i := 3
	num := func(tag string) bool {
		x, w := binary.Uvarint([]byte(raw[i:min(len(raw), i+binary.MaxVarintLen64)]))
		if w <= 0 {
			return false
		}
		i += w
		if x >= 1<<53 {
			err = fmt.Errorf("%w: field %s: %d beyond 2^53", errCorruptRecord, tag, x)
			return false
		}
		flat = append(flat, tag, strconv.FormatUint(x, 10))
		return true
	}
	bytesOf := func(tag string, n int) bool {
		if len(raw)-i < n {
			return false
		}
		flat = append(flat, tag, raw[i:i+n])
		i += n
		return true
	}
	str := func(tag string) bool {
		n, w := binary.Uvarint([]byte(raw[i:min(len(raw), i+binary.MaxVarintLen64)]))
		if w <= 0 || n > uint64(len(raw)-i-w) {
			return false
		}
		i += w
		if n > 0 {
			flat = append(flat, tag, raw[i:i+int(n)])
		}
		i += int(n)
		return true
	}
	ok := num("w") && bytesOf("q", 32) && bytesOf("f", 32) &&
		(flags&finalVendorKey == 0 || bytesOf("k", 16)) && bytesOf("o", 8) &&
		num("n") && num("C") && num("F")
	if err != nil {
		return nil, false, err
	}
	if ok && i < len(raw) {
		// The status, 101-355, as one byte: 0 for none (or a field x of
		// the tail).
		if sc := int(raw[i]); sc > 0 {
			flat = append(flat, "x", strconv.Itoa(sc+100))
		}
		if mc := int(flags / finalMethod); mc > 0 {
			if mc > len(methodCodes) {
				return nil, false, fmt.Errorf("%w: method code %d", errCorruptRecord, mc)
			}
			flat = append(flat, "M", methodCodes[mc-1])
		}
		i++
		ok = str("H") && str("P")
	} else {
		ok = false
	}
	if !ok {
		return flat, true, nil
	}
	if i, cut, err = unpackFields(raw, i, true, &flat); err != nil || cut {
		return flat, cut, err
	}
	if flags&finalJSON != 0 {
		flat = append(flat, "J", "")
	}
	if flags&finalDropped != 0 {
		flat = append(flat, "D", "1")
	}
	if i < len(raw) {
		if flags&finalSize != 0 && !num("z") {
			if err != nil {
				return nil, false, err
			}
			return flat, true, nil
		}
		flat = append(flat, "B", raw[i:])
	}
	return flat, false, nil
}

// decodeStored reads a record as a script returns it (schema 2, also for a
// record still stored as schema 1, which version then says).
func decodeStored(scope idempotency.Scope, key idempotency.Key, raw string, nowMS int64, version int) (idempotency.Record, error) {
	flat, err := unpackRecord(raw)
	if err != nil {
		return idempotency.Record{}, err
	}
	return decodeRecord(scope, key, flat, nowMS, version)
}

var stateCodes = map[effectspec.Outcome]string{
	effectspec.Held:               "h",
	effectspec.InProgress:         "f",
	effectspec.Accepted:           "a",
	effectspec.DefinitelyRejected: "r",
	effectspec.Unknown:            "u",
	effectspec.Denied:             "d",
}

var codeStates = func() map[string]effectspec.Outcome {
	m := make(map[string]effectspec.Outcome, len(stateCodes))
	for s, c := range stateCodes {
		m[c] = s
	}
	return m
}()

func bindingCode(b effectspec.BindingKind) (string, bool) {
	switch b {
	case effectspec.BindingHeader:
		return "h", true
	case effectspec.BindingBodyPointer:
		return "p", true
	case effectspec.BindingUnsupported, "":
		return "u", true
	case effectspec.BindingInProcess:
		return "i", true
	case effectspec.BindingInProcessKeyed:
		return "k", true
	case effectspec.BindingMeta:
		return "m", true
	}
	return "", false
}

func codeBinding(c string) (effectspec.BindingKind, bool) {
	switch c {
	case "h":
		return effectspec.BindingHeader, true
	case "p":
		return effectspec.BindingBodyPointer, true
	case "u":
		return effectspec.BindingUnsupported, true
	case "i":
		return effectspec.BindingInProcess, true
	case "k":
		return effectspec.BindingInProcessKeyed, true
	case "m":
		return effectspec.BindingMeta, true
	}
	return "", false
}

// headerCodes name the stored headers compactly: field "0".."9" by index. A
// safe header that is not listed here is stored as ":"+canonical name.
// Append only: the index is part of the schema.
var headerCodes = [...]string{
	"Content-Type", "Content-Language", "Content-Encoding", "Etag", "Last-Modified",
	"Retry-After", "Idempotency-Key", "Idempotent-Replayed", "X-Request-Id", "Request-Id",
}

// jsonType is the Content-Type that field J stands for.
const jsonType = "application/json"

func headerField(canonical string) string {
	for i, h := range headerCodes {
		if h == canonical && i < 10 { // one digit: field names stay one byte
			return strconv.Itoa(i)
		}
	}
	return ":" + canonical
}

func fieldHeader(f string) (string, bool) {
	if f[0] == ':' {
		return f[1:], len(f) > 1
	}
	if len(f) == 1 && f[0] >= '0' && f[0] <= '9' && int(f[0]-'0') < len(headerCodes) {
		return headerCodes[f[0]-'0'], true
	}
	return "", false
}

// opTag is what a record stores of an operation: 8 bytes of SHA-256 over its
// kind and op id. It only has to tell the last operation on one record from
// another, and keeps the record small whatever the op id's length. A record
// remembers only its last operation: a re-send after a later change is
// judged afresh.
func opTag(kind byte, id string) string {
	var buf [64]byte // an op id is at most 63 bytes (validOpID)
	sum := sha256.Sum256(append(append(buf[:0], kind), id...))
	return string(sum[:8])
}

// digestOf strips "sha256:", checks 64 lowercase hex digits and returns the
// 32 bytes they encode: records keep digests as bytes, half the size.
func digestOf(field, v string) (string, error) {
	h, ok := strings.CutPrefix(v, "sha256:")
	if !ok || len(h) != 64 {
		return "", fmt.Errorf("redisstore: %s: want sha256: followed by 64 lowercase hex digits", field)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("redisstore: %s: want sha256: followed by 64 lowercase hex digits", field)
		}
	}
	var b [32]byte
	hex.Decode(b[:], []byte(h))
	return string(b[:]), nil
}

// digestText is the "sha256:..." text of a stored digest: 32 bytes, or the
// 64 hex digits that records made before digests were packed hold.
func digestText(v string) (string, error) {
	switch len(v) {
	case 32:
		return hexText("sha256:", v), nil
	case 64:
		return "sha256:" + v, nil
	}
	return "", fmt.Errorf("digest of %d bytes", len(v))
}

// packKey stores a key as its 16 bytes: the vendor key is on every record of
// a vendor binding.
func packKey(k idempotency.Key) string {
	var b [16]byte
	hex.Decode(b[:], []byte(k.String()[len("idt_"):]))
	return string(b[:])
}

func unpackKey(v string) (idempotency.Key, error) {
	if len(v) != 16 {
		return idempotency.Key{}, fmt.Errorf("%w: vendor key of %d bytes, want 16", errCorruptRecord, len(v))
	}
	return idempotency.ParseKey(hexText("idt_", v))
}

// hexText is prefix followed by the lowercase hex digits of v, in one
// allocation: a decoded record renders two digests and a key so.
func hexText(prefix, v string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(prefix) + 2*len(v))
	b.WriteString(prefix)
	for i := 0; i < len(v); i++ {
		b.WriteByte(digits[v[i]>>4])
		b.WriteByte(digits[v[i]&15])
	}
	return b.String()
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// decodeRecord reads a flat field/value list (HGETALL order) of the record
// of key in scope. now is the server time in milliseconds, or 0 when the
// caller does not judge leases.
func decodeRecord(scope idempotency.Scope, key idempotency.Key, flat []string, nowMS int64, version int) (idempotency.Record, error) {
	if len(flat)%2 != 0 {
		return idempotency.Record{}, fmt.Errorf("%w: odd field list", errCorruptRecord)
	}
	r := idempotency.Record{Key: key, SchemaVersion: version}
	var res idempotency.StoredResult
	var hasResult, hasFinal, hasUpdated, hasSent, hasConn, hasTool bool
	var leaseMS, created, updated, final, first int64
	size := -1
	for i := 0; i < len(flat); i += 2 {
		f, v := flat[i], flat[i+1]
		var err error
		switch f {
		case "m":
			err = decodeMeta(&r, v)
		case "w":
			r.ScopeVersion, err = strconv.Atoi(v)
		case "q":
			r.RequestHash, err = digestText(v)
		case "f":
			r.Route.Fingerprint, err = digestText(v)
		case "c":
			hasConn, r.Route.Connection = true, v
		case "p":
			r.Route.Provider = v
		case "T":
			hasTool, r.Route.Tool = true, v
		case "M":
			r.Route.Method = v
		case "H":
			r.Route.Host = v
		case "P":
			r.Route.Path = v
		case "u":
			r.Route.UpstreamTool = v
		case "k":
			r.VendorKey, err = unpackKey(v)
		case "n":
			r.AttemptCount, err = strconv.Atoi(v)
		case "s":
			hasSent = true
			r.SentAttempts, err = strconv.Atoi(v)
		case "e":
			var ms int64
			ms, err = strconv.ParseInt(v, 10, 64)
			r.AttemptDeadline = msTime(ms)
		case "E":
			var ms int64
			ms, err = strconv.ParseInt(v, 10, 64)
			r.EarlierDeadline = msTime(ms)
		case "l":
			leaseMS, err = strconv.ParseInt(v, 10, 64)
			r.LeaseDeadline = msTime(leaseMS)
		case "t":
			r.Ticket = v
		case "a":
			r.Approved = v == "1"
			r.ApprovalDenied = v == "0"
		case "C":
			created, err = strconv.ParseInt(v, 10, 64)
		case "W":
			first, err = strconv.ParseInt(v, 10, 64)
		case "U":
			hasUpdated = true
			updated, err = strconv.ParseInt(v, 10, 64)
		case "F":
			hasFinal = true
			final, err = strconv.ParseInt(v, 10, 64)
		case "x":
			hasResult = true
			res.Status, err = strconv.Atoi(v)
		case "B":
			hasResult = true
			res.Body = []byte(v)
		case "D":
			hasResult = true
			res.BodyDropped = v == "1"
		case "z":
			size, err = strconv.Atoi(v)
		case "J":
			hasResult = true
			if res.Header == nil {
				res.Header = make(http.Header)
			}
			res.Header["Content-Type"] = []string{jsonType}
		case "R":
			r.Resolution, err = decodeResolution(v)
		case "y", "o", "O":
		default:
			name, ok := "", false
			if f != "" {
				name, ok = fieldHeader(f)
			}
			if !ok {
				continue // a field of a later schema minor: ignore
			}
			hasResult = true
			if res.Header == nil {
				res.Header = make(http.Header)
			}
			res.Header[name] = strings.Split(v, "\n")
		}
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("%w: field %s: %v", errCorruptRecord, f, err)
		}
	}
	if size >= 0 {
		if res.Body == nil {
			return idempotency.Record{}, fmt.Errorf("%w: a body size without a body", errCorruptRecord)
		}
		b, err := decompressBody(res.Body, size)
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("%w: %v", errCorruptRecord, err)
		}
		res.Body = b
	}
	if r.State == "" {
		return idempotency.Record{}, fmt.Errorf("%w: no state", errCorruptRecord)
	}
	r.Route.Connection = unscopeFact(scope.Connection, r.Route.Connection, hasConn)
	r.Route.Tool = unscopeFact(scope.Tool, r.Route.Tool, hasTool)
	if !hasSent {
		r.SentAttempts = r.AttemptCount
	}
	r.CreatedAt = msTime(created)
	r.FirstAttemptAt = r.CreatedAt
	if first > 0 {
		r.FirstAttemptAt = msTime(first)
	}
	if hasFinal {
		r.FinalizedAt = msTime(created + final)
		r.UpdatedAt = r.FinalizedAt
	}
	if hasUpdated {
		r.UpdatedAt = msTime(updated)
	}
	if hasResult {
		r.Result = &res
	}
	if r.Resolution != nil {
		r.Resolution.Outcome = r.State
	}
	if r.State == effectspec.InProgress && nowMS > 0 && leaseMS <= nowMS {
		r.State = effectspec.Unknown
	}
	return r, nil
}

// decodeMeta reads field m: state, key source, binding.
func decodeMeta(r *idempotency.Record, m string) error {
	if len(m) != 3 {
		return fmt.Errorf("%d bytes, want 3", len(m))
	}
	st, ok := codeStates[m[:1]]
	if !ok {
		return fmt.Errorf("state %q", m[:1])
	}
	r.State = st
	switch m[1] {
	case 's':
		r.KeySource = idempotency.KeySupplied
	case 'm':
		r.KeySource = idempotency.KeyMinted
	default:
		return fmt.Errorf("key source %q", m[1:2])
	}
	b, ok := codeBinding(m[2:])
	if !ok {
		return fmt.Errorf("binding %q", m[2:])
	}
	r.Binding = b
	return nil
}

// encodeResult turns a result into finalize arguments: status, dropped flag,
// body (compressed, see compressBody), its size before compression or "",
// then header field/value pairs. Only [idempotency.SafeHeader] headers are
// kept. When body and headers exceed max bytes the body is dropped (and
// BodyDropped set); headers that alone exceed max are dropped too.
func encodeResult(res *idempotency.StoredResult, max int) []string {
	if res == nil {
		return []string{"", "0", "", ""}
	}
	status := ""
	if res.Status != 0 {
		status = strconv.Itoa(res.Status)
	}
	var hdr []string
	size := 0
	names := make([]string, 0, len(res.Header))
	for name := range res.Header {
		names = append(names, name)
	}
	seen := make(map[string]bool, len(names))
	slices.Sort(names)
	for _, name := range names {
		canon := http.CanonicalHeaderKey(name)
		vals := res.Header[name]
		if !idempotency.SafeHeader(canon) || len(vals) == 0 || seen[canon] {
			continue
		}
		v := strings.Join(vals, "\n")
		if strings.ContainsAny(v, "\r\x00") || strings.Contains(strings.Join(vals, ""), "\n") {
			continue // not a valid field value; it could not be split back
		}
		seen[canon] = true
		if canon == "Content-Type" && v == jsonType {
			hdr = append(hdr, "J", "") // most stored answers: 2 bytes, not 18
		} else {
			hdr = append(hdr, headerField(canon), v)
		}
		size += len(canon) + len(v)
	}
	if size > max {
		hdr = nil
		size = 0
	}
	dropped := res.BodyDropped
	body := ""
	if size+len(res.Body) > max {
		dropped = true
	} else {
		body = string(res.Body) // only a body that is kept is copied
	}
	flag := "0"
	if dropped {
		flag = "1"
	}
	orig := ""
	if c, n := compressBody([]byte(body)); n > 0 {
		body, orig = string(c), strconv.Itoa(n)
	}
	return append([]string{status, flag, body, orig}, hdr...)
}

// decodeResolution reads field R: who, time (ms), note, joined by 0x1f.
func decodeResolution(v string) (*receipt.Resolution, error) {
	parts := strings.SplitN(v, "\x1f", 3)
	if len(parts) != 3 {
		return nil, errors.New("resolution: want 3 parts")
	}
	at, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, err
	}
	return &receipt.Resolution{By: parts[0], At: msTime(at), Note: parts[2]}, nil
}

// RecordFields renders a stored record value (what GET returns for a
// record key, schema 2, tagged or in the final form) as field/value pairs
// in the order stored (the final form's: that of unpackFinal), numbers
// as decimal text and the body decompressed, as HGETALL showed a schema 1
// record: for audits that read Redis directly, such as scans for secrets,
// which would not see into a compressed body. The field names are those of
// lua/common.lua. It returns errCorruptRecord for anything else.
func RecordFields(value string) ([]string, error) {
	flat, err := unpackRecord(value)
	if err != nil {
		return nil, err
	}
	size, body := -1, -1
	for i := 0; i < len(flat); i += 2 {
		switch flat[i] {
		case "z":
			if size, err = strconv.Atoi(flat[i+1]); err != nil {
				return nil, fmt.Errorf("%w: field z: %v", errCorruptRecord, err)
			}
		case "B":
			body = i + 1
		}
	}
	if size >= 0 && body >= 0 {
		b, err := decompressBody([]byte(flat[body]), size)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorruptRecord, err)
		}
		flat[body] = string(b)
	}
	return flat, nil
}
