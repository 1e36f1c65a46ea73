package redisstore

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// FuzzDecodeRecord feeds the record decoder any bytes, as a corrupted or
// hostile Redis could hold them: it returns a record or errCorruptRecord,
// never panics, and never holds a body larger than the size the record
// states (a compressed body cannot expand past it). Its seeds are records
// the store writes (testdata/fuzz/FuzzDecodeRecord).
func FuzzDecodeRecord(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, body := range [][]byte{nil, []byte(`{"ok":true}`), chargeJSON(rng)} {
		args := encodeResult(&idempotency.StoredResult{Status: 201, Body: body,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Custom": {"a:b"}}}, 1<<20)
		fields := map[string]string{"m": "asu", "w": "1", "q": string(make([]byte, 32)), "f": string(make([]byte, 32)),
			"n": "1", "C": "1700000000000", "F": "12", "o": "12345678", "x": args[0], "B": args[2], "z": args[3], "0": args[5]}
		if args[3] == "" {
			delete(fields, "z")
		}
		f.Add(packRecord(fields))
	}
	// An MCP route's record: binding meta, an upstream tool.
	f.Add(packRecord(map[string]string{"m": "fsm", "w": "1", "q": string(make([]byte, 32)), "f": string(make([]byte, 32)),
		"n": "1", "C": "1700000000000", "c": "conn", "H": "mcp.example", "P": "/mcp", "u": "create_payment"}))
	// Records of the previous release's scripts, and final records in the
	// final form as this release's write them.
	for _, r := range taggedRecords(f) {
		f.Add(r.raw(f))
	}
	m := newMini(f, Options{})
	for _, res := range []*idempotency.StoredResult{nil, {Status: 201, Body: chargeJSON(rng), Header: http.Header{
		"Content-Type": {"application/json"}, "Request-Id": {"req_1"}}}, {Status: 599, BodyDropped: true}} {
		k := idempotency.NewKey()
		c := mustClaim(f, m.store, claimReq(k), idempotency.StatusClaimed)
		mustFinalize(f, m.store, k, c.Token, effectspec.Accepted, res)
		raw, err := m.mr.Get(m.recordKey(f, k))
		if err != nil || raw[0] != finalForm {
			f.Fatalf("no final form: %q, %v", raw, err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		rec, err := decodeStored(testScope, idempotency.Key{}, raw, 0, schemaVersion)
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("error %v is not errCorruptRecord", err)
			}
			return
		}
		if rec.Result != nil && len(rec.Result.Body) > len(raw) {
			flat, _ := unpackRecord(raw)
			for i := 0; i < len(flat); i += 2 {
				if flat[i] == "z" {
					return // decompressed, within the size it states (decompressBody)
				}
			}
			t.Fatalf("body of %d bytes from %d stored", len(rec.Result.Body), len(raw))
		}
	})
}
