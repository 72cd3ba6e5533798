package logs

import (
	"slices"
	"strings"
	"time"
)

// The kubelet's names for rotated logs (pkg/kubelet/logs): a rotated file is
// <log>.<timestamp>, compressed later to <log>.<timestamp>.gz through a
// <name>.tmp file.
const (
	rotatedTimeFormat = "20060102-150405"
	compressedSuffix  = ".gz"
	tmpSuffix         = ".tmp"
)

// Policy is when container logs are rotated and how many files are kept.
type Policy struct {
	// MaxSize is the size in bytes at which a log is rotated; negative
	// turns rotation off.
	MaxSize int64
	// MaxFiles is how many files a container's log may span, the one the
	// runtime writes included; at least 2.
	MaxFiles int
}

// rotation is what one rotation of a container's log does, in this order:
// remove, compress, then rename the log to rotated and have the runtime
// reopen it.
type rotation struct {
	// remove are leftovers of an interrupted rotation and the oldest
	// rotated files beyond MaxFiles.
	remove []string
	// compress are the rotated files kept that are not compressed yet.
	compress []string
	// rotated is the name the current log is renamed to; empty when the
	// log is not to be rotated.
	rotated string
}

// planRotation decides, as the kubelet's containerLogManager does, what to
// do with the log at path, size bytes long, whose directory holds siblings
// (file names, not paths), at time now. A log under MaxSize is left alone,
// leftovers included: they are cleaned up at its next rotation.
func planRotation(path string, size int64, siblings []string, now time.Time, p Policy) rotation {
	if p.MaxSize < 0 || size < p.MaxSize {
		return rotation{}
	}
	dir, base := splitPath(path)
	var rotated []string
	for _, name := range siblings {
		if strings.HasPrefix(name, base+".") {
			rotated = append(rotated, name)
		}
	}
	var plan rotation
	inUse, unused := splitUnused(rotated)
	plan.remove = unused
	slices.Sort(inUse)
	// Besides the log being written and the one about to be rotated,
	// MaxFiles-2 rotated files may stay; the oldest go first, so as not to
	// cut short a reader of a newer one.
	keep := max(p.MaxFiles-2, 0)
	if excess := len(inUse) - keep; excess > 0 {
		plan.remove = append(plan.remove, inUse[:excess]...)
		inUse = inUse[excess:]
	}
	for _, name := range inUse {
		if !strings.HasSuffix(name, compressedSuffix) {
			plan.compress = append(plan.compress, name)
		}
	}
	name := base + "." + now.Format(rotatedTimeFormat)
	// The timestamp has a resolution of a second: a rotation in the same
	// second as the last one would overwrite it, so it waits for the next
	// round. The kubelet's three-second minimum interval makes this rare.
	if !slices.Contains(inUse, name) && !slices.Contains(inUse, name+compressedSuffix) {
		plan.rotated = dir + name
	}
	plan.remove = joinAll(dir, plan.remove)
	plan.compress = joinAll(dir, plan.compress)
	return plan
}

// splitUnused tells the rotated files in use from the leftovers of an
// interrupted rotation: temporary files, and files whose compressed copy
// was completed but that were not removed (the kubelet's filterUnusedLogs).
func splitUnused(names []string) (inUse, unused []string) {
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			unused = append(unused, name)
		case strings.HasSuffix(name, compressedSuffix):
			inUse = append(inUse, name)
		case slices.Contains(names, name+compressedSuffix):
			unused = append(unused, name)
		default:
			inUse = append(inUse, name)
		}
	}
	return inUse, unused
}

// splitPath splits path into its directory, with its trailing separator,
// and its base name.
func splitPath(path string) (dir, base string) {
	i := strings.LastIndexByte(path, '/')
	return path[:i+1], path[i+1:]
}

func joinAll(dir string, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dir + n
	}
	return out
}
