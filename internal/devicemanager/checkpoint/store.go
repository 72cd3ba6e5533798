package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// FileName is the checkpoint's name in the device plugin directory
// (the kubelet's /var/lib/kubelet/device-plugins).
const FileName = "kubelet_internal_checkpoint"

// quarantineTime names quarantined files: sortable, UTC, no spaces or colons.
const quarantineTime = "20060102T150405.000000000Z"

// Write replaces dir/FileName with b atomically, mode 0600 as the kubelet's.
func Write(dir string, b []byte) error {
	return atomicfile.Write(filepath.Join(dir, FileName), b, 0o600)
}

// Read returns the bytes of dir/FileName; a missing file gives an error that
// errors.Is(err, fs.ErrNotExist).
func Read(dir string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, FileName))
}

// Quarantine moves a checkpoint that failed to decode out of the way, to
// dir/FileName.corrupt-<now in UTC>, and returns that path: the evidence is
// kept and the next Write starts afresh. It refuses to replace an earlier
// quarantined file of the same name (a clock that did not move). The rename
// is made durable by the directory fsync of the next Write.
func Quarantine(dir string, now time.Time) (string, error) {
	from := filepath.Join(dir, FileName)
	to := from + ".corrupt-" + now.UTC().Format(quarantineTime)
	switch _, err := os.Lstat(to); {
	case err == nil:
		return "", fmt.Errorf("quarantine %s: %s already exists", from, to)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("quarantine %s: %w", from, err)
	}
	if err := os.Rename(from, to); err != nil {
		return "", fmt.Errorf("quarantine device manager checkpoint: %w", err)
	}
	return to, nil
}
