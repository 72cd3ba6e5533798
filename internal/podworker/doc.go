// Package podworker keeps each pod's containers in the state its spec asks
// for. Every pod has one worker goroutine that owns its sync: read the
// runtime's view of the pod, compute a Plan (a pure function), carry it out
// through the CRI, and publish the pod's API status. Workers are woken by
// spec changes, by PLEG events and by their own timers (back-off expiry,
// periodic resync); a worker told to kill its pod runs preStop hooks, stops
// and removes everything the pod had, and exits.
package podworker
