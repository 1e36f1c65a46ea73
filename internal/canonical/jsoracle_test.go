package canonical

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// jsOracle reads lines, each a double in its shortest decimal, and writes
// for each a line of tab-separated texts: JSON.stringify of the double (its
// RFC 8785 form), then what toPrecision(17), toPrecision(16) and
// toExponential(16) print it as.
const jsOracle = `
const rl = require("readline").createInterface({input: process.stdin});
const out = [];
rl.on("line", (line) => {
	const x = JSON.parse(line);
	out.push([JSON.stringify(x), x.toPrecision(17), x.toPrecision(16), x.toExponential(16)].join("\t"));
});
rl.on("close", () => process.stdout.write(out.join("\n") + "\n"));
`

// TestCanonicalizeMatchesJavaScript: a double printed at a fixed precision
// (by JavaScript's toPrecision and toExponential, and as C's %.17g and %.16g
// print it), in a text with a '.' or an exponent that reads back as the
// double, canonicalizes as JavaScript writes the double,
// JSON.stringify. An independent oracle, so it is skipped without node;
// TestCanonicalizePrintedDoubles holds its vectors.
func TestCanonicalizeMatchesJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: no JavaScript oracle")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	g := &docGen{r: rand.New(rand.NewPCG(seed, 0x0b06))}
	doubles := append([]float64(nil), hardDoubles...)
	// Doubles halfway between two 17-digit decimals: toPrecision(17)
	// rounds them up, %.17g to even.
	doubles = append(doubles, 1234567890123456.25, 1571742410925541.75, 1000000000000000.25, 2251799813685247.75,
		0.1, 47839.39500339329, 4.14406956e-315)
	for range 5000 {
		doubles = append(doubles, g.number())
	}
	var in strings.Builder
	for _, f := range doubles {
		in.WriteString(strconv.FormatFloat(f, 'g', -1, 64) + "\n")
	}
	cmd := exec.Command(node, "-e", jsOracle)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	lines, checked, refined, integers := 0, 0, 0, 0
	for ; sc.Scan(); lines++ {
		texts := strings.Split(sc.Text(), "\t")
		if lines >= len(doubles) || len(texts) != 4 {
			t.Fatalf("node wrote %q", sc.Text())
		}
		f := doubles[lines]
		want := texts[0]
		for _, text := range append(texts[1:], strconv.FormatFloat(f, 'g', 17, 64), strconv.FormatFloat(f, 'g', 16, 64),
			strconv.FormatFloat(f, 'e', 16, 64), strconv.FormatFloat(f, 'e', 15, 64)) {
			if g, err := strconv.ParseFloat(text, 64); err != nil || g != f || !strings.ContainsAny(text, ".eE") {
				continue // an integer literal, or a text that is another double
			}
			got, err := JSON([]byte(text))
			if err != nil || string(got) != want {
				t.Errorf("seed %d: Canonicalize(%s) = %s, %v; JavaScript writes %s", seed, text, got, err, want)
			}
			if !fixedPoint(got) {
				t.Errorf("seed %d: Canonicalize(%s) = %s: not a fixed point", seed, text, got)
			}
			if f == math.Trunc(f) {
				integers++
			}
			checked++
			if old, _ := v1Canonicalize([]byte(text)); string(old) != want {
				refined++
			}
		}
	}
	if lines != len(doubles) || checked < len(doubles) || refined < len(doubles)/10 || integers < 100 {
		t.Fatalf("%d lines for %d doubles, %d texts checked, %d of them printed doubles, %d integer values",
			lines, len(doubles), checked, refined, integers)
	}
	t.Logf("%d texts checked, %d of them read as exact values before printed doubles, %d integer values", checked, refined, integers)
}

// fixedPoint reports whether a canonical form canonicalizes as itself.
func fixedPoint(canonical []byte) bool {
	again, err := JSON(canonical)
	return err == nil && string(again) == string(canonical)
}
