package containergc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// removeContainerLogs removes a container's log file and the files rotated
// from it (<log>.*), as the kubelet's log manager Clean does before a
// container is removed. A file already gone is not an error.
func removeContainerLogs(logPath string) error {
	dir, base := filepath.Split(logPath)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the log files of %s: %w", logPath, err)
	}
	var errs []error
	for _, e := range entries {
		// A directory listing rather than a glob: a path with '[' or '*'
		// in it would be a pattern.
		if n := e.Name(); n == base || strings.HasPrefix(n, base+".") {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// within reports whether path is strictly inside root; both are clean and
// absolute.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// readPodLogDirs lists the directories in the pod logs directory; a missing
// one has none.
func readPodLogDirs(podLogsDir string) ([]string, error) {
	entries, err := os.ReadDir(podLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pod logs directory %s: %w", podLogsDir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
