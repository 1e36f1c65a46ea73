package composio

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/obol-gateway/obol/broker"
)

const (
	okReply   = `{"data":{"id":1},"error":null,"successful":true,"log_id":"log_1"}`
	failReply = `{"data":{},"error":"Issue creation failed: 422","successful":false,"log_id":"log_2"}`
)

func TestParseReply(t *testing.T) {
	rep, err := parseReply([]byte(failReply))
	if err != nil || rep.Successful || string(rep.Error) != `"Issue creation failed: 422"` || rep.LogID != "log_2" || string(rep.Data) != `{}` {
		t.Errorf("parseReply = %+v, %v", rep, err)
	}
	rep, err = parseReply([]byte(okReply))
	if err != nil || !rep.Successful || string(rep.Data) != `{"id":1}` {
		t.Errorf("parseReply = %+v, %v", rep, err)
	}
}

// FuzzParseReply: parseReply never panics, and whenever it decides, its
// verdict is what encoding/json reads from a body with one "successful".
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{okReply, failReply, `{"successful":true}`, `{"successful":null}`,
		`{"successful":false,"successful":true}`, `{"successful":true,"SUCCESSFUL":false}`, `[]`, `{"a":{"successful":true}}`, ``, `{"successful":true}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := parseReply(body)
		if err != nil {
			if !errors.Is(err, broker.ErrUndecidableReply) {
				t.Fatalf("err %v does not wrap ErrUndecidableReply", err)
			}
			return
		}
		var v struct {
			Successful *bool `json:"successful"`
		}
		if json.Unmarshal(body, &v) != nil || v.Successful == nil || *v.Successful != rep.Successful {
			t.Fatalf("parseReply(%q) = %v, encoding/json reads %v", body, rep.Successful, v.Successful)
		}
	})
}
