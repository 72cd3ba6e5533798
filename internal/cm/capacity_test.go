package cm

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMachineCapacity(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(good, []byte("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := MachineCapacity(good, 110)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Memory().Value(); m != 24576000*1024 {
		t.Errorf("memory = %d", m)
	}
	if p := got.Pods().Value(); p != 110 {
		t.Errorf("pods = %d", p)
	}
	if got.Cpu().Value() < 1 {
		t.Errorf("cpu = %v", got.Cpu())
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("MemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MachineCapacity(bad, 110); err == nil {
		t.Error("a meminfo without MemTotal must be an error")
	}
}
