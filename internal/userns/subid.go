package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// KubeletUser is the user whose subordinate IDs are the kubelet's range.
const KubeletUser = "kubelet"

// DefaultRange is the kubelet's range when the node gives it none: every ID
// from perPod (never 0..perPod-1, the node's own) to the top of 32 bits.
func DefaultRange(perPod uint32) (first, length uint32) {
	return perPod, uint32((1 << 32) - uint64(perPod))
}

// ParseSubID finds user's range in an /etc/subuid or /etc/subgid file
// ("name:first:count" lines). The kubelet asks getsubids, which reads these
// files on a node without a remote subid service; berth reads them itself.
// A user with several lines is refused, as getsubids' one-range answer is
// all the kubelet takes.
func ParseSubID(data []byte, user string) (first, length uint32, found bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			return 0, 0, false, fmt.Errorf("line %d: want name:first:count", n)
		}
		if parts[0] != user {
			continue
		}
		if found {
			return 0, 0, false, fmt.Errorf("line %d: user %q has more than one range", n, user)
		}
		f, err := strconv.ParseUint(parts[1], 10, 32)
		if err != nil {
			return 0, 0, false, fmt.Errorf("line %d: first ID: %w", n, err)
		}
		l, err := strconv.ParseUint(parts[2], 10, 32)
		if err != nil {
			return 0, 0, false, fmt.Errorf("line %d: count: %w", n, err)
		}
		first, length, found = uint32(f), uint32(l), true
	}
	return first, length, found, sc.Err()
}

// NodeRange reads the kubelet user's range from subuid and subgid (the
// node's /etc/subuid and /etc/subgid): both must give the same one, as the
// kubelet requires. With neither file naming the user, the default range.
func NodeRange(subuid, subgid string, perPod uint32) (first, length uint32, err error) {
	u, uok, err := readSubID(subuid)
	if err != nil {
		return 0, 0, err
	}
	g, gok, err := readSubID(subgid)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case !uok && !gok:
		first, length = DefaultRange(perPod)
		return first, length, nil
	case uok != gok || u != g:
		return 0, 0, fmt.Errorf("%s and %s: user %q must have the same range in both", subuid, subgid, KubeletUser)
	}
	return u[0], u[1], nil
}

func readSubID(path string) (r [2]uint32, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	first, length, found, err := ParseSubID(data, KubeletUser)
	if err != nil {
		return r, false, fmt.Errorf("%s: %w", path, err)
	}
	return [2]uint32{first, length}, found, nil
}
