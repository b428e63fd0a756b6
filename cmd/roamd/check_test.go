package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"roam/internal/agent/config"
	"roam/internal/secret"
)

// What --check-config checks is what the agent refuses: for every key of
// the config (found by reflection, so a new key without a row fails this
// test), a wrong value makes check fail with one line that names the key,
// and the same config with the key left alone passes. The agent reads its
// config through the same check before it builds anything (serve).
func TestCheckConfigRefusesEveryWrongKey(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: the state directory must be root's")
	}
	dir := t.TempDir()
	sec := filepath.Join(dir, "secret")
	if err := secret.New().WriteFile(sec); err != nil {
		t.Fatal(err)
	}
	initPath := filepath.Join(dir, "roam-init")
	notExec := filepath.Join(dir, "not-exec")
	for p, mode := range map[string]os.FileMode{initPath: 0o755, notExec: 0o644} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	usersDir := filepath.Join(dir, "users")
	if err := os.Mkdir(usersDir, 0o755); err != nil || os.Chown(usersDir, 70001, 70001) != nil {
		t.Fatal(err)
	}
	// A web config file exporter-toolkit refuses: a user without a
	// bcrypt hash.
	// A policy file whose preempt_after is under its bound.
	badPolicy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("name: x\npreempt_after: 10ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badWeb := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(badWeb, []byte("basic_auth_users:\n  prom: plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "node_id: n1\nadvertise_addr: 127.0.0.1\nsecret_file: " + sec + "\nstate_dir: " + filepath.Join(dir, "state") +
		"\nsocket: " + filepath.Join(dir, "sock") + "\ninit_path: " + initPath + "\njob_cgroup: none\n"
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "roamd.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, _, err := check(write(base)); err != nil {
		t.Fatalf("the base config: %v", err)
	}
	// Each key's wrong values, as YAML for the key (a top-level key's
	// line, or a section's).
	bad := map[string][]string{
		"node_id":        {"node_id: 'has space'", "node_id: ''"},
		"cluster_name":   {"cluster_name: 'has space'", "cluster_name: ''", "cluster_name: ../x"},
		"bind_addr":      {"bind_addr: somewhere"},
		"advertise_addr": {"advertise_addr: 0.0.0.0", "advertise_addr: x"},
		"gossip_port":    {"gossip_port: 0", "gossip_port: 70000"},
		"peer_port":      {"peer_port: 7946", "peer_port: -1"},
		"join":           {"join: ['bad host!']", "join: ['10.0.0.1:99999']"},
		"secret_file":    {"secret_file: " + filepath.Join(dir, "nosuch"), "secret_file: " + initPath},
		"state_dir":      {"state_dir: ''", "state_dir: " + filepath.Join(usersDir, "state")},
		"socket":         {"socket: ''"},
		"capacity":       {"capacity: -1", "capacity: .nan"},
		"cgroup":         {"cgroup: nosuch-roam-test-group"},
		"job_cgroup":     {"job_cgroup: /abs", "job_cgroup: ../up"},
		"init_path":      {"init_path: rel", "init_path: " + notExec},
		"image_dir":      {"image_dir: rel", "image_dir: " + usersDir},
		"criu_path":      {"criu_path: rel"},
		"criu_timeout":   {"criu_timeout: 1s", "criu_timeout: 48h", "criu_timeout: soon"},
		"shared_dirs":    {"shared_dirs: [rel]"},
		"scheduler":      {"scheduler: nosuch", "scheduler: " + initPath, "scheduler: " + badPolicy},
		"load":           {"load: {interval: 1ms}", "load: {vector_size: 0}", "load: {policy: lifo}", "load: {nosuch: 1}"},
		"limits": {"limits: {arg_bytes: 1}", "limits: {run_count: 0}", "limits: {run_bytes: 1}", "limits: {live_jobs_per_user: 0}",
			"limits: {records_bytes_per_user: 1}", "limits: {records_bytes_per_user: 1099511627777}",
			"limits: {output_bytes: 1}", "limits: {output_bytes_per_user: 1048575}", "limits: {disk_reserve_bytes: -1}", "limits: {disk_reserve_bytes: 1099511627777}", "limits: {spool_bytes_per_user: 1048576, output_bytes: 2097152}", "limits: {requests_per_second: 0}",
			"limits: {keep_finished: 1s}", "limits: {keep_finished_per_user: 0}", "limits: {ghost_bytes: -1}", "limits: {job_tmp_bytes: 4096}", "limits: {job_tmp_bytes: 2199023255552}",
			"limits: {checkpoint_bytes: 1}", "limits: {checkpoints_in_flight: 0}", "limits: {checkpoints_in_flight: 1001}",
			"limits: {checkpoint_bytes_in_flight: 1048576}", "limits: {checkpoint_bytes_kept: -1}", "limits: {checkpoint_expiry: 1s}",
			"limits: {checkpoint_sweep: 0s}", "limits: {checkpoint_sweep: 48h}",
			"limits: {connections_per_user: 0}", "limits: {connections: 0}", "limits: {connections_per_user: 5, connections: 4}",
			"limits: {root_connections: 0}", "limits: {root_connections: 1048577}", "limits: {peer_connections: 0}",
			"limits: {peer_connections_per_address: 0}", "limits: {peer_connections_per_address: 9000}"},
		"slurm": {"slurm: {scontrol: rel}", "slurm: {conf: rel/slurm.conf}", "slurm: {node: 'has space'}", "slurm: {cgroup: /abs}",
			"slurm: {cgroup: ../up}", "slurm: {spool: rel/spool}", "slurm: {spool: /var/spool/../x}", "slurm: {enabled: maybe}", "slurm: {nosuch: 1}"},
		"metrics_addr":           {"metrics_addr: nowhere", "metrics_addr: host.example:9947", "metrics_addr: 127.0.0.1:0"},
		"metrics_job_users":      {"metrics_job_users: maybe", "metrics_job_users: [true]"},
		"record_decisions_bytes": {"record_decisions_bytes: -1", "record_decisions_bytes: 1099511627776", "record_decisions_bytes: lots"},
		"metrics_web_config":     {"metrics_web_config: /etc/roam/web.yml", "metrics_addr: 127.0.0.1:9947\nmetrics_web_config: rel.yml", "metrics_addr: 127.0.0.1:9947\nmetrics_web_config: " + badWeb},
		"jobs": {"jobs: {default_cpus: 0}", "jobs: {default_cpus: 0.0005}", "jobs: {default_cpus: -1}", "jobs: {default_cpus: .inf}",
			"jobs: {default_mem_bytes: 1}", "jobs: {default_mem_bytes: 67108864, memory_bytes: 33554432}", "jobs: {pids: 1}", "jobs: {pids: 99999999}",
			"jobs: {memory_bytes: 1}", "jobs: {memory_bytes: -1}"},
		"server": {"server: {header_timeout: 1ms}", "server: {first_request_timeout: 0s}", "server: {first_request_timeout: 11m}", "server: {idle_timeout: 2h}", "server: {body_timeout: 0s}", "server: {body_timeout: 10}", "server: {write_timeout: 2h}"},
		"fence": {"fence: {lease: 500ms}", "fence: {lease: soon}", "fence: {kill: 20s}", "fence: {kill: 10s}", "fence: {margin: 0s}",
			"fence: {margin: -1s}", "fence: {kill: 9m, margin: 2m}"},
	}
	// Every key of the config and its sections has a row.
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(ty reflect.Type, prefix string) {
		for f := range ty.Fields() {
			k := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
			keys = append(keys, k)
			if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.PkgPath(), "roam/") {
				walk(f.Type, k+".")
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	for _, k := range keys {
		top, sub, nested := strings.Cut(k, ".")
		if !nested {
			if len(bad[k]) == 0 {
				t.Errorf("config key %s has no wrong value here", k)
			}
			continue
		}
		if !slices.ContainsFunc(bad[top], func(y string) bool { return strings.Contains(y, "{"+sub+":") || strings.Contains(y, ", "+sub+":") }) {
			t.Errorf("config key %s has no wrong value here", k)
		}
	}
	for key, ys := range bad {
		for _, y := range ys {
			// A section's keys name themselves: "limits.run_count".
			want := key
			if s, ok := strings.CutPrefix(y, key+": {"); ok {
				want = key + "." + strings.SplitN(s, ":", 2)[0]
				if strings.HasPrefix(y, "limits: {spool_bytes_per_user") {
					want = "limits.spool_bytes_per_user"
				}
			}
			text := base
			if strings.Contains(base, key+": ") {
				text = strings.Join(slices.DeleteFunc(strings.Split(base, "\n"), func(l string) bool { return strings.HasPrefix(l, key+": ") }), "\n")
			}
			_, _, err := check(write(text + "\n" + y + "\n"))
			if err == nil {
				t.Errorf("%s: accepted", y)
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
				t.Errorf("%s: %q, want one line naming %s", y, msg, want)
			}
		}
	}
}

// The sample config the package installs names every key, with its
// default, so an admin finds each there; uncommented, it is a config
// roamd takes.
func TestSampleConfigNamesEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../packaging/roamd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sample := string(b)
	var walk func(ty reflect.Type, indent string)
	walk = func(ty reflect.Type, indent string) {
		for f := range ty.Fields() {
			k := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !strings.Contains(sample, "\n#"+indent+k+":") && !strings.Contains(sample, "\n"+indent+k+":") {
				t.Errorf("packaging/roamd.yaml does not name %q", k)
			}
			if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.PkgPath(), "roam/") {
				walk(f.Type, indent+"  ")
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	var lines []string
	for _, l := range strings.Split(sample, "\n") {
		if strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "# ") && l != "#" {
			l = strings.TrimPrefix(l, "#")
		}
		lines = append(lines, l)
	}
	text := strings.Join(lines, "\n")
	text = strings.Replace(text, "advertise_addr: 192.0.2.11", "advertise_addr: 127.0.0.1", 1)
	if _, err := config.Parse([]byte(text)); err != nil {
		t.Fatalf("the sample, uncommented: %v", err)
	}
}
