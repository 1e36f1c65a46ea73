package main

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"testing"
)

// The bodies of row 5 are JSON of the sizes the table names, differ in
// every value from record to record, and do not compress as padding does.
func TestBodiesAreVariedJSON(t *testing.T) {
	a, b := chargeBody(1), chargeBody(2)
	if !json.Valid(a) || !json.Valid(b) {
		t.Fatalf("charge is not JSON: %s", a)
	}
	if len(a) < 950 || len(a) > smallBody {
		t.Errorf("charge is %d bytes, want about 1 KiB", len(a))
	}
	if !bytes.Equal(a, chargeBody(1)) {
		t.Error("the same seed gave another charge")
	}
	var ca, cb map[string]any
	if err := json.Unmarshal(a, &ca); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cb); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "amount", "created", "customer", "payment_intent"} {
		if ca[name] == cb[name] {
			t.Errorf("%s is %v in both records", name, ca[name])
		}
	}
	for _, name := range []string{"object", "paid"} {
		if _, ok := ca[name]; !ok {
			t.Errorf("no member %s: names must stay", name)
		}
	}
	if id, _ := ca["id"].(string); len(id) < 4 || id[:3] != "ch_" {
		t.Errorf("id %q lost its prefix", id)
	}

	l := chargeListBody(1, largeBody)
	if !json.Valid(l) || len(l) > largeBody || len(l) < largeBody-smallBody {
		t.Fatalf("list is %d bytes (valid %v), want just under 64 KiB", len(l), json.Valid(l))
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(l, &list); err != nil || len(list.Data) < 50 {
		t.Fatalf("list: %d charges, %v", len(list.Data), err)
	}
	if list.Data[0]["id"] == list.Data[1]["id"] {
		t.Error("two charges of a list share an id")
	}

	// Padding shrinks to almost nothing; a varied charge keeps most of its
	// size (its member names repeat within a list, which is real).
	if n := deflated(t, a); n < len(a)*45/100 {
		t.Errorf("a charge deflates from %d to %d bytes: too regular", len(a), n)
	}
}

func deflated(t *testing.T, b []byte) int {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Len()
}
