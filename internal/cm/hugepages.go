package cm

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// hugepagesCapacity is the capacity of every huge page size the kernel
// offers, as the kubelet reports it from cAdvisor's machine info: for each
// dir/hugepages-<N>kB, a resource hugepages-<size> of nr_hugepages pages of
// N KiB, in bytes. Sizes with no pages are kept, at 0, so that a pod asking
// for them is refused for lack of capacity rather than for an unknown
// resource. A kernel without huge page support has no dir: no entries.
func hugepagesCapacity(dir string) (v1.ResourceList, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return v1.ResourceList{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the huge page sizes: %w", err)
	}
	out := make(v1.ResourceList, len(entries))
	for _, e := range entries {
		pageSize, err := hugepageSize(e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
		}
		pages, err := hugepagesCount(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, err
		}
		if pages > math.MaxInt64/pageSize {
			return nil, fmt.Errorf("%s: %d pages of %d bytes overflow a quantity", filepath.Join(dir, e.Name(), "nr_hugepages"), pages, pageSize)
		}
		out[hugepagesResource(pageSize)] = *resource.NewQuantity(pages*pageSize, resource.BinarySI)
	}
	return out, nil
}

// hugepagesResource names a page size the way the API and the kubelet do
// (v1helper.HugePageResourceName): the size's BinarySI quantity string,
// so 2 MiB pages are "hugepages-2Mi", never "hugepages-2048Ki".
func hugepagesResource(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}

// hugepageSize is the page size in bytes that the kernel's directory name
// hugepages-<N>kB stands for.
func hugepageSize(name string) (int64, error) {
	digits, ok := strings.CutPrefix(name, "hugepages-")
	if ok {
		digits, ok = strings.CutSuffix(digits, "kB")
	}
	if !ok {
		return 0, errors.New("want a directory named hugepages-<size>kB")
	}
	kb, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
		return 0, fmt.Errorf("page size %q: want a positive number of kB", digits)
	}
	return kb * 1024, nil
}

// hugepagesCount reads the number of pre-allocated pages of one size.
func hugepagesCount(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read the huge pages: %w", err)
	}
	text := strings.TrimSpace(string(data))
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q: want a non-negative integer", path, text)
	}
	return n, nil
}

// HugePageLimits sums the hugepages-<size> entries of a resource list by
// page size, in bytes (the kubelet's HugePageLimits). A name whose size
// does not parse is left out, as the kubelet leaves it; API validation
// refuses such names before they get here.
func HugePageLimits(list v1.ResourceList) map[int64]int64 {
	out := map[int64]int64{}
	for name, q := range list {
		size, ok := HugePageSize(name)
		if !ok {
			continue
		}
		out[size] += q.Value()
	}
	return out
}

// HugePageSize is the page size, in bytes, of a hugepages-<size> resource.
func HugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, false
	}
	return q.Value(), true
}
