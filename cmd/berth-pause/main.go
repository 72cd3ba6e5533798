// Command berth-pause is the process that holds a pod sandbox's namespaces
// open. It does nothing but wait for SIGINT or SIGTERM; when the pod shares
// its PID namespace it is PID 1 there, so it also reaps the orphans that get
// reparented to it, or they would linger as zombies until the pod dies.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		os.Exit(0)
	}
}

// reapChildren collects every child that has exited. Signals coalesce, so
// one SIGCHLD may stand for many exits: loop until none is left.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
