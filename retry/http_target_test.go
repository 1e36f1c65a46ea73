package retry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestHTTPTargetAbsentArguments: arguments that hash as {} (none, blank,
// null) are sent as {}, with the key written at the body pointer; null used
// to be sent as it was, which no pointer can be written into.
func TestHTTPTargetAbsentArguments(t *testing.T) {
	bodies := make(chan string, 1)
	v := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(v.Close)
	key := idempotency.NewKey()
	want := `{"meta":{"idempotency_key":"` + key.String() + `"}}`
	for _, args := range []string{"", " \n", "null", "\tnull "} {
		res := (&retry.HTTPTarget{URL: v.URL}).Send(context.Background(),
			retry.Attempt{Key: key, Number: 1, Arguments: json.RawMessage(args), Spec: spec(effectspec.BindingBodyPointer)})
		if res.Phase != retry.Responded || res.Status != http.StatusOK {
			t.Fatalf("arguments %q: result %+v", args, res)
		}
		if got := <-bodies; got != want {
			t.Errorf("arguments %q: vendor got %s, want %s", args, got, want)
		}
	}
}
