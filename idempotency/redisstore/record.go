package redisstore

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// schemaVersion is the layout of the record hash (field names and codes
// below). Changing any of them is a new schema.
const schemaVersion = 1

var stateCodes = map[idempotency.State]string{
	idempotency.StateHeld:               "h",
	idempotency.StateInFlight:           "f",
	idempotency.StateAccepted:           "a",
	idempotency.StateDefinitelyRejected: "r",
	idempotency.StateUnknown:            "u",
	idempotency.StateDenied:             "d",
}

var codeStates = func() map[string]idempotency.State {
	m := make(map[string]idempotency.State, len(stateCodes))
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
	}
	return "", false
}

// headerCodes name the stored headers compactly: field "h"+index. A safe
// header that is not listed here is stored as "h:"+canonical name. Append
// only: the index is part of the schema.
var headerCodes = [...]string{
	"Content-Type", "Content-Language", "Content-Encoding", "Etag", "Last-Modified",
	"Retry-After", "Idempotency-Key", "Idempotent-Replayed", "X-Request-Id", "Request-Id",
}

func headerField(canonical string) string {
	for i, h := range headerCodes {
		if h == canonical {
			return "h" + strconv.Itoa(i)
		}
	}
	return "h:" + canonical
}

func fieldHeader(f string) (string, bool) {
	if strings.HasPrefix(f, "h:") {
		return f[2:], len(f) > 2
	}
	i, err := strconv.Atoi(f[1:])
	if err != nil || i < 0 || i >= len(headerCodes) {
		return "", false
	}
	return headerCodes[i], true
}

// hexOf strips "sha256:" and checks 64 lowercase hex digits.
func hexOf(field, v string) (string, error) {
	h, ok := strings.CutPrefix(v, "sha256:")
	if !ok || len(h) != 64 {
		return "", fmt.Errorf("redisstore: %s: want sha256: followed by 64 lowercase hex digits", field)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("redisstore: %s: want sha256: followed by 64 lowercase hex digits", field)
		}
	}
	return h, nil
}

func msTime(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// decodeRecord reads a flat field/value list (HGETALL order). now is the
// server time in milliseconds, or 0 when the caller does not judge leases.
func decodeRecord(key idempotency.Key, flat []string, nowMS int64) (idempotency.Record, error) {
	if len(flat)%2 != 0 {
		return idempotency.Record{}, fmt.Errorf("%w: odd field list", ErrCorruptRecord)
	}
	r := idempotency.Record{Key: key}
	var res idempotency.StoredResult
	var hasResult bool
	var leaseMS int64
	for i := 0; i < len(flat); i += 2 {
		f, v := flat[i], flat[i+1]
		var err error
		switch f {
		case "v":
			r.SchemaVersion, err = strconv.Atoi(v)
		case "sv":
			r.ScopeVersion, err = strconv.Atoi(v)
		case "s":
			st, ok := codeStates[v]
			if !ok {
				err = fmt.Errorf("state %q", v)
			}
			r.State = st
		case "ks":
			switch v {
			case "s":
				r.KeySource = idempotency.KeySupplied
			case "m":
				r.KeySource = idempotency.KeyMinted
			default:
				err = fmt.Errorf("key source %q", v)
			}
		case "rh":
			r.RequestHash = "sha256:" + v
		case "b":
			b, ok := codeBinding(v)
			if !ok {
				err = fmt.Errorf("binding %q", v)
			}
			r.Binding = b
		case "fp":
			r.Fingerprint = "sha256:" + v
		case "rc":
			r.Route.Connection = v
		case "rp":
			r.Route.Provider = v
		case "n":
			r.AttemptCount, err = strconv.Atoi(v)
		case "l":
			leaseMS, err = strconv.ParseInt(v, 10, 64)
			r.LeaseDeadline = time.UnixMilli(leaseMS).UTC()
		case "t":
			r.Ticket = v
		case "ap":
			r.Approved = v == "1"
		case "st":
			hasResult = true
			res.Status, err = strconv.Atoi(v)
		case "bd":
			hasResult = true
			res.Body = []byte(v)
		case "bx":
			hasResult = true
			res.BodyDropped = v == "1"
		case "ca":
			r.CreatedAt = msTime(v)
		case "ua":
			r.UpdatedAt = msTime(v)
		case "fa":
			r.FinalizedAt = msTime(v)
		case "cy", "op":
		default:
			if f[0] != 'h' {
				continue // a field of a later schema minor: ignore
			}
			name, ok := fieldHeader(f)
			if !ok {
				err = fmt.Errorf("header field %q", f)
				break
			}
			hasResult = true
			if res.Header == nil {
				res.Header = make(http.Header)
			}
			res.Header[name] = strings.Split(v, "\n")
		}
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("%w: field %s: %v", ErrCorruptRecord, f, err)
		}
	}
	if r.SchemaVersion != schemaVersion {
		return idempotency.Record{}, fmt.Errorf("%w: schema version %d, want %d", ErrCorruptRecord, r.SchemaVersion, schemaVersion)
	}
	if r.State == "" {
		return idempotency.Record{}, fmt.Errorf("%w: no state", ErrCorruptRecord)
	}
	if hasResult {
		r.Result = &res
	}
	if r.State == idempotency.StateInFlight && nowMS > 0 && leaseMS <= nowMS {
		r.State = idempotency.StateUnknown
	}
	return r, nil
}

// encodeResult turns a result into finalize arguments: status, dropped flag,
// body, then header field/value pairs. Only idempotency.SafeHeader headers
// are kept. When body and headers exceed max bytes the body is dropped (and
// BodyDropped set); headers that alone exceed max are dropped too.
func encodeResult(res *idempotency.StoredResult, max int) []string {
	if res == nil {
		return []string{"", "0", ""}
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
		hdr = append(hdr, headerField(canon), v)
		size += len(canon) + len(v)
	}
	if size > max {
		hdr = nil
		size = 0
	}
	dropped := res.BodyDropped
	body := string(res.Body)
	if size+len(body) > max {
		body, dropped = "", true
	}
	flag := "0"
	if dropped {
		flag = "1"
	}
	return append([]string{status, flag, body}, hdr...)
}
