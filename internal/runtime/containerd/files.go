package containerd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// logTail returns the last lines of containerd's log, for start errors.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read: %v)", err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, logTailBytes))
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	if i := bytes.IndexByte(b, '\n'); len(b) == logTailBytes && i >= 0 {
		b = b[i+1:] // drop the partial first line
	}
	return string(b)
}

// writeFileAtomic replaces path with data: temp file, fsync, rename, fsync
// of the directory, so a crash leaves the old or the new file, never half.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
