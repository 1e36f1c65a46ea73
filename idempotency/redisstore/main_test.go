package redisstore

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to conformanceParallel parallel subtests at once
// unless -test.parallel is given: the conformance suite against a real
// Redis and a Cluster waits on the server's clock (leases, windows,
// retention), and at the default, GOMAXPROCS (2 in CI), its subtests
// slept two at a time, about 100 s of the package's 320 s under -race.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", conformanceParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

const conformanceParallel = "16"
