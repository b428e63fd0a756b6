package agent

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roam/internal/agent/config"
	"roam/internal/secret"
)

// A local user who makes the agent's image directory first (under the
// world-writable /dev/shm), with a symlink inside to what they want root
// to remove or restore from, stops the agent from starting: it names the
// directory and deletes nothing.
func TestAgentRefusesImageDirMadeByAUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: the check is about root's ownership")
	}
	shm, err := os.MkdirTemp("/dev/shm", "roam-premade-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	// shm stands for /dev/shm: world-writable and sticky.
	if err := os.Chmod(shm, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}

	// The user's tree: shm/roam (theirs) with roam/c -> victim.
	userRoam := filepath.Join(shm, "roam")
	if err := os.Mkdir(userRoam, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(userRoam, "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(userRoam, "c"), 1001, 1001); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(userRoam, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	// And one made by root by mistake with the symlink as its last part.
	rootRoam := filepath.Join(shm, "rootroam")
	if err := os.Mkdir(rootRoam, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(rootRoam, "n1")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ imageDir, names string }{
		{filepath.Join(userRoam, "c", "n1"), userRoam},
		{filepath.Join(rootRoam, "n1"), filepath.Join(rootRoam, "n1")},
	} {
		cfg := config.Default()
		cfg.NodeID = "n1"
		cfg.BindAddr, cfg.GossipPort, cfg.PeerPort = "198.18.41.1", 7946, 7947
		cfg.SecretFile = sf
		cfg.StateDir = filepath.Join(t.TempDir(), "state")
		cfg.ImageDir = c.imageDir
		cfg.Socket = filepath.Join(cfg.StateDir, "unused.sock")
		w := newWorld(1)
		fn := &fakeNode{w: w, name: "n1", spool: filepath.Join(cfg.StateDir, "spool")}
		mn := newMemnet(1, faults{})
		api := &memListener{addr: "198.18.41.1:0", accept: make(chan net.Conn), done: make(chan struct{})}
		a, err := New(cfg, Parts{API: api, Transport: mn.transport("198.18.41.1"), Gossip: mn.gossipTransport("198.18.41.1"),
			GossipKey: secret.New().GossipKey(), Checkpointer: fn, Processes: fn, Prober: fn}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		err = a.Start()
		if err == nil {
			a.Close()
			t.Fatalf("image_dir %s: the agent started", c.imageDir)
		}
		if !strings.Contains(err.Error(), "image_dir: "+c.names+":") {
			t.Fatalf("image_dir %s: %v; want the error to name %s", c.imageDir, err, c.names)
		}
		t.Logf("refused: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "precious")); err != nil || string(b) != "keep" {
		t.Fatalf("the symlink's target changed: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 1 {
		t.Fatalf("the agent made %d entries in the symlink's target", len(ents)-1)
	}
}
