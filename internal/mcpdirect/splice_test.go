package mcpdirect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSDKText: appendSDKText writes what json.Marshal writes of the text.
func FuzzSDKText(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\b\f\n\r\t\x00\x1f\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "a\xe2\x82b", "\xef\xbf\xbd\xff", "é\xc3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, err := json.Marshal(strings.ToValidUTF8(string(body), string(utf8.RuneError)))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSDKText(nil, body); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", body, got, want)
		}
	})
}
