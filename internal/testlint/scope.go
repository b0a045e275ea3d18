package testlint

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
)

// stops are the methods of testing.TB that end the test with runtime.Goexit: they
// must run on the test's own goroutine.
var stops = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// typeRef is a named type: the directory of its package and its name.
type typeRef struct{ dir, name string }

// scope resolves the calls made inside one function declaration, from its source:
// which of the repository's functions a call reaches, and whether it may stop the test.
type scope struct {
	r    *repo
	file *file
	// vars are the variables whose type the source spells out: receiver,
	// parameters, `var x T`, `x := T{...}` and `x := &T{...}`.
	vars map[string]typeRef
	// closures are the function literals the declaration names (f := func...) that
	// may stop the test, with why.
	closures map[string]string
}

func (r *repo) scopeOf(fn *function) *scope {
	s := &scope{r: r, file: fn.file, vars: map[string]typeRef{}, closures: map[string]string{}}
	named := map[string]*ast.FuncLit{}
	ast.Inspect(fn.decl, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			s.declare(x.Names, x.Type)
		case *ast.ValueSpec:
			s.declare(x.Names, x.Type)
			for i, v := range x.Values {
				if lit, ok := v.(*ast.FuncLit); ok && i < len(x.Names) {
					named[x.Names[i].Name] = lit
				}
			}
		case *ast.AssignStmt:
			if call, ok := x.Rhs[0].(*ast.CallExpr); ok && len(x.Rhs) == 1 && len(x.Lhs) > 1 {
				s.declareResults(x.Lhs, call)
			}
			for i, rhs := range x.Rhs {
				id, ok := x.Lhs[min(i, len(x.Lhs)-1)].(*ast.Ident)
				if !ok || len(x.Lhs) != len(x.Rhs) {
					continue
				}
				switch v := rhs.(type) {
				case *ast.CallExpr:
					s.declareResults(x.Lhs, v)
				case *ast.FuncLit:
					named[id.Name] = v
				case *ast.CompositeLit:
					s.declare([]*ast.Ident{id}, v.Type)
				case *ast.UnaryExpr:
					if lit, ok := v.X.(*ast.CompositeLit); ok && v.Op == token.AND {
						s.declare([]*ast.Ident{id}, lit.Type)
					}
				}
			}
		}
		return true
	})
	for changed := true; changed; {
		changed = false
		for name, lit := range named {
			if s.closures[name] != "" {
				continue
			}
			if why := s.firstStop(lit.Body); why != "" {
				s.closures[name], changed = why, true
			}
		}
	}
	return s
}

// declare records the type of names, where it is a named type.
func (s *scope) declare(names []*ast.Ident, t ast.Expr) {
	ref, ok := s.file.refOf(t)
	if !ok {
		return
	}
	for _, id := range names {
		s.vars[id.Name] = ref
	}
}

// declareResults records the types of the variables lhs that call's results are
// assigned to: those of a function of the repository's, as its declaration spells
// them; none of the repository's for a function of a package outside it.
func (s *scope) declareResults(lhs []ast.Expr, call *ast.CallExpr) {
	var refs []typeRef
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if pkg, ok := sel.X.(*ast.Ident); ok && s.file.imports[pkg.Name] == "" {
			if _, imported := s.file.imports[pkg.Name]; imported {
				refs = make([]typeRef, len(lhs)) // types of no package here
			}
		}
	}
	if fns := s.callees(call); refs == nil && len(fns) == 1 && fns[0].decl.Type.Results != nil {
		for _, field := range fns[0].decl.Type.Results.List {
			ref, _ := fns[0].file.refOf(field.Type)
			for range max(1, len(field.Names)) {
				refs = append(refs, ref)
			}
		}
	}
	for i, e := range lhs {
		if id, ok := e.(*ast.Ident); ok && i < len(refs) {
			s.vars[id.Name] = refs[i]
		}
	}
}

// refOf is the named type t spells in f, if it is one.
func (f *file) refOf(t ast.Expr) (typeRef, bool) {
	if t == nil {
		return typeRef{}, false
	}
	base := t
	if star, ok := base.(*ast.StarExpr); ok {
		base = star.X
	}
	if sel, ok := base.(*ast.SelectorExpr); ok {
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return typeRef{}, false
		}
		// A type of a package outside the repository has none of its methods.
		dir, imported := f.imports[pkg.Name]
		return typeRef{dir, sel.Sel.Name}, imported
	}
	if name := typeName(t); name != "" {
		return typeRef{f.dir, name}, true
	}
	return typeRef{}, false
}

// firstStop is why the first call in body that may stop the test does, or "".
func (s *scope) firstStop(body ast.Node) string {
	why := ""
	sameGoroutine(body, func(call *ast.CallExpr) {
		if why == "" {
			why = s.stops(call)
		}
	})
	return why
}

// stops says why call may stop the test (t.Fatal directly, or a function that does),
// or "".
func (s *scope) stops(call *ast.CallExpr) string {
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok && stops[sel.Sel.Name] && s.isTest(sel.X) {
		return fmt.Sprintf("%s at %s", render(call.Fun), s.r.position(call.Pos()))
	}
	if id, ok := call.Fun.(*ast.Ident); ok && s.closures[id.Name] != "" {
		return id.Name + " → " + s.closures[id.Name]
	}
	for _, fn := range s.callees(call) {
		if fn.fails != "" {
			return render(call.Fun) + " → " + fn.fails
		}
	}
	return ""
}

// isTest tells an expression that names a *testing.T (or B, F, TB): a parameter,
// variable or field declared with that type in the package.
func (s *scope) isTest(e ast.Expr) bool {
	names := s.r.testing[s.file.dir]
	switch x := e.(type) {
	case *ast.Ident:
		return names[x.Name]
	case *ast.SelectorExpr:
		return names[x.Sel.Name]
	}
	return false
}

// callees are the repository's functions call may reach. A method called on a value
// of a type the source does not spell out may be any method of that name in the
// package or in the in-repo packages the file imports.
func (s *scope) callees(call *ast.CallExpr) []*function {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return s.r.lookup(funcKey{s.file.dir, "", fun.Name})
	case *ast.SelectorExpr:
		name := fun.Sel.Name
		if x, ok := fun.X.(*ast.Ident); ok {
			if dir, imported := s.file.imports[x.Name]; imported {
				return s.r.lookup(funcKey{dir, "", name})
			}
			if ref, ok := s.vars[x.Name]; ok {
				return s.r.lookup(funcKey{ref.dir, ref.name, name})
			}
		}
		if s.isTest(fun.X) {
			return nil
		}
		dirs := map[string]bool{s.file.dir: true}
		for _, dir := range s.file.imports {
			if dir != "" {
				dirs[dir] = true
			}
		}
		var fns []*function
		for k, fn := range s.r.funcs {
			if k.recv != "" && k.name == name && dirs[k.dir] {
				fns = append(fns, fn)
			}
		}
		return fns
	}
	return nil
}

func (r *repo) lookup(k funcKey) []*function {
	if fn := r.funcs[k]; fn != nil {
		return []*function{fn}
	}
	return nil
}

func (r *repo) position(p token.Pos) string {
	pos := r.fset.Position(p)
	if rel, err := filepath.Rel(r.root, pos.Filename); err == nil {
		pos.Filename = filepath.ToSlash(rel)
	}
	return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
}

// render prints a call's function as the source spells it: t.Fatalf, testenv.WaitFor.
func render(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return render(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return render(x.Fun) + "(...)"
	case *ast.IndexExpr:
		return render(x.X)
	case *ast.ParenExpr:
		return render(x.X)
	case *ast.StarExpr:
		return render(x.X)
	}
	return strings.TrimSpace(fmt.Sprintf("%T", e))
}
