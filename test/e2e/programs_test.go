package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A real program, unmodified and written elsewhere, of a kind users run
// on clusters: its command, the input it starts from, and the files it
// leaves as its result.
type realProgram struct {
	name  string
	what  string
	argv  []string
	setup func(t *testing.T, dir string) // writes its input into dir
	// results are the files it writes, by name in its directory; with
	// stdout, its output is compared too.
	results []string
	stdout  bool
}

// Each real program starts on node 1 as the job user, a user's job, and
// is moved twice while it runs (1→2→3), with its working directory, its
// input and its temporary files (TMPDIR) in a directory every node shares,
// as a cluster's users keep them. Its results, and its output where it is
// deterministic, must be byte-identical to those of the same program run
// here by the same user on the same input, unmigrated.
func TestRealPrograms(t *testing.T) {
	programs := []realProgram{
		{
			name: "sort", what: "GNU sort of 32 MiB on three keys, 2 threads, 2 MiB of memory, spilling to temporary files",
			argv:  []string{"sort", "--parallel=2", "-S", "2M", "-T", "tmp", "-k2,2", "-k3,3", "-k4,4n", "-o", "sorted", "input"},
			setup: textInput(32 << 20), results: []string{"sorted"},
		},
		{
			name: "xz", what: "xz compressing a 4 MiB file (one thread, preset 6)",
			argv: []string{"xz", "-T1", "-6", "-k", "input"}, setup: textInput(4 << 20), results: []string{"input.xz"},
		},
		{
			name: "python3", what: "the Python interpreter, a seeded Monte Carlo estimate of π",
			argv: []string{"python3", "mc.py"}, setup: writeFile("mc.py", monteCarloPy), stdout: true,
		},
		{
			name: "sqlite3", what: "the SQLite shell writing a database in 30 transactions (journal, locks), computing between them",
			argv: []string{"sqlite3", "results.db", ".read work.sql"}, setup: writeFile("work.sql", sqliteScript(30)),
			results: []string{"results.db"}, stdout: true,
		},
		{
			name: "make", what: "make -j2 building a C program of 10 files with gcc -O2",
			argv: []string{"make", "-j2"}, setup: cProject(10),
			results: []string{"prog", "u00.o", "u01.o", "u02.o", "u03.o", "u04.o", "u05.o", "u06.o", "u07.o", "u08.o", "u09.o", "main.o"},
		},
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "PYTHONHASHSEED=0"}
	for _, p := range programs {
		if _, err := exec.LookPath(filepath.Join("/usr/bin", p.argv[0])); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh installs it): %v", p.argv[0], err)
		}
	}
	// Not t.TempDir, whose parent only root may enter: the programs run
	// as the job user, here and on the cluster.
	root, err := os.MkdirTemp("", "programs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	// The unmigrated runs, here, while the cluster comes up.
	refOut := make([][]byte, len(programs))
	refErr := make([]error, len(programs))
	var refs sync.WaitGroup
	for i, p := range programs {
		dir := filepath.Join(root, "ref", p.name)
		prepare(t, dir, p)
		refs.Go(func() {
			cmd := exec.Command(p.argv[0], p.argv[1:]...)
			cmd.Path = filepath.Join("/usr/bin", p.argv[0])
			cmd.Dir, cmd.Env = dir, append(env, "TMPDIR="+filepath.Join(dir, "tmp"))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: jobUser.uid, Gid: jobUser.gid, Groups: jobUser.groups}}
			refOut[i], refErr[i] = cmd.Output()
		})
	}
	// Half a core on nodes 1 and 2: the five together need tens of
	// seconds there, whatever this machine's speed, and the hops take a
	// few; a whole one on node 3, where they end.
	c := upCluster(t, "e2eprogs", 39, "--nodes", "3", "--cpu", "0.5,0.5,1", "--scheduler", "static")
	c.waitAllAlive(3)
	ids := make([]string, len(programs))
	for i, p := range programs {
		dir := filepath.Join(root, "roam", p.name)
		prepare(t, dir, p)
		cmd := c.roamAs(jobUser, append([]string{"--node", "1", "run", "-d", "--on", "1", "--"}, p.argv...)...)
		cmd.Dir, cmd.Env = dir, append(cmd.Env, append(env, "TMPDIR="+filepath.Join(dir, "tmp"))...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("roam run %s: %v: %s", p.name, err, out)
		}
		ids[i] = strings.TrimSpace(string(out))
		t.Cleanup(func() { c.run("--node", "1", "kill", "-s", "KILL", ids[i]) })
	}
	// Two hops each, one right after the other, once it has done some
	// work: each needs seconds of CPU more, at a share of node 1's 0.5;
	// those that need the most go last.
	for i, p := range programs {
		waitFor(t, time.Minute, ids[i]+" at work", func() (bool, string) {
			j := c.job(ids[i])
			return j.CPUSeconds >= 0.3, fmt.Sprintf("%s, %.2f CPU seconds", j.State, j.CPUSeconds)
		})
		for hop, to := range []string{"2", "3"} {
			tries := migrateRunning(t, c, ids[i], to)
			t.Logf("%s: hop %d to node %s after %d attempt(s)", p.name, hop+1, to, tries)
		}
	}
	refs.Wait()
	var table strings.Builder
	table.WriteString("| program | what it does | result |\n|---|---|---|\n")
	for i, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			c.t = t
			if refErr[i] != nil {
				t.Fatalf("the unmigrated run: %v", refErr[i])
			}
			j := c.waitFinished(ids[i], 5*time.Minute)
			if j.ExitCode == nil || *j.ExitCode != 0 {
				out, _ := c.run("--node", "1", "logs", ids[i])
				t.Fatalf("exit %v: %s", j.ExitCode, out)
			}
			if j.Migrations != 2 || j.Node != "3" {
				t.Fatalf("%d migrations, ended on node %s; want 2 and node 3", j.Migrations, j.Node)
			}
			for _, f := range p.results {
				a, errA := os.ReadFile(filepath.Join(root, "roam", p.name, f))
				b, errB := os.ReadFile(filepath.Join(root, "ref", p.name, f))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Fatalf("%s differs from the unmigrated run's (%d vs %d bytes, %v, %v)", f, len(a), len(b), errA, errB)
				}
			}
			if p.stdout {
				got := c.mustRun("--node", "1", "logs", ids[i])
				if got != string(refOut[i]) {
					t.Fatalf("output differs from the unmigrated run's:\nmigrated:\n%.2000s\nunmigrated:\n%.2000s", got, refOut[i])
				}
			}
			if p.name == "sort" {
				if tmp, _ := os.ReadDir(filepath.Join(root, "roam", p.name, "tmp")); len(tmp) != 0 {
					t.Fatalf("sort left %d temporary files", len(tmp))
				}
			}
			same := strings.Join(p.results, ", ")
			if p.stdout {
				same = strings.TrimPrefix(same+", its output", ", ")
			}
			fmt.Fprintf(&table, "| `%s` | %s | moved 1→2→3 while running; %s byte-identical to an unmigrated run's |\n", strings.Join(p.argv, " "), p.what, same)
		})
	}
	if !t.Failed() {
		checkDocTable(t, "../../docs/migration.md", "programs", table.String())
	}
}

// migrateRunning moves job id to node to, and retries while the move is
// refused or fails for what the job holds at that moment (a program
// between two files, a database inside a transaction); it fails the test
// when the job has ended first. It returns the attempts made.
func migrateRunning(t *testing.T, c *cluster, id, to string) int {
	t.Helper()
	for try := 1; ; try++ {
		out, err := c.run("--node", "1", "migrate", id, to)
		if err == nil {
			if j := c.job(id); j.Node != to {
				t.Fatalf("%s migrated to %s but is on %s", id, to, j.Node)
			}
			return try
		}
		j := c.job(id)
		if j.State != "running" {
			t.Fatalf("%s is %s before its move to node %s: make its work longer (%s)", id, j.State, to, out)
		}
		if try == 30 {
			t.Fatalf("%s: 30 attempts to move it to node %s failed; the last: %s", id, to, out)
		}
		t.Logf("%s to node %s, attempt %d: %s", id, to, try, strings.TrimSpace(out))
		time.Sleep(200 * time.Millisecond)
	}
}

// prepare makes a program's directory, with its input and a tmp
// directory for its temporary files.
func prepare(t *testing.T, dir string, p realProgram) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.setup(t, dir)
	// The job user's, as a user's files are.
	err := filepath.WalkDir(filepath.Dir(dir), func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(jobUser.uid), int(jobUser.gid))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(name, content string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// textInput writes n bytes of seeded pseudo-random lines of words as
// "input": the same every run.
func textInput(n int) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		f, err := os.Create(filepath.Join(dir, "input"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		r := rand.New(rand.NewPCG(1, 2))
		words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega")
		for written := 0; written < n; {
			k, _ := fmt.Fprintf(w, "%08x %s %s %d\n", r.Uint32(), words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(1000000))
			written += k
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// cProject writes n C files of one long function each, a main and a
// Makefile.
func cProject(n int) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		r := rand.New(rand.NewPCG(3, 4))
		var mk, main strings.Builder
		mk.WriteString("OBJS =")
		main.WriteString("#include <stdio.h>\n")
		for i := 0; i < n; i++ {
			var b strings.Builder
			fmt.Fprintf(&b, "unsigned long f%02d(unsigned long x) {\n\tunsigned long a = x;\n", i)
			for k := 0; k < 500; k++ {
				fmt.Fprintf(&b, "\ta = a * %d + (a >> %d) ^ %d;\n\tif (a %% %d == %d)\n\t\ta += x * %d;\n",
					3+r.IntN(996), 1+r.IntN(30), r.IntN(1<<20), 3+r.IntN(94), r.IntN(3), 1+r.IntN(98))
			}
			b.WriteString("\treturn a;\n}\n")
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("u%02d.c", i)), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&mk, " u%02d.o", i)
			fmt.Fprintf(&main, "unsigned long f%02d(unsigned long);\n", i)
		}
		main.WriteString("int main(void) {\n\tunsigned long s = 0;\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&main, "\ts += f%02d(%d);\n", i, i+1)
		}
		main.WriteString("\tprintf(\"%lu\\n\", s);\n\treturn 0;\n}\n")
		mk.WriteString(" main.o\nprog: $(OBJS)\n\tgcc -o prog $(OBJS)\n%.o: %.c\n\tgcc -O2 -c $< -o $@\n")
		for name, s := range map[string]string{"main.c": main.String(), "Makefile": mk.String()} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// monteCarloPy estimates π from a seeded generator, printing its count as
// it goes and a digest of every count at the end.
const monteCarloPy = `import hashlib, random
r = random.Random(20261124)
h = hashlib.sha256()
inside = 0
n = 6000000
for i in range(1, n + 1):
    x, y = r.random(), r.random()
    if x * x + y * y < 1.0:
        inside += 1
    if i % 500000 == 0:
        h.update(str(inside).encode())
        print(i, inside, flush=True)
print("pi", 4 * inside / n, h.hexdigest())
`

// sqliteScript creates a table and writes rounds transactions of 500 rows,
// each after a computation that touches no table (so the database is not
// locked then), printing the computation's result.
func sqliteScript(rounds int) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE r(i INTEGER PRIMARY KEY, round INTEGER, v INTEGER, s TEXT);\nCREATE INDEX r_v ON r(v);\n")
	for k := 1; k <= rounds; k++ {
		fmt.Fprintf(&b, "WITH RECURSIVE c(x) AS (SELECT %d UNION ALL SELECT x + 1 FROM c LIMIT 600000) SELECT %d, sum(x * x %% 1000003) FROM c;\n", k, k)
		fmt.Fprintf(&b, "BEGIN;\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 500) INSERT INTO r(round, v, s) SELECT %d, (x * %d) %% 1000003, hex(x * %d) FROM c;\nCOMMIT;\n", k, 7919*k, k)
	}
	b.WriteString("SELECT count(*), sum(v) FROM r;\n")
	return b.String()
}
