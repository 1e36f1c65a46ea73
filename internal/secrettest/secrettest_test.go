package secrettest_test

import (
	"encoding/base64"
	"testing"

	"github.com/obol-gateway/obol/internal/secrettest"
)

func TestLeak(t *testing.T) {
	const s = "sk_9f/8e<7d>&c"
	for _, b := range []string{
		"x" + s + "y",
		`{"a":"sk_9f/8e\u003c7d\u003e\u0026c"}`,
		`{"a":"sk_9f\/8e<7d>&c"}`,
		`"sk_9f/8e\u003C7d\u003E\u0026c"`,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+s)),
		base64.RawURLEncoding.EncodeToString([]byte("ab" + s + "cd")),
	} {
		if secrettest.Leak([]byte(b), "other_secret", s) == "" {
			t.Errorf("no leak seen in %s", b)
		}
	}
	for _, b := range []string{"", "sk_9f/8e", `{"a":"[redacted]"}`, base64.StdEncoding.EncodeToString([]byte("sk_9f/8e<7d"))} {
		if l := secrettest.Leak([]byte(b), s); l != "" {
			t.Errorf("%s seen in %s", l, b)
		}
	}
}
