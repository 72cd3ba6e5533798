// Package stats measures the node and its pods as the kubelet's Summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) describes them, with the
// kubelet's meaning for every field: the eviction manager decides on these
// numbers, and the local API serves them at /stats/summary.
//
// Where each number comes from:
//
//	node memory        root cgroup (v1: usage_in_bytes, total_inactive_file;
//	                   v2: MemTotal − MemFree, inactive_file) against MemTotal
//	node cpu           root cgroup (v1: cpuacct.usage; v2: cpu.stat usage_usec),
//	                   else /proc/stat's cpu line
//	cpu rate           UsageNanoCores of the node, the pods cgroup and each pod
//	                   cgroup: the counter's rise since the previous Get
//	node fs            statfs of berth's root dir (the nodefs)
//	image fs           the runtime's ImageFsInfo, sized by statfs of its mount point
//	rlimit             min(pid_max, threads-max); tasks from /proc/loadavg
//	pod memory, cpu    the pod's cgroup, or the sum of its containers'
//	pod processes      distinct PIDs in cgroup.procs of the pod cgroup's subtree
//	container memory   CRI ListContainerStats (working set, usage, RSS)
//	container cpu      CRI ListContainerStats (usage; the runtime's rate)
//	container rootfs   CRI writable layer usage
//	container logs     du of <podLogsDir>/<ns>_<name>_<uid>/<container>/
//	volumes            du of each emptyDir (disk or tmpfs)
//	ephemeral storage  rootfs + logs + disk-backed emptyDirs + pod-level files
//
// For /metrics/cadvisor a reading also keeps (Snapshot), per container:
//
//	id label           <pod cgroup>/<container ID> (runc's cgroupfs layout)
//	page cache         memory.stat of that cgroup (v1 total_cache, v2 file)
//	cfs throttling     cpu.stat of that cgroup, for a container with a CPU limit
//	filesystems        writable layer + logs, by the device of each (mountinfo)
//	pod network        /proc/<pid>/net/dev of a process in the sandbox's cgroup
//
// Recent serves the latest reading to a scrape; CPUAndMemory is
// /metrics/resource's path, which reads no filesystem's usage.
//
// Directory usage is counted as du counts it (allocated blocks, hard links
// once), without following symlinks or crossing mount points; a Get walks
// every pod's volumes and logs, so its cost grows with the number of files
// there (see BenchmarkWalkDir).
package stats
