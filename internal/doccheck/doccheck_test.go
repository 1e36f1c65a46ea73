package doccheck

import (
	"bytes"
	"errors"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot walks up from the test's directory to the go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// packageDirs lists the directories `go list ./...` would: every directory
// under root holding buildable Go files, skipping testdata, vendor, names
// starting with "." or "_", and nested modules.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root {
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// overview renders the package comment of dir as `go doc` does and returns
// it, with ok false when dir holds no buildable package.
func overview(t *testing.T, dir string) (pkgName, text string, ok bool) {
	t.Helper()
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return "", "", false
		}
		t.Fatalf("%s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return "", "", false
	}
	p, err := doc.NewFromFiles(fset, files, bp.ImportPath)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	pr := p.Printer()
	pr.TextCodePrefix = "    "
	return p.Name, string(pr.Text(p.Parser().Parse(p.Doc))), true
}

func TestPackageDocsFitOneScreen(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	for _, dir := range packageDirs(t, root) {
		name, text, ok := overview(t, dir)
		if !ok {
			continue
		}
		checked++
		rel, _ := filepath.Rel(root, dir)
		if strings.TrimSpace(text) == "" {
			t.Errorf("%s: package %s has no package comment", rel, name)
			continue
		}
		lines := bytes.Count([]byte(strings.TrimRight(text, "\n")), []byte("\n")) + 1
		if testing.Verbose() {
			t.Logf("%-40s %3d lines", rel, lines)
		}
		if lines > MaxOverviewLines {
			t.Errorf("%s: package comment is %d lines of go doc overview, want at most %d; move the detail to %s/README.md or docs/DESIGN.md",
				rel, lines, MaxOverviewLines, rel)
		}
	}
	if checked == 0 {
		t.Fatal("found no packages under the module root")
	}
}
