package redisstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/flate"
)

// plainDeflate is how bodies were stored before the dictionary.
func plainDeflate(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flateLevel)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(body)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// answers are vendor answers of different shapes: the charge the tests
// draw, and answers of other APIs kept in testdata/answers.
func answers(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"charge": chargeJSON(rand.New(rand.NewPCG(11, 11)))}
	paths, err := filepath.Glob("testdata/answers/*.json")
	if err != nil || len(paths) < 3 {
		t.Fatalf("testdata/answers: %v, %d files", err, len(paths))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = bytes.TrimSpace(b)
	}
	return out
}

// TestDictionaryIsGeneral: the dictionary makes answers of every shape
// smaller, not only the one the benchmark stores, and they replay exactly.
func TestDictionaryIsGeneral(t *testing.T) {
	for name, body := range answers(t) {
		stored, size := compressBody(body)
		if size != len(body) || stored[0] != dictMarker {
			t.Fatalf("%s: stored %d bytes of %d, size %d, first byte 0x%02x", name, len(stored), len(body), size, stored[0])
		}
		plain := plainDeflate(t, body)
		t.Logf("%-20s %5d B: DEFLATE %4d B, with the dictionary %4d B (%.1f%% less)", name, len(body), len(plain), len(stored),
			100*float64(len(plain)-len(stored))/float64(len(plain)))
		if len(stored) >= len(plain) {
			t.Errorf("%s: the dictionary does not help: %d B against %d B", name, len(stored), len(plain))
		}
		back, err := decompressBody(stored, size)
		if err != nil || !bytes.Equal(back, body) {
			t.Fatalf("%s: round trip: %v", name, err)
		}
	}
}

// TestSmallBodiesStateless: a body below statelessBelow is compressed
// without state, with the dictionary's marker, smaller than it was, and
// replays byte for byte at every length around the thresholds.
func TestSmallBodiesStateless(t *testing.T) {
	ticket := []byte(`{"content":[{"type":"text","text":"Opened ticket tk_12345."}],"structuredContent":{"id":"tk_12345","status":"open","priority":"normal","tags":["printer","fire"],"notes":"`)
	for n := compressAbove; n <= statelessBelow+64; n++ {
		body := append([]byte(nil), ticket...)
		for len(body) < n-2 {
			body = append(body, "abcdefghij"[len(body)%10])
		}
		body = append(body[:n-2], `"}`...)
		stored, size := compressBody(body)
		if n == compressAbove {
			if size != 0 || !bytes.Equal(stored, body) {
				t.Fatalf("%d B: compressed at the threshold", n)
			}
			continue
		}
		if size != n || stored[0] != dictMarker || len(stored) >= n {
			t.Fatalf("%d B: stored %d B, size %d, first byte 0x%02x", n, len(stored), size, stored[0])
		}
		back, err := decompressBody(stored, size)
		if err != nil || !bytes.Equal(back, body) {
			t.Fatalf("%d B: round trip: %v", n, err)
		}
		var want bytes.Buffer
		want.WriteByte(dictMarker)
		if err := flate.StatelessDeflate(&want, body, true, jsonDict); err != nil {
			t.Fatal(err)
		}
		if stateless := bytes.Equal(stored, want.Bytes()); stateless != (n < statelessBelow) {
			t.Fatalf("%d B: compressed without state %v, want %v", n, stateless, n < statelessBelow)
		}
	}
}

// TestBodiesBeforeTheDictionary: a body stored as plain DEFLATE by an
// earlier release still replays byte for byte; a body starting with another
// byte that no DEFLATE stream starts with is refused.
func TestBodiesBeforeTheDictionary(t *testing.T) {
	for name, body := range answers(t) {
		plain := plainDeflate(t, body)
		if plain[0]>>1&3 == 3 {
			t.Fatalf("%s: a DEFLATE stream starts with a marker byte 0x%02x", name, plain[0])
		}
		back, err := decompressBody(plain, len(body))
		if err != nil || !bytes.Equal(back, body) {
			t.Fatalf("%s: plain DEFLATE body: %v", name, err)
		}
	}
	stored, size := compressBody(bytes.Repeat([]byte(`{"id":"x"}`), 30))
	for _, marker := range []byte{0x06, 0x07, 0xff} {
		bad := append([]byte{marker}, stored[1:]...)
		if _, err := decompressBody(bad, size); err == nil {
			t.Errorf("marker 0x%02x read", marker)
		}
	}
	// The previous release reads every compressed body as plain DEFLATE: a
	// dictionary body fails there (block type 3), never reads as other bytes.
	if _, err := io.ReadAll(flate.NewReader(bytes.NewReader(stored))); err == nil {
		t.Error("a dictionary body reads as plain DEFLATE")
	}
	// The dictionary's stream read without it fails or differs: the marker
	// is what tells them apart.
	if back, err := decompressBody(stored[1:], size); err == nil && bytes.Equal(back, bytes.Repeat([]byte(`{"id":"x"}`), 30)) {
		t.Error("a dictionary stream reads the same without its dictionary")
	}
}

// TestDictionaryIsFixed: stored bodies are read with these very bytes, so
// an edit of jsonDict would make every record written before it unreadable.
// A different dictionary needs its own marker.
func TestDictionaryIsFixed(t *testing.T) {
	const want = "912cafff73ab320ae27e4a67a17fc65834da7a2c3ada384af9992d969e80533f"
	sum := sha256.Sum256(jsonDict)
	if got := hex.EncodeToString(sum[:]); got != want || len(jsonDict) != 1594 {
		t.Fatalf("jsonDict changed: %d bytes, SHA-256 %s; want 1594 bytes, %s", len(jsonDict), got, want)
	}
}

// BenchmarkCompressBody: the gateway's cost of storing a 1 KiB answer.
func BenchmarkCompressBody(b *testing.B) {
	body := chargeJSON(rand.New(rand.NewPCG(11, 11)))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		compressBody(body)
	}
}
