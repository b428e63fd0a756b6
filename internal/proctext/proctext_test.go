package proctext

import (
	"slices"
	"testing"
)

func TestParseCreds(t *testing.T) {
	st := "Name:\tx\nUid:\t1001\t1001\t1002\t1001\nGid:\t100\t100\t100\t100\nGroups:\t27 5 \nCapPrm:\t0000000000000000\nCapEff:\t00000000a80425fb\n"
	c, err := ParseCreds(st)
	if err != nil || c.UIDs != [4]uint32{1001, 1001, 1002, 1001} || c.GIDs[3] != 100 || !slices.Equal(c.Groups, []uint32{5, 27}) || c.CapEff != 0xa80425fb || c.CapPrm != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	if c.Zombie {
		t.Fatalf("no State line, and a zombie: %+v", c)
	}
	for state, zombie := range map[string]bool{"Z (zombie)": true, "X (dead)": true, "S (sleeping)": false, "R (running)": false} {
		if z, err := ParseCreds("State:\t" + state + "\n" + st); err != nil || z.Zombie != zombie {
			t.Errorf("State %s: zombie %v (%v), want %v", state, z.Zombie, err, zombie)
		}
	}
	amb, err := ParseCreds(st + "CapInh:\t0000000000000004\nCapAmb:\t0000000000001000\n")
	if err != nil || amb.CapInh != 4 || amb.CapAmb != 0x1000 {
		t.Fatalf("with inheritable and ambient sets: %+v %v", amb, err)
	}
	for _, bad := range []string{"Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nCapPrm:\t0\nCapEff:\t0\nCapAmb:\tzz\n", "Uid:\t1\t1\nGid:\t1\t1\t1\t1\nCapPrm:\t0\nCapEff:\t0\n", "Gid:\t1\t1\t1\t1\nCapPrm:\t0\nCapEff:\t0\n", "Uid:\t1\t1\t1\t-1\nGid:\t1\t1\t1\t1\nCapPrm:\t0\nCapEff:\t0\n"} {
		if _, err := ParseCreds(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseTrace(t *testing.T) {
	for _, c := range []struct {
		status string
		state  byte
		tracer int
	}{
		{"Name:\tx\nState:\tt (tracing stop)\nTgid:\t5\nTracerPid:\t77\n", 't', 77},
		{"State:\tR (running)\nTracerPid:\t0\n", 'R', 0},
		{"State:\t\nTracerPid:\tx\n", 0, 0},
		{"", 0, 0},
	} {
		if s, tr := ParseTrace(c.status); s != c.state || tr != c.tracer {
			t.Errorf("ParseTrace(%q) = %q %d, want %q %d", c.status, s, tr, c.state, c.tracer)
		}
	}
}

func TestParseNSPid(t *testing.T) {
	for status, want := range map[string]int{"NSpid:\t4242\t7\n": 7, "NSpid:\t12\n": 12, "NSpid:\n": 0, "NSpid:\t0\n": 0, "Name:\tx\n": 0} {
		if got, ok := ParseNSPid(status); got != want || ok != (want > 0) {
			t.Errorf("ParseNSPid(%q) = %d %v, want %d", status, got, ok, want)
		}
	}
}
