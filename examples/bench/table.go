package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdicts of a row.
const (
	pass = "PASS"
	miss = "MISS"
	info = "info" // no target for this row
)

// row is one line of the result table.
type row struct {
	id      string // the row number
	name    string
	ours    string
	ref     string
	ratio   string
	target  string
	verdict string
}

type table struct{ rows []row }

func (t *table) add(r row) { t.rows = append(t.rows, r) }

func (t *table) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tmeasurement\tours\treference\tratio\ttarget\tresult")
	for _, r := range t.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.name, r.ours, r.ref, r.ratio, r.target, r.verdict)
	}
	tw.Flush()
}

func (t *table) count(pred func(row) bool) int {
	n := 0
	for _, r := range t.rows {
		if pred(r) {
			n++
		}
	}
	return n
}

func (t *table) passes() int  { return t.count(func(r row) bool { return r.verdict == pass }) }
func (t *table) targets() int { return t.count(func(r row) bool { return r.verdict != info }) }

// verdict is PASS when ok.
func verdict(ok bool) string {
	if ok {
		return pass
	}
	return miss
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// rate formats operations per second with thousands separators.
func rate(v float64) string { return group(int64(v+0.5)) + "/s" }

func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dur formats a duration with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3gs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	case d >= time.Microsecond:
		return fmt.Sprintf("%.3gµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%dns", d.Nanoseconds())
}

// bytesIEC formats a byte count in B, KiB, MiB or GiB.
func bytesIEC(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
