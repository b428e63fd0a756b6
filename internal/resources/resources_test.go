package resources

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"0.5", 500}, {"2", 2000}, {"1.25", 1250}, {".5", 500}, {"0.01", 10}, {"4096", 4096000}, {" 3 ", 3000}, {"1.000", 1000}} {
		got, err := ParseCPUs(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseCPUs(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0", "0.0", "0.001", "0.009", "-1", "1.2345", "abc", "1e3", "4096.001", "5000", "1.", ".", "1,5", "NaN", "Inf", "99999999999"} {
		if got, err := ParseCPUs(in); err == nil || !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), "--cpus") {
			t.Errorf("ParseCPUs(%q) = %d, %v; want an error naming --cpus", in, got, err)
		}
	}
}

func TestParseMem(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"64M", 64 << 20}, {"2G", 2 << 30}, {"512", 512 << 20}, {"8192K", 8 << 20}, {"1T", 1 << 40}, {"64MiB", 64 << 20}, {"64mb", 64 << 20}, {"2g", 2 << 30}, {"8M", MinMemBytes}, {"1024T", MaxMemBytes}} {
		got, err := ParseMem(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseMem(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0", "7M", "1K", "64X", "M", "1.5G", "-1G", "64B", "64IB", "1025T", "99999999999999999999", "9223372036854775807K"} {
		if got, err := ParseMem(in); err == nil || !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), "--mem") {
			t.Errorf("ParseMem(%q) = %d, %v; want an error naming --mem", in, got, err)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, m := range []int64{10, 500, 1000, 1250, 2000, 4096000} {
		if got, err := ParseCPUs(FormatCPUs(m)); err != nil || got != m {
			t.Errorf("%d -> %q -> %d, %v", m, FormatCPUs(m), got, err)
		}
	}
	for _, b := range []int64{MinMemBytes, 64 << 20, 9216 << 10, 2 << 30, 3 << 40} {
		if got, err := ParseMem(FormatMem(b)); err != nil || got != b {
			t.Errorf("%d -> %q -> %d, %v", b, FormatMem(b), got, err)
		}
	}
	if s := (Request{MilliCPUs: 500, MemBytes: 64 << 20}).String(); s != "--cpus 0.5 --mem 64M" {
		t.Errorf("String() = %q", s)
	}
}

func TestCheck(t *testing.T) {
	for _, r := range []Request{{}, {MilliCPUs: 10}, {MilliCPUs: MaxMilliCPUs, MemBytes: MaxMemBytes}, {MemBytes: MinMemBytes}} {
		if err := r.Check(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	for _, r := range []Request{{MilliCPUs: -1}, {MilliCPUs: 9}, {MilliCPUs: MaxMilliCPUs + 1}, {MemBytes: -1}, {MemBytes: MinMemBytes - 1}, {MemBytes: MaxMemBytes + 1}} {
		if err := r.Check(); err == nil || !errors.Is(err, ErrBad) {
			t.Errorf("%+v passed: %v", r, err)
		}
	}
}

func TestSlotsAndQuota(t *testing.T) {
	for _, c := range []struct {
		milli int64
		slots int
	}{{0, 1}, {10, 1}, {500, 1}, {1000, 1}, {1001, 2}, {2000, 2}, {2500, 3}} {
		if got := (Request{MilliCPUs: c.milli}).Slots(); got != c.slots {
			t.Errorf("Slots(%d) = %d, want %d", c.milli, got, c.slots)
		}
	}
	for _, c := range []struct {
		milli int64
		cap   float64
		binds bool
	}{{0, 1, false}, {500, 1, true}, {1000, 1, false}, {1000, 0.4, false}, {1000, 8, true}, {399, 0.4, true}, {400, 0.4, false}} {
		if got := (Request{MilliCPUs: c.milli}).QuotaBinds(c.cap); got != c.binds {
			t.Errorf("QuotaBinds(%d on %v) = %v", c.milli, c.cap, got)
		}
	}
}

func TestThreadEnv(t *testing.T) {
	env := []string{"PATH=/bin", "OMP_NUM_THREADS=7"}
	got := ThreadEnv(env, Request{MilliCPUs: 1500})
	want := []string{"PATH=/bin", "OMP_NUM_THREADS=7", "OPENBLAS_NUM_THREADS=2", "MKL_NUM_THREADS=2"}
	if !slices.Equal(got, want) {
		t.Errorf("ThreadEnv = %q, want %q", got, want)
	}
	if got := ThreadEnv(env, Request{}); !slices.Equal(got, env) {
		t.Errorf("no CPUs asked: %q", got)
	}
}

// FuzzParse: whatever a user types, --cpus and --mem parse to a request
// within bounds that formats back to itself, or to an error naming the
// flag.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0.5", "2", "64M", "2G", "512", "1.", "-1", "1e9", "9999999999999999T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseCPUs(s); err == nil {
			if (Request{MilliCPUs: m}).Check() != nil || m == 0 {
				t.Fatalf("--cpus %q gave %d", s, m)
			}
			if back, err := ParseCPUs(FormatCPUs(m)); err != nil || back != m {
				t.Fatalf("--cpus %q: %d formats as %q", s, m, FormatCPUs(m))
			}
		} else if !strings.Contains(err.Error(), "--cpus") {
			t.Fatalf("--cpus %q: %v", s, err)
		}
		if b, err := ParseMem(s); err == nil {
			if (Request{MemBytes: b}).Check() != nil || b == 0 {
				t.Fatalf("--mem %q gave %d", s, b)
			}
			if back, err := ParseMem(FormatMem(b)); err != nil || back != b {
				t.Fatalf("--mem %q: %d formats as %q", s, b, FormatMem(b))
			}
		} else if !strings.Contains(err.Error(), "--mem") {
			t.Fatalf("--mem %q: %v", s, err)
		}
	})
}
