// Package doccheck holds a test that keeps every package comment in the
// module to one screen: at most [MaxOverviewLines] lines of `go doc`
// overview. The detail belongs in the folder's README.md, in
// docs/DESIGN.md, or on the type or function it is about.
//
// It has no API beyond the limit; run it with
//
//	go test ./internal/doccheck
package doccheck

// MaxOverviewLines is the most lines a package comment may take once
// rendered as `go doc` renders it (80 columns, code indented).
const MaxOverviewLines = 30
