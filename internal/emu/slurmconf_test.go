package emu

import (
	"strings"
	"testing"
)

// TestSlurmConfKeepsNodesApart checks what lets several slurmds share one
// machine: every node's file under its own %n directory, every daemon
// addressed on the cluster's own subnet, and whole CPUs for fractional
// capacities.
func TestSlurmConfKeepsNodesApart(t *testing.T) {
	st := State{Name: "sl", Nodes: []NodeState{
		{ID: "1", Addr: "198.18.91.1", Capacity: 0.45},
		{ID: "2", Addr: "198.18.91.2", Capacity: 1.5, MemMB: 512},
	}}
	conf := slurmConf(st)
	for _, want := range []string{
		"SlurmctldHost=n1(198.18.91.1)\n",
		"AccountingStorageHost=198.18.91.1\n",
		"SlurmdSpoolDir=/run/roam/clusters/sl/slurm/%n/spool\n",
		"SlurmdPidFile=/run/roam/clusters/sl/slurm/%n/slurmd.pid\n",
		"AccountingStoragePass=/run/roam/clusters/sl/slurm/munge.sock\n",
		"NodeName=n1 NodeAddr=198.18.91.1 NodeHostname=n1 CPUs=1 RealMemory=1024 State=UNKNOWN\n",
		"NodeName=n2 NodeAddr=198.18.91.2 NodeHostname=n2 CPUs=2 RealMemory=512 State=UNKNOWN\n",
		"PartitionName=main Nodes=n1,n2 ",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	dbd := slurmdbdConf(st, "pw")
	for _, want := range []string{"DbdAddr=198.18.91.1\n", "StorageHost=127.0.0.1\n", "StoragePass=pw\n"} {
		if !strings.Contains(dbd, want) {
			t.Errorf("slurmdbd.conf lacks %q:\n%s", want, dbd)
		}
	}
	if c := cgroupConf(false); !strings.Contains(c, "CgroupPlugin=cgroup/v1\n") || !strings.Contains(c, "CgroupAutomount=no\n") {
		t.Errorf("cgroup.conf for v1: %s", c)
	}
	if c := cgroupConf(true); !strings.Contains(c, "CgroupPlugin=cgroup/v2\n") || !strings.Contains(c, "IgnoreSystemd=yes\n") {
		t.Errorf("cgroup.conf for v2: %s", c)
	}
}
