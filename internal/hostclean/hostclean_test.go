package hostclean

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestAliveAndStop(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if !Alive(pid) {
		t.Fatal("a running child is not alive")
	}
	Stop(pid, 5*time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end the child")
	}
	if Alive(pid) {
		t.Error("a reaped child is alive")
	}
}

// A dir with nothing mounted below and a cgroup root that does not exist
// are no error: clean-up runs whatever the test got to.
func TestNothingToClean(t *testing.T) {
	if err := UnmountUnder(t.TempDir()); err != nil {
		t.Error(err)
	}
	if mounts, err := MountsUnder(t.TempDir()); err != nil || len(mounts) > 0 {
		t.Errorf("MountsUnder a fresh dir = %v, %v", mounts, err)
	}
	if err := RemoveCgroups("/hostclean-test-never-made"); err != nil {
		t.Error(err)
	}
	if KillCgroupProcs("/hostclean-test-never-made") {
		t.Error("killed something in a cgroup that does not exist")
	}
}
