// Package printable makes text safe to show on a terminal: a message from
// a gateway or an operator's argument, echoed in an error or a table.
package printable

import (
	"strings"
	"unicode"
)

// Cut is s without control or format characters (a terminal would act on
// them), each replaced by a space, cut to at most n runes ("..." marks a
// cut).
func Cut(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if n == 0 {
			b.WriteString("...")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		b.WriteRune(r)
		n--
	}
	return b.String()
}
