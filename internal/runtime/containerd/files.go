package containerd

import (
	"bytes"
	"fmt"
	"io"
	"os"
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
