package pluginmanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// listen binds a unix socket at path; closing it removes the file.
func listen(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.UnixListener)
}

func next(t *testing.T, events <-chan dirEvent) dirEvent {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event from the directory within a minute")
		return dirEvent{}
	}
}

// nextFor skips the events of other paths (a socket's bind, chmod and
// close may each report it).
func nextFor(t *testing.T, events <-chan dirEvent, path string, present bool) dirEvent {
	t.Helper()
	for {
		ev := next(t, events)
		if ev.listing == nil && ev.path == path && ev.present == present {
			return ev
		}
	}
}

func TestFSWatch(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.sock")
	lnA0 := listen(t, a)
	lnTmp := listen(t, filepath.Join(dir, ".tmp.sock"))
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := openDir(dir, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan dirEvent)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		src.run(ctx, events)
	}()
	defer func() {
		cancel()
		<-stopped
	}()

	first := next(t, events)
	if len(first.listing) != 1 || first.listing[a] == (stamp{}) {
		t.Fatalf("first event = %+v, want a listing of a.sock alone", first)
	}
	stampA := first.listing[a]

	b := filepath.Join(dir, "b.sock")
	lnB := listen(t, b)
	if ev := nextFor(t, events, b, true); ev.stamp == (stamp{}) {
		t.Fatalf("b.sock reported without a stamp: %+v", ev)
	}
	lnB.Close() // removes the file
	nextFor(t, events, b, false)

	// a.sock re-created: a new file with a new stamp.
	lnA0.Close()
	nextFor(t, events, a, false)
	lnA := listen(t, a)
	if ev := nextFor(t, events, a, true); ev.stamp == stampA {
		t.Fatalf("re-created a.sock has the old stamp %+v", ev.stamp)
	}

	// A plain file or a dot name is never reported present.
	if err := os.WriteFile(filepath.Join(dir, "c.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lnD := listen(t, filepath.Join(dir, ".d.sock"))
	e := filepath.Join(dir, "e.sock")
	lnE := listen(t, e)
	for {
		ev := next(t, events)
		if ev.present && ev.path != e {
			t.Fatalf("reported %+v, which is not a plugin socket", ev)
		}
		if ev.present {
			break
		}
	}

	// The directory removed: what it held is gone. (A bound socket keeps
	// its directory's inode, and so the removal's event, until it closes.)
	for _, ln := range []*net.UnixListener{lnA, lnD, lnE, lnTmp} {
		ln.Close()
	}
	for _, n := range []string{"c.sock", "file"} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, events)
		if ev.listing != nil {
			if len(ev.listing) != 0 {
				t.Fatalf("listing after the directory was removed = %+v", ev.listing)
			}
			break
		}
	}
}
