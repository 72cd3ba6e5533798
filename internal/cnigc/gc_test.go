package cnigc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

type fakeTables struct {
	mu       sync.Mutex
	save     string
	saveErr  error
	restored []string
	fail     error
}

func (f *fakeTables) SaveNAT(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.save, f.saveErr
}

func (f *fakeTables) Restore(_ context.Context, script string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.restored = append(f.restored, script)
	return nil
}

type harness struct {
	tables  *fakeTables
	leases  LeaseDir
	clk     *testclock.FakeClock
	known   map[string]bool
	listErr error
	events  []string
	c       *Collector
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		tables: &fakeTables{save: "*nat\n:POSTROUTING ACCEPT [0:0]\n" +
			masq("berth", "orphan", "10.213.5.4", "10.213.5.0/24") +
			masq("berth", "live", "10.213.5.5", "10.213.5.0/24") + "COMMIT\n"},
		leases: LeaseDir(t.TempDir()),
		clk:    testclock.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)),
		known:  map[string]bool{"live": true},
	}
	for ip, id := range map[string]string{"10.213.5.4": "orphan\r\neth0", "10.213.5.5": "live\r\neth0"} {
		if err := os.WriteFile(filepath.Join(string(h.leases), ip), []byte(id), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.c = New(Options{
		Network: Network{Name: "berth", PodCIDR: netip.MustParsePrefix("10.213.5.0/24")},
		Tables:  h.tables, Leases: h.leases, Clock: h.clk,
		Sandboxes: func(context.Context) (map[string]bool, error) { return h.known, h.listErr },
		Record:    func(_, reason, msg string) { h.events = append(h.events, reason+": "+msg) },
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return h
}

func (h *harness) leaseLeft(ip string) bool {
	_, err := os.Stat(filepath.Join(string(h.leases), ip))
	return err == nil
}

func TestCollectQuietRemovesOrphansAtOnce(t *testing.T) {
	h := newHarness(t)
	h.c.Collect(context.Background(), true)
	if len(h.tables.restored) != 1 || !strings.Contains(h.tables.restored[0], `id: \"orphan\"`) ||
		strings.Contains(h.tables.restored[0], "live") {
		t.Errorf("restored %q", h.tables.restored)
	}
	if h.leaseLeft("10.213.5.4") || !h.leaseLeft("10.213.5.5") {
		t.Error("the orphan's lease is left or the live pod's is gone")
	}
	if len(h.events) != 1 || !strings.HasPrefix(h.events[0], ReasonCollected+": removed the pod network state of sandbox orphan") {
		t.Errorf("events %q", h.events)
	}
}

func TestCollectWaitsTheGraceOutsideQuietMoments(t *testing.T) {
	h := newHarness(t)
	h.c.Collect(context.Background(), false)
	if len(h.tables.restored) != 0 || !h.leaseLeft("10.213.5.4") {
		t.Fatal("collected at the first sighting")
	}
	h.clk.Step(DefaultGrace - time.Second)
	h.c.Collect(context.Background(), false)
	if len(h.tables.restored) != 0 {
		t.Fatal("collected within the grace")
	}
	h.clk.Step(time.Second)
	h.c.Collect(context.Background(), false)
	if len(h.tables.restored) != 1 || h.leaseLeft("10.213.5.4") {
		t.Fatal("not collected after the grace")
	}
}

func TestCollectRemovesNothingWhenAReadFails(t *testing.T) {
	h := newHarness(t)
	h.listErr = errors.New("containerd is down")
	h.c.Collect(context.Background(), true)
	h.listErr = nil
	h.tables.saveErr = errors.New("no iptables")
	h.c.Collect(context.Background(), true)
	if len(h.tables.restored) != 0 || !h.leaseLeft("10.213.5.4") || len(h.events) != 0 {
		t.Errorf("removed on a failed read: %q %q", h.tables.restored, h.events)
	}
}

func TestCollectKeepsTheLeaseWhenTheRulesStay(t *testing.T) {
	h := newHarness(t)
	h.tables.fail = errors.New("iptables-restore: exit status 1")
	h.c.Collect(context.Background(), true)
	if !h.leaseLeft("10.213.5.4") {
		t.Error("the lease went while the rules stayed")
	}
	if len(h.events) != 1 || !strings.HasPrefix(h.events[0], ReasonCollectionFailed) {
		t.Errorf("events %q", h.events)
	}
	// Tried again at the next pass, without a new grace.
	h.tables.fail = nil
	h.c.Collect(context.Background(), false)
	if len(h.tables.restored) != 1 || h.leaseLeft("10.213.5.4") {
		t.Error("not retried at the next pass")
	}
}

func TestRunCollectsWhatTheRuntimeForgotWhileDown(t *testing.T) {
	h := newHarness(t)
	h.known = map[string]bool{"live": true, "orphan": true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.c.Run(ctx) }()

	h.c.RuntimeExited()
	// The runtime that comes back never persisted it (the poke below
	// orders this write before Run's read).
	h.known = map[string]bool{"live": true}
	h.c.RuntimeRestarted()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.tables.mu.Lock()
		n := len(h.tables.restored)
		h.tables.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restart did not collect the orphan")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestLeaseDir(t *testing.T) {
	d := LeaseDir(t.TempDir())
	for name, content := range map[string]string{
		"10.0.0.2": "abc\r\neth0", "10.0.0.3": "old\n", "10.0.0.4": "  \n", "lock": "", "last_reserved_ip.0": "10.0.0.3",
	} {
		if err := os.WriteFile(filepath.Join(string(d), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := d.List()
	if err == nil || !strings.Contains(err.Error(), "10.0.0.4") {
		t.Errorf("an empty lease file: %v", err)
	}
	if want := []Lease{{"10.0.0.2", "abc"}, {"10.0.0.3", "old"}}; !slices.Equal(leases, want) {
		t.Errorf("leases %v, want %v", leases, want)
	}
	// A lease given to another ID meanwhile stays.
	if err := d.Release(context.Background(), Lease{IP: "10.0.0.2", ID: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(context.Background(), Lease{IP: "10.0.0.3", ID: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(context.Background(), Lease{IP: "10.0.0.9", ID: "gone"}); err != nil {
		t.Errorf("releasing a lease already gone: %v", err)
	}
	leases, _ = d.List()
	if want := []Lease{{"10.0.0.2", "abc"}}; !slices.Equal(leases, want) {
		t.Errorf("after release %v, want %v", leases, want)
	}
	if l, err := LeaseDir(filepath.Join(string(d), "missing")).List(); l != nil || err != nil {
		t.Errorf("a missing dir: %v, %v", l, err)
	}
}

// A runtime that came back but does not answer yet: the pass after the
// restart is tried again, still with what was held while it was down.
func TestRunRetriesThePassAfterARestart(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	answering := false
	h.c.o.Sandboxes = func(context.Context) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if !answering {
			return nil, errors.New("connection refused")
		}
		return map[string]bool{"live": true}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	h.c.RuntimeExited()
	h.c.RuntimeRestarted()
	// The retry timer joins the ticker once the failed pass is over.
	waitUntil(t, func() bool { return h.clk.Waiters() == 2 })
	mu.Lock()
	answering = true
	mu.Unlock()
	h.clk.Step(quietRetry)
	waitUntil(t, func() bool {
		h.tables.mu.Lock()
		defer h.tables.mu.Unlock()
		return len(h.tables.restored) == 1
	})
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
