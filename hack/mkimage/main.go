// Command mkimage writes berth's sandbox image and the busybox test image as
// docker-archive tarballs, for nodes that cannot pull (import them with
// berth's image directory or `ctr -n k8s.io images import`).
//
//	go run ./hack/mkimage -pause-binary bin/berth-pause -out DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-dev/berth/internal/imagebuild"
)

func main() {
	pauseBinary := flag.String("pause-binary", "bin/berth-pause", "static berth-pause binary to package as "+imagebuild.PauseImageRef)
	busybox := flag.String("busybox", "/bin/busybox", "static busybox binary to package as "+imagebuild.BusyboxImageRef)
	out := flag.String("out", "", "directory to write pause.tar and busybox.tar into (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*pauseBinary, *busybox, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(pauseBinary, busybox, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	pause, err := imagebuild.PauseImage(pauseBinary)
	if err != nil {
		return err
	}
	if err := imagebuild.WriteTarball(filepath.Join(out, "pause.tar"), imagebuild.PauseImageRef, pause); err != nil {
		return err
	}
	bb, err := imagebuild.BusyboxImage(busybox)
	if err != nil {
		return err
	}
	return imagebuild.WriteTarball(filepath.Join(out, "busybox.tar"), imagebuild.BusyboxImageRef, bb)
}
