// Package podworker keeps each pod's containers in the state its spec asks
// for. Every pod has one worker goroutine that owns its sync: read the
// runtime's view of the pod once (the snapshot), compute a Plan (a pure
// function), carry out its Steps in order through the CRI, read the pod
// again to see what the steps did, and publish the pod's API status.
// Workers are woken by spec changes, by PLEG events and by their own timers
// (back-off expiry, periodic resync); a worker told to kill its pod runs
// preStop hooks, stops and removes everything the pod had, and exits.
//
// Where the decisions are:
//
//	plan.go, planinit.go  ComputePlan: which sandbox and containers to kill,
//	                      create and start (the kubelet's computePodActions)
//	steps.go              Plan.Steps: those actions in SyncPod order; gateStart:
//	                      what the crash-loop and pull back-offs say of a start
//	exec.go               the execution of the steps, one CRI call at a time
//	snapshot.go           what a step changed, folded into the sync's snapshot
//	kept.go               when a sync may take the last sync's snapshot
//	                      instead of reading the runtime (the PLEG saw no change)
//	worker.go             the sync itself: read, admit, plan, apply, publish
//
// The executor's unit tests run whole syncs against the shared fake CRI
// (internal/testing/fakecri) on a fake clock.
package podworker
