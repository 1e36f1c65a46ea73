package callkey_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/callkey"
	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/mcpgateway"
)

// The names read here are the ones mcpgateway publishes.
func TestWireNames(t *testing.T) {
	if callkey.MetaKey != mcpgateway.MetaKey || callkey.MetaTicket != mcpgateway.MetaTicket || callkey.HeaderKey != mcpgateway.HeaderKey {
		t.Errorf("callkey reads %q %q %q; mcpgateway publishes %q %q %q", callkey.MetaKey, callkey.MetaTicket, callkey.HeaderKey,
			mcpgateway.MetaKey, mcpgateway.MetaTicket, mcpgateway.HeaderKey)
	}
}

// Every refusal of a key, and of a near miss, is malformed_key.
func TestRefusalsAreMalformedKey(t *testing.T) {
	k := idempotency.NewKey().String()
	other := idempotency.NewKey().String()
	q := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	for name, c := range map[string]struct {
		header []string
		meta   json.RawMessage
	}{
		"meta not a string":   {nil, json.RawMessage(`17`)},
		"meta not a key":      {nil, q("idt_x")},
		"header not a key":    {[]string{"x"}, nil},
		"two keys":            {[]string{k}, q(other)},
		"two header fields":   {[]string{k, k}, nil},
		"header bad, meta ok": {[]string{"x"}, q(k)},
	} {
		if _, _, err := callkey.Key(c.header, c.meta); !errors.Is(err, idempotency.ErrMalformedKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got, src, err := callkey.Key([]string{k}, q(k)); err != nil || got.String() != k || src != idempotency.KeySupplied {
		t.Errorf("one key twice: %v %v %v", got, src, err)
	}
	if got, src, err := callkey.Key(nil, nil); err != nil || got.IsZero() || src != idempotency.KeyMinted {
		t.Errorf("no key: %v %v %v", got, src, err)
	}
	members := func(s string) []strictjson.Member {
		ms, err := strictjson.Members(nil, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	for name, err := range map[string]error{
		"params":  callkey.NearMiss(members(`{"_Meta":{}}`), nil),
		"meta":    callkey.NearMiss(members(`{"_meta":{}}`), members(`{"idempotency-key":"x"}`)),
		"header":  callkey.NearMissHeader(http.Header{"X-Idempotency-Key": {k}}, nil),
		"trailer": callkey.NearMissHeader(nil, http.Header{"Idempotency-Key": {k}}),
	} {
		if !errors.Is(err, idempotency.ErrMalformedKey) {
			t.Errorf("near miss in %s: %v", name, err)
		}
	}
	if err := callkey.NearMiss(members(`{"_meta":{}}`), members(`{"dev.obol/idempotency-key":"x"}`)); err != nil {
		t.Errorf("exact names: %v", err)
	}
}
