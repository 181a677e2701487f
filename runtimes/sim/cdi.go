package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// CDI (Container Device Interface) as containerd applies it: a container
// config's CDI devices ("vendor.com/class=name") are resolved against the
// spec files (*.json, *.yaml) of the CDI spec directories, later
// directories winning, and the edits of each device and of its spec are
// applied: environment variables, mounts, and device nodes, which the
// simulated container sees as (empty) files at their paths. A device no
// spec names fails the creation, as containerd's "unresolvable CDI
// devices".

// DefaultCDISpecDirs are containerd's default CDI spec directories.
var DefaultCDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// cdiSpec is the part of a CDI spec the simulator applies.
type cdiSpec struct {
	Version        string      `json:"cdiVersion"`
	Kind           string      `json:"kind"`
	Devices        []cdiDevice `json:"devices"`
	ContainerEdits cdiEdits    `json:"containerEdits"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env         []string `json:"env"`
	DeviceNodes []struct {
		Path string `json:"path"`
	} `json:"deviceNodes"`
	Mounts []struct {
		HostPath      string   `json:"hostPath"`
		ContainerPath string   `json:"containerPath"`
		Options       []string `json:"options"`
	} `json:"mounts"`
}

// cdiResult is what a container's CDI devices add.
type cdiResult struct {
	env     []string
	mounts  []*runtimeapi.Mount
	devices []string // device node paths in the container
}

// resolveCDI reads the spec dirs and applies the named devices' edits,
// each spec's own edits once.
func resolveCDI(dirs []string, devs []*runtimeapi.CDIDevice) (*cdiResult, error) {
	if len(dirs) == 0 {
		dirs = DefaultCDISpecDirs
	}
	type found struct {
		spec *cdiSpec
		dev  *cdiDevice
	}
	byName := map[string]found{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // a missing dir has no spec, as containerd's cache
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if e.IsDir() || (ext != ".json" && ext != ".yaml") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			spec := &cdiSpec{}
			if ext == ".json" {
				err = json.Unmarshal(b, spec)
			} else {
				err = yaml.Unmarshal(b, spec)
			}
			if err != nil || spec.Kind == "" {
				continue // an invalid spec is skipped, as containerd's cache does
			}
			for i := range spec.Devices {
				byName[spec.Kind+"="+spec.Devices[i].Name] = found{spec, &spec.Devices[i]}
			}
		}
	}
	out := &cdiResult{}
	var missing []string
	applied := map[*cdiSpec]bool{}
	apply := func(e *cdiEdits) {
		out.env = append(out.env, e.Env...)
		for _, n := range e.DeviceNodes {
			out.devices = append(out.devices, n.Path)
		}
		for _, m := range e.Mounts {
			out.mounts = append(out.mounts, &runtimeapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Readonly: slices.Contains(m.Options, "ro")})
		}
	}
	for _, d := range devs {
		f, ok := byName[d.GetName()]
		if !ok {
			missing = append(missing, d.GetName())
			continue
		}
		if !applied[f.spec] {
			applied[f.spec] = true
			apply(&f.spec.ContainerEdits)
		}
		apply(&f.dev.ContainerEdits)
	}
	if len(missing) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "failed to inject CDI devices: unresolvable CDI devices %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// applyCDI merges the CDI edits into a container's environment (a later
// variable of one name wins) and its config's mounts.
func applyCDI(cfg *runtimeapi.ContainerConfig, env map[string]string, res *cdiResult) (map[string]string, []*runtimeapi.Mount, error) {
	if env == nil && len(res.env) > 0 {
		env = map[string]string{}
	}
	for _, kv := range res.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, status.Errorf(codes.InvalidArgument, "failed to inject CDI devices: invalid environment variable %q", kv)
		}
		env[k] = v
	}
	mounts := cfg.GetMounts()
	if len(res.mounts) > 0 {
		mounts = append(slices.Clone(mounts), res.mounts...)
	}
	return env, mounts, nil
}

func (c Config) cdiDirsValid() error {
	for _, d := range c.CDISpecDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("sim: CDI spec dir %q is not an absolute path", d)
		}
	}
	return nil
}
