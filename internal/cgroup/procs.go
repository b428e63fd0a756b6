package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ProcsFiles are the cgroup.procs files of group rel (relative to the
// mounts) under each of the v1 controllers named, or of the v2 group
// rel when the layout is v2: what a process writes itself into to join
// a group another program made (Slurm's extern step of a job). Each
// group must exist; none is made.
func (l Layout) ProcsFiles(rel string, controllers []string) ([]string, error) {
	var dirs []string
	if l.V2 {
		dirs = []string{filepath.Join(l.CPU, rel)}
	} else {
		mounts, err := v1Mounts()
		if err != nil {
			return nil, err
		}
		for _, c := range controllers {
			m, ok := mounts[c]
			if !ok {
				return nil, fmt.Errorf("cgroup: no %s hierarchy mounted", c)
			}
			dirs = append(dirs, filepath.Join(m, rel))
		}
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("cgroup: no group %s", d)
		}
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out, nil
}

// v1Mounts maps each v1 controller to its hierarchy's mount point.
func v1Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), " ")
		if len(fs) < 4 || fs[2] != "cgroup" {
			continue
		}
		for _, o := range strings.Split(fs[3], ",") {
			if _, seen := out[o]; !seen && !slices.Contains([]string{"rw", "ro", "nosuid", "nodev", "noexec", "relatime"}, o) {
				out[o] = fs[1]
			}
		}
	}
	return out, sc.Err()
}
