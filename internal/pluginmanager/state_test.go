package pluginmanager

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)

// want is an expected action, without the plugin.
type want struct {
	kind actionKind
	path string
	gen  uint64
}

func plain(acts []action) []want {
	var out []want
	for _, a := range acts {
		out = append(out, want{a.kind, a.path, a.gen})
	}
	return out
}

func drv(name string) Plugin {
	return Plugin{Socket: "/r/" + name + ".sock", Type: "DRAPlugin", Name: name, Endpoint: "/r/" + name + ".sock"}
}

func regOK(path string, gen uint64) result {
	return result{action: action{kind: actRegister, path: path, gen: gen}, registered: Plugin{Socket: path, Type: "DRAPlugin", Name: path}}
}

func regFail(path string, gen uint64) result {
	return result{action: action{kind: actRegister, path: path, gen: gen}, err: errors.New("boom")}
}

func dereg(path string, gen uint64) result {
	return result{action: action{kind: actDeregister, path: path, gen: gen}}
}

func TestWorldPlan(t *testing.T) {
	a, b := "/r/a.sock", "/r/b.sock"
	s1, s2 := stamp{ino: 1, mtime: 10}, stamp{ino: 2, mtime: 20}
	cases := []struct {
		name string
		// setup brings the world where the case starts; plan's busy marks
		// of setup's own plans are cleared by the results it feeds.
		setup func(w *world)
		now   time.Time
		want  []want
	}{
		{
			name:  "empty directory: nothing to do",
			setup: func(w *world) {},
			want:  nil,
		},
		{
			name: "sockets present at start are registered, in path order",
			setup: func(w *world) {
				w.apply(dirEvent{listing: map[string]stamp{b: s2, a: s1}})
			},
			want: []want{{actRegister, a, 1}, {actRegister, b, 2}},
		},
		{
			name: "the same socket seen by the listing and by an event is one generation",
			setup: func(w *world) {
				w.apply(dirEvent{listing: map[string]stamp{a: s1}})
				w.apply(dirEvent{path: a, present: true, stamp: s1})
			},
			want: []want{{actRegister, a, 1}},
		},
		{
			name: "a registered socket that is still there: nothing to do",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.seen(a, s1)
			},
			want: nil,
		},
		{
			name: "a registered socket that vanished is deregistered",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.apply(dirEvent{path: a})
			},
			want: []want{{actDeregister, a, 1}},
		},
		{
			name: "a re-created socket (driver restart) is deregistered first",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.seen(a, s2)
			},
			want: []want{{actDeregister, a, 1}},
		},
		{
			name: "then the new socket is registered",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.seen(a, s2)
				w.plan(t0)
				w.done(dereg(a, 1), t0)
			},
			want: []want{{actRegister, a, 2}},
		},
		{
			name: "nothing starts on a path whose operation is running",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.seen(a, s2)
				w.gone(a)
				w.seen(a, s1)
			},
			want: nil,
		},
		{
			name: "a registration that ends after its socket vanished is undone",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.gone(a)
				w.done(regOK(a, 1), t0)
			},
			want: []want{{actDeregister, a, 1}},
		},
		{
			name: "a registration that ends after its socket was replaced is undone, then the new one registered",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.seen(a, s2)
				w.done(regOK(a, 1), t0)
			},
			want: []want{{actDeregister, a, 1}},
		},
		{
			name: "a failed socket waits for its back-off",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regFail(a, 1), t0)
			},
			now:  t0.Add(initialRetryDelay - time.Nanosecond),
			want: nil,
		},
		{
			name: "a failed socket is retried once its back-off is over",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regFail(a, 1), t0)
			},
			now:  t0.Add(initialRetryDelay),
			want: []want{{actRegister, a, 1}},
		},
		{
			name: "the back-off doubles with each failure",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regFail(a, 1), t0)
				w.plan(t0.Add(initialRetryDelay))
				w.done(regFail(a, 1), t0)
			},
			now:  t0.Add(2*initialRetryDelay - time.Nanosecond),
			want: nil,
		},
		{
			name: "a failed socket that is re-created is tried at once",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regFail(a, 1), t0)
				w.seen(a, s2)
			},
			want: []want{{actRegister, a, 2}},
		},
		{
			name: "one failing socket does not hold back another",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regFail(a, 1), t0)
				w.seen(b, s2)
			},
			want: []want{{actRegister, b, 2}},
		},
		{
			name: "a relist drops what vanished and adds what appeared",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.apply(dirEvent{listing: map[string]stamp{b: s2}})
			},
			want: []want{{actDeregister, a, 1}, {actRegister, b, 2}},
		},
		{
			name: "a relist that finds the same socket changes nothing",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.apply(dirEvent{listing: map[string]stamp{a: s1}})
			},
			want: nil,
		},
		{
			name: "a deregistered socket that is gone is forgotten",
			setup: func(w *world) {
				w.seen(a, s1)
				w.plan(t0)
				w.done(regOK(a, 1), t0)
				w.gone(a)
				w.plan(t0)
				w.done(dereg(a, 1), t0)
			},
			want: nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			tc.setup(w)
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			if got := plain(w.plan(now)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWorldDeregisterCarriesThePlugin(t *testing.T) {
	w := newWorld()
	w.seen("/r/a.sock", stamp{ino: 1})
	w.plan(t0)
	w.done(result{action: action{kind: actRegister, path: "/r/a.sock", gen: 1}, registered: drv("a")}, t0)
	w.gone("/r/a.sock")
	acts := w.plan(t0)
	if len(acts) != 1 || acts[0].plugin.Name != "a" || acts[0].plugin.Type != "DRAPlugin" {
		t.Fatalf("plan = %+v, want the deregistration of plugin a", acts)
	}
}

func TestRetryDelay(t *testing.T) {
	cases := []struct {
		count int
		want  time.Duration
	}{
		{1, 500 * time.Millisecond},
		{2, time.Second},
		{3, 2 * time.Second},
		{8, 64 * time.Second},
		{9, maxRetryDelay},
		{100, maxRetryDelay},
	}
	for _, tc := range cases {
		if got := retryDelay(tc.count); got != tc.want {
			t.Errorf("retryDelay(%d) = %v, want %v", tc.count, got, tc.want)
		}
	}
}

func TestWorldNextRetry(t *testing.T) {
	a, b := "/r/a.sock", "/r/b.sock"
	w := newWorld()
	if _, ok := w.nextRetry(); ok {
		t.Fatal("nextRetry of an empty world is due")
	}
	w.seen(a, stamp{ino: 1})
	w.seen(b, stamp{ino: 2})
	w.plan(t0)
	w.done(regFail(a, 1), t0)
	w.done(regFail(b, 2), t0.Add(time.Second))
	w.done(result{action: action{kind: actRegister, path: a, gen: 1}, err: errors.New("again")}, t0.Add(time.Second))
	// a failed twice (1s back-off from t0+1s), b once (500ms from t0+1s).
	at, ok := w.nextRetry()
	if !ok || !at.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("nextRetry = %v, %v; want %v", at, ok, t0.Add(1500*time.Millisecond))
	}
	w.seen(b, stamp{ino: 3}) // re-created: registered at once, no retry to wait for
	at, ok = w.nextRetry()
	if !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("nextRetry after b was re-created = %v, %v; want %v", at, ok, t0.Add(2*time.Second))
	}
	w.gone(a)
	if at, ok := w.nextRetry(); ok {
		t.Fatalf("nextRetry after a vanished = %v, want none", at)
	}
}

func TestWorldStatus(t *testing.T) {
	a, b := "/r/a.sock", "/r/b.sock"
	w := newWorld()
	w.seen(a, stamp{ino: 1})
	w.seen(b, stamp{ino: 2})
	w.plan(t0)
	w.done(result{action: action{kind: actRegister, path: a, gen: 1}, registered: drv("a")}, t0)
	w.done(regFail(b, 2), t0)
	w.gone(a) // its deregistration is still to come
	got := w.status()
	p := drv("a")
	want := []SocketStatus{
		{Path: a, Present: false, Registered: &p},
		{Path: b, Present: true, Failures: 1, LastError: "boom"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("status = %+v, want %+v", got, want)
	}
	w.seen(b, stamp{ino: 3})
	if st := w.status(); st[1].Failures != 0 || st[1].LastError != "" {
		t.Fatalf("status of a re-created socket = %+v, want the old file's failures forgotten", st[1])
	}
	if !slices.IsSortedFunc(got, func(x, y SocketStatus) int { return strings.Compare(x.Path, y.Path) }) {
		t.Fatal("status is not in path order")
	}
}
