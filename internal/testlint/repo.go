// Package testlint checks the repository's tests for what go vet cannot see. Vet's
// testinggoroutine check finds t.Fatal called directly in a goroutine the test
// started; a helper that takes the test's *testing.T and fails it (testenv.ServerWith,
// testenv.WaitFor) hides the same mistake from it. Goroutines follows such calls
// through the repository's own functions, by reading the source alone.
package testlint

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// repo is the repository's test code as parsed: every _test.go file, and every other
// file that imports "testing" (the test helper packages).
type repo struct {
	root    string
	fset    *token.FileSet
	modules map[string]string // module path to its directory
	files   []*file
	funcs   map[funcKey]*function
	// testing holds, for each directory, the names declared with a testing type
	// (parameters, variables and struct fields): the receivers of t.Fatal.
	testing map[string]map[string]bool
}

// file is one parsed file and what its imports name.
type file struct {
	dir     string
	ast     *ast.File
	imports map[string]string // local name to the directory of an in-repo import, or "" for one outside
	testing string            // the local name of package testing, if imported
}

// funcKey names a function or method: the directory of its package, its receiver's
// type name ("" for a function), and its name.
type funcKey struct{ dir, recv, name string }

type function struct {
	key  funcKey
	file *file
	decl *ast.FuncDecl
	// fails says why the function may fail its test (t.Fatalf, or the helper it
	// calls and why that one does); "" when it cannot.
	fails string
}

// load parses the test code under root, skipping hidden directories, testdata,
// vendor and node_modules.
func load(root string) (*repo, error) {
	r := &repo{root: root, fset: token.NewFileSet(), modules: map[string]string{},
		funcs: map[funcKey]*function{}, testing: map[string]map[string]bool{}}
	var paths []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case name == "go.mod":
			if mod, err := modulePath(path); err == nil && mod != "" {
				r.modules[mod] = filepath.Dir(path)
			}
		case strings.HasSuffix(name, ".go"):
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, path := range paths {
		if err := r.parse(path); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// parse reads one file if it is test code, and indexes its functions.
func (r *repo) parse(path string) error {
	f, err := parser.ParseFile(r.fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	fl := &file{dir: filepath.Dir(path), ast: f, imports: map[string]string{}}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if p == "testing" {
			fl.testing = name
		}
		fl.imports[name] = r.dirOf(p)
	}
	if !strings.HasSuffix(path, "_test.go") && fl.testing == "" {
		return nil
	}
	r.files = append(r.files, fl)
	names := r.testing[fl.dir]
	if names == nil {
		names = map[string]bool{}
		r.testing[fl.dir] = names
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if fields, ok := n.(*ast.FieldList); ok {
			for _, field := range fields.List {
				if fl.isTestingType(field.Type) {
					for _, id := range field.Names {
						names[id.Name] = true
					}
				}
			}
		}
		if v, ok := n.(*ast.ValueSpec); ok && v.Type != nil && fl.isTestingType(v.Type) {
			for _, id := range v.Names {
				names[id.Name] = true
			}
		}
		return true
	})
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			k := funcKey{fl.dir, recvType(fd), fd.Name.Name}
			r.funcs[k] = &function{key: k, file: fl, decl: fd}
		}
	}
	return nil
}

// isTestingType tells *testing.T, *testing.B, *testing.F and testing.TB.
func (f *file) isTestingType(e ast.Expr) bool {
	if f.testing == "" {
		return false
	}
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || pkg.Name != f.testing {
		return false
	}
	switch sel.Sel.Name {
	case "T", "B", "F", "TB":
		return true
	}
	return false
}

// dirOf is the directory of an import path inside one of the repository's modules,
// or "" for one outside.
func (r *repo) dirOf(path string) string {
	best := ""
	for mod := range r.modules {
		if (path == mod || strings.HasPrefix(path, mod+"/")) && len(mod) > len(best) {
			best = mod
		}
	}
	if best == "" {
		return ""
	}
	return filepath.Join(r.modules[best], filepath.FromSlash(strings.TrimPrefix(path, best)))
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", sc.Err()
}

// recvType is the name of a method's receiver type, "" for a function.
func recvType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	return typeName(fd.Recv.List[0].Type)
}

// typeName is the name of a (pointer to a, generic) named type, "" for any other.
func typeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
