package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/reset"
)

const (
	flagForce = "force"
	// cniNetworkName is the CNI network berth's conflist names (agent's
	// startManaged), which its iptables comments carry.
	cniNetworkName = "berth"
	// imagesDirName is where berth imports image tarballs from at start.
	imagesDirName = "images"
)

func newResetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Remove what berth left on this host: its pods, containerd, cgroups, network and state",
		Long: `Undo what "berth run" did on this host, as "kubeadm reset" does for a kubeadm
node: stop and remove every pod berth made (through its managed containerd's
CRI, started for the purpose if it is not running, else by killing what runs
in berth's cgroups), stop the managed containerd (adopted or not), and remove
berth's kubepods cgroups, its CNI bridge, its pods' network namespaces and
iptables rules (those of CNI network "berth" that name one of its pods),
every mount under the root dir, the logs of its pods, and its state in the
root dir.

It reads the same configuration as "berth run" (--config and the same
flags), so give it what berth ran with. It refuses while a berth runs on
that root dir. Nothing that berth did not create is touched: the pod
manifests and image tarballs in the root dir stay, as do other pods' logs
and other CNI networks' rules. On a host where berth left nothing it says
so and exits 0.`,
		Example: `  # Reset the berth of /etc/berth/config.yaml, after confirming
  berth reset --config /etc/berth/config.yaml

  # The berth of another root dir, without a prompt
  berth reset --root-dir /tmp/berth --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := resetOptions(cmd)
			if err != nil {
				return err
			}
			force, err := cmd.Flags().GetBool(flagForce)
			if err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), "warn", "")
			if err != nil {
				return err
			}
			confirm := func([]reset.Step) (bool, error) {
				if force {
					return true, nil
				}
				return askYes(cmd.InOrStdin(), cmd.OutOrStdout())
			}
			return reset.Run(cmd.Context(), o, confirm, cmd.OutOrStdout(), log)
		},
	}
	config.AddFlags(cmd.Flags())
	cmd.Flags().BoolP(flagForce, "f", false, "reset without asking for confirmation")
	return cmd
}

// resetOptions reads berth's configuration as berth run does. The sandbox
// program run must find is of no use to reset: when it is not configured,
// berth's own executable stands in, so that a host where it is missing
// can still be reset.
func resetOptions(cmd *cobra.Command) (reset.Options, error) {
	fs := cmd.Flags()
	if p := fs.Lookup("pause-binary"); p != nil && !p.Changed {
		if self, err := os.Executable(); err == nil {
			p.DefValue = self
			_ = p.Value.Set(self)
		}
	}
	path, err := fs.GetString(config.FlagConfig)
	if err != nil {
		return reset.Options{}, err
	}
	cfg, err := config.Load(path, fs)
	if err != nil {
		return reset.Options{}, err
	}
	root := filepath.Clean(cfg.RootDir)
	results := cnigc.DefaultResultsDir
	if cfg.ContainerRuntimeEndpoint != "" {
		results = "" // that runtime's CNI state is not berth's
	}
	return reset.Options{
		RootDir:         root,
		PodLogsDir:      cfg.PodLogsDir,
		CgroupRoot:      cfg.Resources.CgroupRoot,
		Bridge:          cfg.CNIBridge,
		Network:         cniNetworkName,
		ManifestDir:     cfg.StaticPodPath,
		ImagesDir:       filepath.Join(root, imagesDirName),
		DevicePluginDir: cfg.DevicePluginDir,
		PodResourcesDir: cfg.PodResourcesDir,
		RuntimeEndpoint: cfg.ContainerRuntimeEndpoint,
		CNIResultsDir:   results,
	}, nil
}

// askYes asks as kubeadm reset does; anything but y or yes is a no, and so
// is no answer at all (a closed stdin).
func askYes(in io.Reader, out io.Writer) (bool, error) {
	fmt.Fprint(out, "[reset] Are you sure you want to proceed? [y/N]: ")
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(out)
		return false, nil
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
