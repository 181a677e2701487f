package stats

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// fsAnalyzer measures, in the background at a period, what pods use on
// disk outside the runtime: their volumes under <root>/pods/<uid>/volumes
// and their logs under <logs>/<ns>_<name>_<uid>, as upstream's
// fsResourceAnalyzer does with du. A Summary reads the last measurement;
// no request ever walks a directory.
type fsAnalyzer struct {
	rootDir, logsDir string
	clk              clock.WithTicker
	log              *slog.Logger
	cur              atomic.Pointer[map[string]*podFs] // by pod UID
}

func newFsAnalyzer(rootDir, logsDir string, clk clock.WithTicker, log *slog.Logger) *fsAnalyzer {
	return &fsAnalyzer{rootDir: rootDir, logsDir: logsDir, clk: clk, log: log}
}

// usage is what a tree uses on disk: bytes (allocated blocks, as du) and
// inodes.
type usage struct{ bytes, inodes uint64 }

func (u *usage) add(o usage) {
	u.bytes += o.bytes
	u.inodes += o.inodes
}

// podFs is one pod's measured disk usage outside the runtime.
type podFs struct {
	t         metav1.Time
	volumes   []volumeUsage    // by name
	ephemeral usage            // of the volumes that count as ephemeral storage
	ctrLogs   map[string]usage // by container name
	logsTotal usage            // the whole pod log directory
}

type volumeUsage struct {
	name string
	used usage
	fs   *statsapi.FsStats // the filesystem holding it (capacity), or nil
}

// ephemeralPlugins are the volume kinds whose usage counts as the pod's
// ephemeral storage, as upstream's IsLocalEphemeralVolume (emptyDir not
// backed by memory, configMap, downwardAPI, gitRepo).
var ephemeralPlugins = map[string]bool{
	"kubernetes.io~empty-dir":    true,
	"kubernetes.io~configmap":    true,
	"kubernetes.io~downward-api": true,
	"kubernetes.io~git-repo":     true,
}

const tmpfsMagic = 0x01021994

func (a *fsAnalyzer) run(ctx context.Context, period time.Duration) {
	a.measure()
	t := a.clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.measure()
		}
	}
}

// snapshot is the last measurement by pod UID (empty before the first).
func (a *fsAnalyzer) snapshot() map[string]*podFs {
	if m := a.cur.Load(); m != nil {
		return *m
	}
	return nil
}

// measure walks every pod's volumes and logs once.
func (a *fsAnalyzer) measure() {
	start := time.Now()
	t := metav1.NewTime(a.clk.Now())
	out := map[string]*podFs{}
	get := func(uid string) *podFs {
		pf, ok := out[uid]
		if !ok {
			pf = &podFs{t: t}
			out[uid] = pf
		}
		return pf
	}
	if a.rootDir != "" {
		podsDir := filepath.Join(a.rootDir, "pods")
		for _, pod := range readDirs(podsDir) {
			volRoot := filepath.Join(podsDir, pod, "volumes")
			for _, plugin := range readDirs(volRoot) {
				for _, name := range readDirs(filepath.Join(volRoot, plugin)) {
					dir := filepath.Join(volRoot, plugin, name)
					used := du(dir)
					fst, typ := statfsDir(dir, t)
					pf := get(pod)
					pf.volumes = append(pf.volumes, volumeUsage{name: name, used: used, fs: fst})
					if ephemeralPlugins[plugin] && typ != tmpfsMagic {
						pf.ephemeral.add(used)
					}
				}
			}
		}
	}
	if a.logsDir != "" {
		for _, dir := range readDirs(a.logsDir) {
			parts := strings.Split(dir, "_")
			if len(parts) != 3 || parts[2] == "" {
				continue
			}
			pf := get(parts[2])
			pf.ctrLogs = map[string]usage{}
			podDir := filepath.Join(a.logsDir, dir)
			pf.logsTotal = usage{inodes: 1}
			entries, _ := os.ReadDir(podDir)
			for _, e := range entries {
				u := du(filepath.Join(podDir, e.Name()))
				if e.IsDir() {
					pf.ctrLogs[e.Name()] = u
				}
				pf.logsTotal.add(u)
			}
		}
	}
	for _, pf := range out {
		sort.Slice(pf.volumes, func(i, j int) bool { return pf.volumes[i].name < pf.volumes[j].name })
	}
	a.cur.Store(&out)
	a.log.Debug("measured pod volumes and logs", "pods", len(out), "took", time.Since(start))
}

// readDirs lists the directories in dir (none when it cannot be read).
func readDirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// du is the disk usage of the tree at root as du -x and find -xdev count
// it: allocated bytes and entries, not following symlinks nor crossing into
// other filesystems. Entries that vanish or cannot be read are skipped.
func du(root string) usage {
	var u usage
	var dev uint64
	first := true
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			u.bytes += uint64(max(info.Size(), 0))
			u.inodes++
			return nil
		}
		if first {
			dev, first = uint64(st.Dev), false
		} else if uint64(st.Dev) != dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		u.bytes += uint64(max(st.Blocks, 0)) * 512
		u.inodes++
		return nil
	})
	return u
}

// statfsDir returns the figures of the filesystem holding dir and its type.
func statfsDir(dir string, t metav1.Time) (*statsapi.FsStats, int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil, 0
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{Time: t, CapacityBytes: ptr(st.Blocks * bs), AvailableBytes: ptr(st.Bavail * bs),
		Inodes: ptr(st.Files), InodesFree: ptr(st.Ffree)}, int64(st.Type)
}

// logs is a container's log usage (its directory in the pod log
// directory) on the node filesystem: nil before the pod was measured, 0
// used when it has no log directory.
func (pf *podFs) logs(container string, nodeFs *statsapi.FsStats) *statsapi.FsStats {
	if pf == nil {
		return nil
	}
	u := pf.ctrLogs[container]
	fs := withNodeFs(nodeFs)
	fs.Time = pf.t
	fs.UsedBytes, fs.InodesUsed = ptr(u.bytes), ptr(u.inodes)
	return fs
}

// volumeStats are the pod's volumes as the Summary reports them.
func (pf *podFs) volumeStats(nodeFs *statsapi.FsStats) []statsapi.VolumeStats {
	if pf == nil || len(pf.volumes) == 0 {
		return nil
	}
	out := make([]statsapi.VolumeStats, 0, len(pf.volumes))
	for _, v := range pf.volumes {
		fs := v.fs
		if fs == nil {
			fs = withNodeFs(nodeFs)
		}
		vs := statsapi.VolumeStats{Name: v.name, FsStats: *fs}
		vs.Time = pf.t
		vs.UsedBytes, vs.InodesUsed = ptr(v.used.bytes), ptr(v.used.inodes)
		out = append(out, vs)
	}
	return out
}
