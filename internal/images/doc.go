// Package images collects unused images the way the kubelet's
// realImageGCManager does.
//
// A Manager detects the runtime's images every ImageListPeriod and keeps, per
// image ID, when it was first detected (the zero time for images already
// there at the first detection: "unknown, in the past"), when it was last
// seen in use, and its size. Every ImageGCPeriod it garbage collects:
//
//  1. images unused for longer than imageMaximumGCAge, whatever the disk
//     usage (once berth itself has run that long);
//  2. when the image filesystem's usage is at or above
//     imageGCHighThresholdPercent, unused images least recently used first
//     (ties: first detected first) until usage is back to
//     imageGCLowThresholdPercent, skipping images younger than
//     imageMinimumGCAge.
//
// DeleteUnusedImages is the eviction manager's reclaim path: every unused
// image old enough, whatever the thresholds, even when the periodic GC is off.
//
// Images in use (by any container the runtime has, any pod berth wants to
// run, or a pull in progress) and pinned images (the sandbox image, the
// configured ones, those the runtime pins) are never removed. Which images go
// is decided by pure functions over plain records (choose.go); the Manager
// does the runtime calls and records every removal as a node event.
package images
