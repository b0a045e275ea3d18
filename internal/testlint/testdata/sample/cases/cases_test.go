package cases

import (
	"sync"
	"testing"
	"time"

	"example.com/sample/helper"
)

type fixture struct{ t *testing.T }

func (f *fixture) check() { f.t.Fatal("check") }

func (f *fixture) note() { f.t.Log("note") }

func local(t *testing.T) { helper.Start(t) }

func TestStops(t *testing.T) {
	var wg sync.WaitGroup
	fail := func() { t.Skip("skip") }
	f := &fixture{t: t}
	go func() {
		t.Fatal("direct") // want
		helper.Start(t)   // want
		local(t)          // want
		fail()            // want
		f.check()         // want
	}()
	go local(t)  // want
	go f.check() // want
	wg.Go(func() {
		t.FailNow() // want
	})
	time.AfterFunc(time.Second, func() { t.SkipNow() }) // want
	wg.Wait()
}

func TestFine(t *testing.T) {
	f := &fixture{t: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Error("reported")
		helper.Wait(t)
		f.note()
		t.Run("a subtest runs on its own goroutine", func(t *testing.T) { t.Fatal("fine") })
		t.Cleanup(func() { helper.Start(t) })
	}()
	<-done
	helper.Start(t)
	local(t)
}
