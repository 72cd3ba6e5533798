// Package chaos injects faults into a real berth node and checks, after
// each, that the node converged without breaking its promises: no container
// duplicated or restarted that should not have been, no device held by two
// pods, no leak once every pod is gone. It repeats the attacks of issue #19
// (kill -9 of berth and of containerd at random moments of start-up, sync
// and shutdown; corrupt and replaced state files; pod churn) with a seeded
// generator, so that a failing run can be replayed from its seed.
//
// A replay chooses the same faults, with the same delays, for as long as
// the node answers as it did: the choice also depends on what the harness
// observed (whether berth adopted its containerd, which pods exist), and
// the moment a kill lands in berth's work is the machine's to decide.
//
// What to do next and what counts as a violation are pure functions over
// plain data (this package's non-test files, unit-tested); the node, its
// processes and the fault loop are the I/O around them (the _test files).
//
//	go test ./test/chaos                               # the smoke run of make test
//	CHAOS_FAULTS=200 CHAOS_PODS=40 make chaos          # the long run
//	CHAOS_SEED=1234 go test -count=1 ./test/chaos      # replay a run
package chaos
