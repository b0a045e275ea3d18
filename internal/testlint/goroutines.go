package testlint

import (
	"cmp"
	"fmt"
	"go/ast"
	"slices"
)

// Finding is one call that may stop a test from a goroutine the test started.
type Finding struct {
	Pos  string // file:line, relative to the root searched
	Call string // the call, as the source spells it
	Why  string // the chain of calls down to the t.Fatal
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s runs on a goroutine the test started, and may stop the test there: %s", f.Pos, f.Call, f.Why)
}

// Goroutines finds, in the test code under root, every call that may stop the test
// (t.Fatal, t.FailNow, t.Skip and their kin, directly or through the repository's
// own functions) made in a goroutine the test started: inside a go statement, or a
// function handed to a WaitGroup's or errgroup's Go or to time.AfterFunc. From
// there the call ends only that goroutine, and the test goes on as if it had not
// failed, or fails later with a confusing panic.
func Goroutines(root string) ([]Finding, error) {
	r, err := load(root)
	if err != nil {
		return nil, err
	}
	fns := r.sorted()
	r.markStops(fns)
	var found []Finding
	for _, fn := range fns {
		s := r.scopeOf(fn)
		report := func(call *ast.CallExpr) {
			if why := s.stops(call); why != "" {
				found = append(found, Finding{r.position(call.Pos()), render(call.Fun), why})
			}
		}
		ast.Inspect(fn.decl.Body, func(n ast.Node) bool {
			for _, started := range spawned(n) {
				if lit, ok := started.(*ast.FuncLit); ok {
					sameGoroutine(lit.Body, report)
				} else if call, ok := started.(*ast.CallExpr); ok {
					report(call)
				}
			}
			return true
		})
	}
	return found, nil
}

// markStops finds the functions that may stop their test: those that call t.Fatal
// and its kin, and, to a fixed point, those that call them.
func (r *repo) markStops(fns []*function) {
	for changed := true; changed; {
		changed = false
		for _, fn := range fns {
			if fn.fails != "" {
				continue
			}
			if why := r.scopeOf(fn).firstStop(fn.decl.Body); why != "" {
				fn.fails, changed = why, true
			}
		}
	}
}

func (r *repo) sorted() []*function {
	var fns []*function
	for _, fn := range r.funcs {
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(a, b *function) int {
		return cmp.Compare(a.decl.Pos(), b.decl.Pos())
	})
	return fns
}

// spawned is what n runs on a new goroutine: the function literal of `go func()
// {...}()`, the call of `go f(t)`, or the function handed to x.Go or time.AfterFunc
// (as a literal, or as a call of the function named).
func spawned(n ast.Node) []ast.Node {
	switch x := n.(type) {
	case *ast.GoStmt:
		if lit, ok := x.Call.Fun.(*ast.FuncLit); ok {
			return []ast.Node{lit}
		}
		return []ast.Node{x.Call}
	case *ast.CallExpr:
		if !startsGoroutine(x) {
			return nil
		}
		var started []ast.Node
		for _, arg := range x.Args {
			switch a := arg.(type) {
			case *ast.FuncLit:
				started = append(started, a)
			case *ast.Ident, *ast.SelectorExpr:
				started = append(started, &ast.CallExpr{Fun: a, Lparen: a.Pos()})
			}
		}
		return started
	}
	return nil
}

// startsGoroutine tells x.Go(f) (sync.WaitGroup, errgroup.Group) and time.AfterFunc.
func startsGoroutine(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && (sel.Sel.Name == "Go" || sel.Sel.Name == "AfterFunc")
}

// sameGoroutine calls visit for each call in body that runs on the goroutine that
// runs body: not those in a goroutine body starts, nor in the functions it hands to
// t.Run (a subtest's own goroutine) or t.Cleanup (run by the test's).
func sameGoroutine(body ast.Node, visit func(*ast.CallExpr)) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.GoStmt:
			return false
		case *ast.CallExpr:
			visit(x)
			if !startsGoroutine(x) && !handsOver(x) {
				return true
			}
			ast.Inspect(x.Fun, func(m ast.Node) bool {
				if c, ok := m.(*ast.CallExpr); ok {
					visit(c)
				}
				return true
			})
			for _, arg := range x.Args {
				if _, ok := arg.(*ast.FuncLit); !ok {
					sameGoroutine(arg, visit)
				}
			}
			return false
		}
		return true
	})
}

// handsOver tells t.Run and t.Cleanup, whose function runs elsewhere than the caller.
func handsOver(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && (sel.Sel.Name == "Run" || sel.Sel.Name == "Cleanup")
}
