package devicemanager

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkAdmit admits a pod of two containers with a device each, from
// eight, through a plugin that answers at once, and frees it again: the
// device manager's own cost, checkpoint writes included.
func BenchmarkAdmit(b *testing.B) {
	var mu sync.Mutex
	gone := map[types.UID]bool{}
	m := New(Options{Dir: b.TempDir(), Log: slog.New(slog.DiscardHandler), Active: func(uid types.UID) bool {
		mu.Lock()
		defer mu.Unlock()
		return !gone[uid]
	}})
	f := newFakeClient()
	f.entered = make(chan string, 1)
	go func() {
		for range f.entered {
		}
	}()
	b.Cleanup(func() { close(f.entered) })
	addFake(b, m, widget, f, true, "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7")
	b.ResetTimer()
	for i := range b.N {
		pod := podWith(fmt.Sprintf("p%d", i), 1, 1)
		if err := m.Admit(b.Context(), pod); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		gone[pod.UID] = true
		mu.Unlock()
		m.UpdateAllocatedDevices()
	}
}
