// Package logs reads container log files in the CRI format and copies them
// to a reader, the way the kubelet serves `kubectl logs`: with or without
// timestamps, the last N lines, and following the file until the container
// exits.
//
// Each line of a CRI log file is
//
//	<RFC3339Nano timestamp> <stdout|stderr> <tag> <content>
//
// where the tag's first part is P for a partial line, continued by the next,
// or F for the last piece of a line.
package logs

import (
	"bytes"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// entry is one parsed line of a CRI log file.
type entry struct {
	// timestamp is the time as the runtime wrote it.
	timestamp []byte
	time      time.Time
	stream    runtimeapi.LogStreamType
	// partial means the content continues in the next entry.
	partial bool
	content []byte
}

// parseLine parses one line of a CRI log file, without its newline. ok is
// false when the line is not in the CRI format. The returned slices alias
// line.
func parseLine(line []byte) (e entry, ok bool) {
	ts, rest, found := bytes.Cut(line, []byte{' '})
	if !found {
		return entry{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return entry{}, false
	}
	stream, rest, found := bytes.Cut(rest, []byte{' '})
	if !found {
		return entry{}, false
	}
	switch s := runtimeapi.LogStreamType(stream); s {
	case runtimeapi.Stdout, runtimeapi.Stderr:
		e.stream = s
	default:
		return entry{}, false
	}
	tags, content, found := bytes.Cut(rest, []byte{' '})
	if !found {
		return entry{}, false
	}
	// The tag may grow sub-tags after ':'; like the kubelet, only the first
	// one is read, and anything but P ends the line.
	first, _, _ := bytes.Cut(tags, []byte(runtimeapi.LogTagDelimiter))
	e.partial = runtimeapi.LogTag(first) == runtimeapi.LogTagPartial
	e.timestamp = ts
	e.time = t
	e.content = content
	return e, true
}

// endsLine reports whether a raw line of the file completes a logical line:
// a full entry, or a line that is not in the CRI format and so stands alone.
func endsLine(line []byte) bool {
	e, ok := parseLine(line)
	return !ok || !e.partial
}
